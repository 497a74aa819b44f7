/**
 * The one interface between the broker and storage. Every method is one atomic transaction, named
 * entity-first then verb, and takes one params object. The broker decides policy (lease lengths,
 * retry delays, dead-letter targets) and passes it in; the store applies it atomically and knows
 * nothing of HTTP. Both the SQLite and the PostgreSQL store pass the same conformance suite.
 */
import { createHash } from "node:crypto";
import type { HopperError } from "../errors.js";

export type QueueKind = "standard" | "fifo";
/** How durable an embedded store's answer is. "fsync": it survives power loss. "os": it is written to
 * the OS, which flushes later; a process crash loses nothing, a power loss may lose the last writes. */
export type Durability = "fsync" | "os";

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

export type ExchangeType = "fanout" | "direct" | "topic";

export interface BindingDestination {
  kind: "queue" | "exchange";
  name: string;
}

export interface BindingRecord {
  destination: BindingDestination;
  pattern: string;
}

export interface ExchangeRecord {
  name: string;
  type: ExchangeType;
  /** Where messages that match no binding go, or null. */
  alternate: string | null;
  createdAt: number;
  bindings: BindingRecord[];
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

export interface NewMessage {
  id: string;
  /**
   * The body's bytes, or, for a JSON body, its text or bytes: the form it came in (a send over HTTP or
   * a WebSocket brings the bytes the producer sent; sendInTransaction serializes a value to text), so
   * the log store, which keeps either, converts nothing; SQLite's BLOB column and PostgreSQL's bytea take
   * bytes (bodyBytes). Its size is bodyByteLength.
   */
  body: Buffer | string;
  contentType: string;
  headers: Record<string, string>;
  key: string | null;
  /** 0–9, higher leased first; always 0 in a FIFO queue. */
  priority: number;
  /** Set when the queue deduplicates this message (the broker leaves it null otherwise). */
  dedupId: string | null;
  publishedAt: number;
  visibleAt: number;
}

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

/** One queue's part of a send: its messages, in order, and its policy. */
/** A page of the queue listing: the names after `after` (from the first when absent), at most `limit`. */
export interface QueueListPage {
  after?: string;
  limit?: number;
}

export interface QueueSend {
  queue: string;
  messages: NewMessage[];
  policy: SendPolicy;
  /** A receive waiting on the queue that takes messages of this send as they are written. */
  handoff?: Handoff;
}

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

/** What a send stored in one queue: the id standing for each message, and what it handed off. */
export interface SendOutcome {
  ids: string[];
  leased: LeasedMessage[];
}

export interface StoredMessage extends Omit<NewMessage, "body"> {
  /**
   * The body's bytes, or, for a JSON body, the same bytes as text (UTF-8): the SQLite store reads JSON
   * bodies as text, cheaper there than a Buffer (docs/benchmarks.md session 8); the log store hands a
   * body over as it came (NewMessage.body).
   */
  body: Buffer | string;
  deliveryCount: number;
  firstDeliveredAt: number | null;
  /** Set, by peek only, on a message whose body no longer matches the checksum stored with it. */
  corrupt?: true;
}

/** A body as bytes, to write it where only bytes go (a dead-letter copy, a move, PostgreSQL's bytea). */
export function bodyBytes(body: Buffer | string): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}

/** A body's size in bytes, the figure the queue's maxMessageBytes limits. */
export function bodyByteLength(body: Buffer | string): number {
  return typeof body === "string" ? Buffer.byteLength(body, "utf8") : body.length;
}

export interface LeasedMessage extends StoredMessage {
  /** Names this lease, not only the message: an ack with an older receipt is refused. */
  receipt: string;
}

export type MessageState = "available" | "delayed" | "in-flight";

/** The outcome of one item of a receipt batch; `stale_receipt` and `invalid_receipt` are per item. */
export type ReceiptResult = { ok: true } | { error: "stale_receipt" | "invalid_receipt" };

/**
 * Called with an ack's or nack's results once the store's state holds them, which for the log store is
 * before they are durable (its answer still waits): a push consumer gives the credit back then, as
 * the leases no longer count against what it may hold. A store that applies and makes durable in one
 * step (SQLite, PostgreSQL) need not call it; the answer does the same.
 */
export type Applied = (results: ReceiptResult[]) => void;

