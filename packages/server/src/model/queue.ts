/**
 * A queue as the domain knows it: its kind, its attributes with every default applied, its counters
 * and depth. Types and pure rules only; no I/O.
 */

export type QueueKind = "standard" | "fifo";

/** What a send does when the queue would hold more than `maxDepth` messages (docs/queues.md). */
export type OverflowPolicy = "reject" | "drop-oldest" | "dead-letter-oldest";

export interface RetryPolicy {
  initialDelayMs: number;
  multiplier: number;
  maxDelayMs: number;
  jitter: "full" | "none";
}

/**
 * Where a queue's messages go after `maxDeliveries` deliveries: a queue, or an exchange that routes
 * them with `routingKey` (a dead-letter exchange).
 */
export type DeadLetterTarget =
  | { queue: string; maxDeliveries: number }
  | { exchange: string; routingKey: string; maxDeliveries: number };

/**
 * A dead-letter target resolved for one store call: the queues that receive a copy (none, if an
 * exchange routes the key nowhere: the message is then dropped, and still counted as dead-lettered).
 */
export interface DeadLetterRoute {
  queues: string[];
  maxDeliveries: number;
}

/** A queue's attributes with every default applied: what the broker acts on. */
export interface QueueAttributes {
  visibilityTimeoutMs: number;
  retentionMs: number;
  delayMs: number;
  receiveWaitMs: number;
  maxMessageBytes: number;
  deadLetter: DeadLetterTarget | null;
  retry: RetryPolicy;
  /** The most messages (in every state) the queue holds, or null for no limit. */
  maxDepth: number | null;
  overflow: OverflowPolicy;
  /** How long a dedupId is remembered; 0 turns deduplication off. */
  dedupWindowMs: number;
  /** A message without a dedupId is deduplicated by the SHA-256 of its body. */
  contentBasedDedup: boolean;
  /** Publishes are refused (backpressure) while the queue holds at least this many messages. */
  pushbackDepth: number | null;
  /** Publishes are refused (backpressure) while the oldest message is at least this old. */
  pushbackAgeMs: number | null;
}

/** Counters since the queue was created; every way a message leaves the queue has one. */
export interface QueueCounters {
  published: number;
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
  purged: number;
  /** Removed by the drop-oldest overflow policy. */
  dropped: number;
  /** Moved out by a redrive. */
  redriven: number;
}

/** Counters with nothing counted: the base that a store's partial counter deltas are added to. */
export const zeroCounters: QueueCounters = {
  published: 0,
  delivered: 0,
  redelivered: 0,
  acked: 0,
  nacked: 0,
  expired: 0,
  deadLettered: 0,
  purged: 0,
  dropped: 0,
  redriven: 0,
};

/**
 * How many messages the queue holds now, from its counters alone: every message that arrived and has
 * not left by one of the counted ways. The stores use it for maxDepth, so it must stay exact.
 */
export function depthOf(counters: QueueCounters): number {
  return (
    counters.published -
    counters.acked -
    counters.expired -
    counters.deadLettered -
    counters.purged -
    counters.dropped -
    counters.redriven
  );
}

export interface QueueRecord {
  name: string;
  kind: QueueKind;
  attributes: QueueAttributes;
  createdAt: number;
  counters: QueueCounters;
}

/** How many messages are in each state at one instant, and the oldest one's publish time. */
export interface QueueDepth {
  available: number;
  delayed: number;
  inFlight: number;
  /**
   * Messages whose body failed its checksum and that had no dead-letter target: kept, never leased,
   * until a purge, a retention sweep or an overflow removes them. Only the SQLite store finds any (its
   * file keeps no page checksums); the log store checks a CRC on every record as it recovers, and
   * PostgreSQL its own page checksums where they are enabled, so both answer 0.
   */
  corrupt: number;
  oldestPublishedAt: number | null;
}
