/**
 * The rules a send, a lease and a dead-letter move apply, resolved from a queue's attributes: what
 * the broker passes to the store, and what the stores share. Pure functions.
 */
import { createHash } from "node:crypto";
import type { NewMessage, StoredMessage } from "./message.js";
import type { DeadLetterRoute, OverflowPolicy, QueueAttributes } from "./queue.js";

/**
 * What a send must apply in its queue, resolved by the broker from the queue's attributes.
 * - Deduplication: a message whose dedupId was stored in the queue less than `dedupWindowMs` ago
 *   (acked since or not) is not stored again; its id is answered instead. Later items of one batch
 *   are duplicates of earlier ones with the same dedupId.
 * - Overflow: if the queue would then hold more than `maxDepth` messages (depthOf), "reject" throws
 *   queue_full and stores nothing of the call; "drop-oldest" deletes the oldest messages (by arrival,
 *   in any state) down to maxDepth, counted as dropped; "dead-letter-oldest" moves them to
 *   `deadLetter` (reason max_depth), counted as dead-lettered. Dead letters arriving from another
 *   queue are never refused: for them "reject" lets the queue grow.
 */
export interface SendPolicy {
  dedupWindowMs: number;
  overflow: { maxDepth: number; policy: OverflowPolicy; deadLetter: DeadLetterRoute | null } | null;
}

export const noSendPolicy: SendPolicy = { dedupWindowMs: 0, overflow: null };

/**
 * The terms of a hand-off: the store leases, in the send's own transaction, up to `max` of the
 * messages it inserts that are visible at the send's `now` — in the order a lease takes them (higher
 * priority first, then in order) and within the in-flight ceiling — as a lease until leaseExpiresAt
 * would: delivery count 1, first delivered now, counted as delivered. It hands off only into a
 * standard queue and only for a send without an overflow policy whose messages have no dedupId;
 * otherwise it leases nothing. A store may lease fewer than that, down to none (the PostgreSQL store
 * hands off only in its one-statement send into one queue): the broker wakes other receives for
 * whatever a send left available. One send into one standard queue is always handed off.
 */
export interface Handoff {
  max: number;
  leaseExpiresAt: number;
  inFlightMax: number;
}

/**
 * Why a message was dead-lettered, as its x-dead-letter-reason header says: the broker's own reasons,
 * or the one a dead-lettering nack gives (`rejected` by default; any string within
 * limits.deadLetterReasonLengthMax).
 */
export type DeadLetterReason = "max_deliveries" | "max_depth" | "corrupt" | "rejected" | (string & {});

/** Headers the broker adds when it dead-letters a message (API.md). */
export function deadLetterHeaders(
  message: StoredMessage,
  sourceQueue: string,
  reason: DeadLetterReason,
): Record<string, string> {
  return {
    ...message.headers,
    "x-dead-letter-reason": reason,
    "x-original-queue": sourceQueue,
    "x-delivery-count": String(message.deliveryCount),
    "x-original-published-at": new Date(message.publishedAt).toISOString(),
  };
}

/** The send policy of a queue with these attributes; `deadLetter` is where dead-letter-oldest moves. */
export function sendPolicyOf(attributes: QueueAttributes, deadLetter: DeadLetterRoute | null): SendPolicy {
  return {
    dedupWindowMs: attributes.dedupWindowMs,
    overflow:
      attributes.maxDepth === null
        ? null
        : { maxDepth: attributes.maxDepth, policy: attributes.overflow, deadLetter },
  };
}

/**
 * The dedupId a message is stored with in a queue with these attributes: the one it carries, or with
 * content-based deduplication the SHA-256 of its body; none when the queue does not deduplicate.
 */
export function dedupIdFor(
  message: { body: Buffer | string; dedupId?: string | null },
  attributes: QueueAttributes,
): string | null {
  if (attributes.dedupWindowMs === 0) return null;
  if (message.dedupId) return message.dedupId;
  return attributes.contentBasedDedup ? createHash("sha256").update(message.body).digest("hex") : null;
}

/**
 * Which messages of a send its hand-off may lease, and in what order: for each message its rank
 * (1 for the first to lease) among the first `max` of those visible at `now` in lease order (higher
 * priority first, then in order), 0 for the others. Undefined when the send hands off nothing (no
 * hand-off, an overflow policy, a dedupId). The store leases ranks up to its in-flight room.
 */
export function handoffRanks(
  send: { messages: readonly NewMessage[]; policy: SendPolicy; handoff?: Handoff },
  now: number,
): number[] | undefined {
  const { handoff } = send;
  if (!handoff || send.policy.overflow !== null) return undefined;
  if (send.messages.some((message) => message.dedupId !== null)) return undefined;
  const order = send.messages
    .map((message, index) => ({ message, index }))
    .filter(({ message }) => message.visibleAt <= now)
    .sort((a, b) => b.message.priority - a.message.priority || a.index - b.index);
  const ranks = send.messages.map(() => 0);
  order.slice(0, handoff.max).forEach(({ index }, i) => {
    ranks[index] = i + 1;
  });
  return ranks;
}