/**
 * What another broker node sharing the store changed: messages of a queue may have become available
 * (a send, a nack, a hand-back), a queue was created, updated or deleted, or an exchange or its
 * bindings changed, or a signal was published through another node. `resync` says changes may
 * have been missed (the store reconnected), so everything cached or waiting should look again.
 */
export type StoreEvent =
  | { kind: "messages"; queue: string }
  | { kind: "queue"; queue: string }
  | { kind: "exchange"; exchange: string }
  | { kind: "signal"; channel: string; dataJson: string }
  | { kind: "resync" };

export interface Store {
  /**
   * True when writes commit in the order they are called and a write called in the same turn of the
   * event loop as an earlier one commits with it (SQLite's group commit). Then a long poll woken as a
   * send is called leases in the send's own transaction, after it, and both share one commit and one
   * fsync. False when writes run side by side (a PostgreSQL pool): a lease called before the send has
   * committed could miss it, so long polls wake after the commit.
   */
  readonly commitsInCallOrder: boolean;

  /** Resolves when the store answers a trivial query; used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;

  /**
   * Calls `listener` for changes committed by other broker nodes, so that their long polls wake and
   * cached queue attributes are dropped. A store that only one process uses never calls it.
   */
  watch(listener: (event: StoreEvent) => void): void;

  /**
   * Whether this node leads housekeeping (retention, dead-letter sweeps) now. Correctness never
   * depends on it: leases end by time alone, and the work is idempotent. With one node, always true.
   */
  housekeepingLeader(): Promise<boolean>;

  /**
   * Hands an ephemeral signal to the other nodes sharing the store, which deliver it to their live
   * subscribers (`watch` reports it there as a `signal` event). Nothing is stored. A store that only
   * one process uses has no one to tell.
   */
  signalBroadcast(params: { channel: string; dataJson: string }): Promise<void>;

