/** What the conformance suites share: a start time, queue attributes and message fixtures. */
import assert from "node:assert/strict";
import { HopperError } from "../errors.js";
import type { NewMessage } from "../model/message.js";
import type { QueueAttributes } from "../model/queue.js";

export const t0 = Date.UTC(2026, 0, 1);

export const attributes: QueueAttributes = {
  visibilityTimeoutMs: 30_000,
  retentionMs: 3_600_000,
  delayMs: 0,
  receiveWaitMs: 0,
  maxMessageBytes: 1024,
  deadLetter: null,
  retry: { initialDelayMs: 1000, multiplier: 2, maxDelayMs: 60_000, jitter: "none" },
  maxDepth: null,
  overflow: "reject",
  dedupWindowMs: 0,
  contentBasedDedup: false,
  pushbackDepth: null,
  pushbackAgeMs: null,
};

let nextId = 0;
export function message(
  overrides: {
    publishedAt?: number;
    visibleAt?: number;
    body?: string;
    key?: string;
    priority?: number;
    dedupId?: string;
    headers?: Record<string, string>;
  } = {},
): NewMessage {
  const publishedAt = overrides.publishedAt ?? t0;
  return {
    id: `id-${++nextId}`,
    body: Buffer.from(overrides.body ?? `body-${nextId}`),
    contentType: "text/plain",
    headers: overrides.headers ?? { "x-test": "yes" },
    key: overrides.key ?? null,
    priority: overrides.priority ?? 0,
    dedupId: overrides.dedupId ?? null,
    publishedAt,
    visibleAt: overrides.visibleAt ?? publishedAt,
  };
}

export async function rejectsWith(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => error instanceof HopperError && error.code === code);
}
