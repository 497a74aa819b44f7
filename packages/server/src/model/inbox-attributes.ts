/**
 * Turns the attributes a client sends for an inbox namespace into its complete attributes: validates
 * every range (the edge schema checks types; this is the authority on values) and fills the defaults.
 * On update, attributes the client leaves out keep their current values, as queues' do.
 */
import { HopperError } from "../errors.js";
import { inboxAttributeBounds as bounds, inboxDefaults } from "../limits.js";
import type { InboxAttributes } from "./inbox.js";

/** The attributes as the API accepts them (API.md "Inboxes"); null turns stopFanoutAfterMs off. */
export interface InboxAttributesInput {
  maxAgeMs?: number;
  maxDepth?: number;
  forgetDeviceAfterMs?: number;
  stopFanoutAfterMs?: number | null;
  dedupWindowMs?: number;
}

/** A new namespace's attributes before the client's. */
export const defaultInboxAttributes: InboxAttributes = { ...inboxDefaults };

function checkRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new HopperError("invalid_attribute", `${name} must be an integer from ${min} to ${max}.`, {
      attribute: name,
      min,
      max,
    });
  }
}

export function resolveInboxAttributes(
  current: InboxAttributes,
  input: InboxAttributesInput,
): InboxAttributes {
  const next: InboxAttributes = {
    maxAgeMs: input.maxAgeMs ?? current.maxAgeMs,
    maxDepth: input.maxDepth ?? current.maxDepth,
    forgetDeviceAfterMs: input.forgetDeviceAfterMs ?? current.forgetDeviceAfterMs,
    stopFanoutAfterMs:
      input.stopFanoutAfterMs === undefined ? current.stopFanoutAfterMs : input.stopFanoutAfterMs,
    dedupWindowMs: input.dedupWindowMs ?? current.dedupWindowMs,
  };
  checkRange("maxAgeMs", next.maxAgeMs, bounds.maxAgeMsMin, bounds.maxAgeMsMax);
  checkRange("maxDepth", next.maxDepth, 1, bounds.maxDepthMax);
  checkRange(
    "forgetDeviceAfterMs",
    next.forgetDeviceAfterMs,
    bounds.forgetDeviceAfterMsMin,
    bounds.forgetDeviceAfterMsMax,
  );
  if (next.stopFanoutAfterMs !== null) {
    checkRange(
      "stopFanoutAfterMs",
      next.stopFanoutAfterMs,
      bounds.stopFanoutAfterMsMin,
      bounds.stopFanoutAfterMsMax,
    );
  }
  checkRange("dedupWindowMs", next.dedupWindowMs, 0, bounds.dedupWindowMsMax);
  return next;
}
