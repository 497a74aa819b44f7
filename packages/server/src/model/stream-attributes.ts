/**
 * Turns the attributes a client sends for a stream into its complete attributes: validates every range
 * (the edge schema checks types; this is the authority on values) and fills the defaults. On update,
 * attributes the client leaves out keep their current values, as queues' do; null turns a retention
 * limit off.
 */
import { HopperError } from "../errors.js";
import { limits, streamDefaults } from "../limits.js";
import type { StreamAttributes } from "./stream.js";

/** The attributes as the API accepts them (API.md "Streams"). */
export interface StreamAttributesInput {
  retentionMs?: number | null;
  retentionBytes?: number | null;
  retentionRecords?: number | null;
  dedupWindowMs?: number;
  memberTimeoutMs?: number;
  groupIdleExpiryMs?: number;
}

/** A new stream's attributes before the client's. */
export const defaultStreamAttributes: StreamAttributes = { ...streamDefaults };

function checkRange(name: string, value: number | null, min: number, max: number): void {
  if (value === null) return;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new HopperError("invalid_attribute", `${name} must be an integer from ${min} to ${max}.`, {
      attribute: name,
      min,
      max,
    });
  }
}

export function resolveStreamAttributes(
  current: StreamAttributes,
  input: StreamAttributesInput,
): StreamAttributes {
  const pick = <K extends keyof StreamAttributes>(name: K): StreamAttributes[K] =>
    (input[name] === undefined ? current[name] : input[name]) as StreamAttributes[K];
  const next: StreamAttributes = {
    retentionMs: pick("retentionMs"),
    retentionBytes: pick("retentionBytes"),
    retentionRecords: pick("retentionRecords"),
    dedupWindowMs: pick("dedupWindowMs"),
    memberTimeoutMs: pick("memberTimeoutMs"),
    groupIdleExpiryMs: pick("groupIdleExpiryMs"),
  };
  checkRange("retentionMs", next.retentionMs, limits.streamRetentionMsMin, limits.streamRetentionMsMax);
  checkRange("retentionBytes", next.retentionBytes, 1, Number.MAX_SAFE_INTEGER);
  checkRange("retentionRecords", next.retentionRecords, 1, Number.MAX_SAFE_INTEGER);
  checkRange("dedupWindowMs", next.dedupWindowMs, 0, limits.dedupWindowMsMax);
  checkRange(
    "memberTimeoutMs",
    next.memberTimeoutMs,
    limits.streamMemberTimeoutMsMin,
    limits.streamMemberTimeoutMsMax,
  );
  checkRange(
    "groupIdleExpiryMs",
    next.groupIdleExpiryMs,
    limits.streamGroupIdleExpiryMsMin,
    limits.streamGroupIdleExpiryMsMax,
  );
  return next;
}