  /** Creates the queue, or updates its attributes. Throws queue_kind_mismatch, too_many_queues,
   * dead_letter_queue_not_found and (for a dead-letter exchange) exchange_not_found. */
  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }>;
  queueGet(params: { name: string }): Promise<QueueRecord | undefined>;
  queueList(): Promise<QueueRecord[]>;
  /** Deletes the queue, its messages and the bindings to it; returns how many messages went with it.
   * Throws queue_in_use when another queue dead-letters into it, queue_not_found when absent. */
  queueDelete(params: { name: string }): Promise<{ removed: number }>;
  queueDepth(params: { name: string; now: number }): Promise<QueueDepth>;
  /**
   * The queues in name order, each with its depth at `now` as queueDepth reports it, read together in
   * one statement (the queue listing and every /metrics scrape: thousands of queues in one call). A
   * page: only names after `after`, at most `limit` of them (all when absent).
   */
  queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]>;

  /**
   * Stores each send's messages in its queue, applying its policy (SendPolicy), all of them or none
   * (one exchange publish writes several queues). In a FIFO queue each message joins the group of
   * its key (a message without a key is in the queue's keyless group). Answers, per send and per
   * message, the id that stands for it: its own, or for a duplicate the original's; and the messages
   * leased to the send's hand-off (Handoff), in the order leased. Throws queue_not_found and
   * queue_full.
   */
  queueSendMany(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]>;

  /** Creates the exchange, or updates its alternate. Throws exchange_type_mismatch. */
  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }>;
  exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined>;
  exchangeList(): Promise<ExchangeRecord[]>;
  /** Deletes the exchange, its bindings and the bindings to it. Throws exchange_not_found, and
   * exchange_in_use when a queue dead-letters through it. */
  exchangeDelete(params: { name: string }): Promise<void>;
  /** Binds a destination to the exchange (idempotent). Throws exchange_not_found, queue_not_found. */
  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }>;
  /** Removes a binding; says whether there was one. Throws exchange_not_found. */
  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }>;

  /**
   * Leases up to `max` available messages, each until `leaseExpiresAt`, and increments their delivery
   * counts. In a standard queue: higher priority first, then in order of visibility. In a FIFO queue
   * only the oldest message of each group (its head) can be leased, so a group has at most one
   * message in flight and is delivered in order; groups are taken in order of their heads' visibility.
   * A candidate already delivered `deadLetter.maxDeliveries` times is moved to the dead-letter queue
   * instead (and in a FIFO queue the next message of its group becomes its head). Messages published
   * at or before `expiredBefore` are past retention and are neither leased nor counted here. With
   * `autoAck` the leased messages are deleted in the same transaction and counted as acked: the
   * caller gets them once, at most.
   *
   * The answer may come before the lease itself is durable, once the messages it hands out are (the log
   * store; docs/log-store.md): a crash then takes the lease back, the message is available again with
   * its delivery count as before, and the receipt is stale. With `autoAck` the deletes are durable first.
   *
   * A candidate whose body fails its checksum (SQLite only, docs/reliability.md) is never leased: it
   * goes to the dead-letter target with reason `corrupt`, or, without one, stays in the queue marked
   * corrupt (QueueDepth.corrupt). `corrupt` counts the messages found so.
   */
  queueLease(params: {
    queue: string;
    max: number;
    now: number;
    leaseExpiresAt: number;
    expiredBefore: number;
    inFlightMax: number;
    deadLetter: DeadLetterRoute | null;
    autoAck?: boolean;
  }): Promise<{ messages: LeasedMessage[]; deadLettered: number; corrupt?: number }>;

  /**
   * Deletes each message whose latest lease the receipt names. (Whenever a FIFO group's head leaves
   * the queue, by any path, the next message of the group becomes its head in the same transaction.)
   * The answer means durable; see `Applied` for the moment before.
   */
  queueAck(params: { queue: string; receipts: string[]; applied?: Applied }): Promise<ReceiptResult[]>;

  /**
   * Ends each named lease: the message becomes visible after `retryDelayMs(deliveryCount)`, or goes to
   * the dead-letter queue when it has been delivered `deadLetter.maxDeliveries` times. `applied` as in
   * queueAck.
   */
  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
    applied?: Applied;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }>;

  /** Moves each named lease's expiry to `leaseExpiresAt` (a heartbeat). */
  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]>;

  /** Reads messages in one state without leasing them, oldest visibility first. */
  queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]>;

  /** Deletes every message of the queue, leased or not, and counts them as purged. A store may do it
   * in steps, each its own commit (SQLite: invariants rule 20a); then it deletes the messages stored
   * before the call, and one sent meanwhile may stay. */
  queuePurge(params: { queue: string }): Promise<{ purged: number }>;

  /** Deletes up to `max` messages published at or before `expiredBefore`, counted as expired, and
   * forgets the queue's dedupIds whose window ended at or before `now`. */
  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }>;

  /**
   * Moves up to `max` of the queue's messages that are not in flight, oldest first (by arrival), to
   * `to`, or each to the queue its `x-original-queue` header names: a redrive step. A message in
   * flight holds back the later messages of its key (in a FIFO queue, of its group): they are passed
   * over, counted in `held`, so that order per key holds (redrive-order.ts). A moved message
   * keeps its id, body, headers and key; it arrives as new (delivery count 0, visible at `now`) and is
   * counted as published there and as redriven here. Messages are moved in order, so order per key
   * holds; the step stops before the first message it cannot move, with the reason: no target
   * (`invalid_request`), a target that does not exist or has no entry in `policies`
   * (`queue_not_found`), or a full target whose overflow policy is reject (`queue_full`). Targets'
   * send policies apply, except deduplication. Everything moved in one call is one transaction.
   */
  queueMove(params: {
    queue: string;
    to: string | null;
    max: number;
    now: number;
    policies: ReadonlyMap<string, SendPolicy>;
  }): Promise<{ moved: number; held: number; targets: string[]; stoppedBy: HopperError | null }>;

  /**
   * Moves up to `max` messages whose lease ended in [visibleFrom, now] and that have been delivered
   * `deadLetter.maxDeliveries` times to the dead-letter queue. The window is closed at both ends so
   * that consecutive sweeps overlap at their boundary and no lease ending on it is missed.
   */
  queueDeadLetterExhausted(params: {
    queue: string;
    visibleFrom: number;
    now: number;
    max: number;
    deadLetter: DeadLetterRoute;
  }): Promise<{ deadLettered: number }>;

  /**
   * What the scheduler needs to know when to look at the queue next: the earliest time after `now` at
   * which a message becomes visible, and the oldest publish time (retention counts from it).
   */
  queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }>;
}

/** Why a message was dead-lettered, as its x-dead-letter-reason header says. */
export type DeadLetterReason = "max_deliveries" | "max_depth" | "corrupt";

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
export function handoffRanks(send: QueueSend, now: number): number[] | undefined {
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
