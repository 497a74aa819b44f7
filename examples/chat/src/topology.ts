/**
 * What the application needs in Hopper, created idempotently by every process at start: the topic
 * exchange `chat.events`, the three queues bound to it with `message.committed`, each with its own
 * dead-letter queue, retry policy and lease, and the `chat` inbox namespace.
 */
import type { HopperClient, QueueAttributes } from "@hopper/client";
import { names, type WorkerName } from "./config.js";
import type { HopperInboxes } from "./hopper-inboxes.js";

/**
 * The dedup window of every queue: the relay's one duplicate (killed between Hopper's confirm and its
 * mark) comes again with the same dedupId within a restart, seconds to minutes.
 */
const dedupWindowMs = 10 * 60_000;

/**
 * Each queue's policy, chosen for what its worker calls. The workers consume in push mode, where the
 * server leases each delivery while the worker holds it; `visibilityTimeoutMs` is the lease of a pull
 * consumer (an operator's `hopper receive`, a worker switched to pull mode).
 */
export const queuePolicies: Record<WorkerName, QueueAttributes> = {
  // Inbox appends are fast and idempotent: retry soon.
  realtime: {
    visibilityTimeoutMs: 5_000,
    retry: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 5_000, jitter: "full" },
    deadLetter: { queue: "realtime.dlq", maxDeliveries: 20 },
    dedupWindowMs,
  },
  // A slow, flaky vendor: back off further, give up later; a revoked token is dead-lettered at once.
  push: {
    visibilityTimeoutMs: 15_000,
    retry: { initialDelayMs: 200, multiplier: 2, maxDelayMs: 3_000, jitter: "full" },
    deadLetter: { queue: "push.dlq", maxDeliveries: 30 },
    dedupWindowMs,
  },
  // The search index and the webhook: a receiver that is down may stay down for a while.
  integrations: {
    visibilityTimeoutMs: 15_000,
    retry: { initialDelayMs: 500, multiplier: 2, maxDelayMs: 30_000, jitter: "full" },
    deadLetter: { queue: "integrations.dlq", maxDeliveries: 25 },
    dedupWindowMs,
  },
};

export async function ensureTopology(hopper: HopperClient, inboxes: HopperInboxes): Promise<void> {
  await hopper.putExchange(names.exchange, { type: "topic" });
  for (const [worker, attributes] of Object.entries(queuePolicies) as [WorkerName, QueueAttributes][]) {
    const queue = names.queues[worker];
    await hopper.putQueue(`${queue}.dlq`);
    await hopper.putQueue(queue, attributes);
    await hopper.bind(names.exchange, { queue, pattern: names.routingKey });
  }
  await inboxes.put({});
}
