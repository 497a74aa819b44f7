/**
 * The row interface under the embedded stores' engine (queues.ts, exchanges.ts): what SQLite and the
 * log store each implement, and all they implement — how rows are kept, found and changed. What a
 * queue means (dedup, overflow, priorities, dead-lettering, the in-flight ceiling, leases, retention)
 * is written once, in the engine, over these calls.
 *
 * Calls take and give arrays where a store can do the work as one set-based statement (SQLite's
 * leases, deletes), and run inside the store's transaction: the engine calls them synchronously from
 * inside one write, and a write that throws leaves nothing of itself (SQLite rolls back its savepoint,
 * the log store undoes its changes).
 *
 * Two things stay storage's own, because each store keeps them as its structure: a FIFO group's head
 * (deleting a group's head makes the next message of the group its head, within the same call), and
 * the order of lease candidates (a FIFO queue's available heads; a standard queue's available messages,
 * higher priority first, then by visibility).
 */
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type { MessageState, NewMessage, StoredMessage } from "../../model/message.js";
import type {
  QueueAttributes,
  QueueCounters,
  QueueDepth,
  QueueKind,
  QueueRecord,
} from "../../model/queue.js";

/** What the engine reads of a queue row. */
export interface QueueSlot {
  readonly name: string;
  readonly kind: QueueKind;
}

/** What the engine reads of a message row, whatever else the store keeps with it. */
export interface MessageSlot {
  seq: number;
  deliveryCount: number;
  firstDeliveredAt: number | null;
  visibleAt: number;
  leaseToken: number | null;
  key: string | null;
  /** The FIFO group (the key, "" without one) in a FIFO queue; null in a standard queue. */
  groupKey: string | null;
}

/** A lease a message is stored with (a send's hand-off). */
export interface InsertLease {
  visibleAt: number;
  firstDeliveredAt: number;
  token: number;
}

/** One message to store. `copyOf` is the row it copies (a dead letter), whose body check it keeps. */
export interface MessageInsert<M> {
  message: NewMessage;
  lease?: InsertLease;
  copyOf?: M;
  /** Stored marked corrupt (never leased): a dead letter of a body that failed its check. */
  corrupt?: boolean;
}

/** What a lease writes on each message: until leaseExpiresAt, token tokenBase + seq, one more delivery,
 * first delivered now unless it was before. */
export interface LeaseWrite {
  leaseExpiresAt: number;
  tokenBase: number;
  now: number;
}

export interface QueueRows<Q extends QueueSlot, M extends MessageSlot> {
  // ---- queues
  queue(name: string): Q | undefined;
  queueRecord(queue: Q): QueueRecord;
  /** The queues in name order (names after `after`, at most `limit`). */
  queueRecords(page: { after: string; limit: number | undefined }): QueueRecord[];
  /** The same page, each queue with its depth at `now` as depth() reports it, read together. */
  queuesWithDepth(
    page: { after: string; limit: number | undefined },
    now: number,
  ): { queue: QueueRecord; depth: QueueDepth }[];
  queueCounters(queue: Q): QueueCounters;
  queueCount(): number;
  queueInsert(name: string, kind: QueueKind, attributes: QueueAttributes, now: number): void;
  queueSetAttributes(queue: Q, attributes: QueueAttributes): void;
  /** Removes the queue with its messages, dedupIds and the bindings to it; answers the messages removed. */
  queueRemove(queue: Q): number;
  /** The other queues whose dead-letter target is the queue `name`. */
  deadLetterSources(name: string): string[];
  exchangeExists(name: string): boolean;
  countersAdd(queue: Q, deltas: Partial<QueueCounters>): void;
  /** The highest seq given to any message so far: every message stored before now is at or below it. */
  lastSeq(): number;

  // ---- deduplication
  dedupLookup(queue: Q, dedupId: string, now: number): string | undefined;
  dedupRemember(queue: Q, dedupId: string, messageId: string, expiresAt: number): void;
  dedupForgetExpired(queue: Q, now: number): void;

  // ---- messages
  /** Stores the messages in order; answers each one's seq. */
  insert(queue: Q, inserts: readonly MessageInsert<M>[]): number[];
  delete(queue: Q, messages: readonly M[]): void;
  /** Deletes up to `limit` of the queue's messages at or below `lastSeq`; answers how many. */
  deleteStep(queue: Q, lastSeq: number, limit: number): number;
  /** Deletes the message whose latest lease the receipt names; answers whether there was one. */
  deleteByReceipt(queue: Q, receipt: { seq: number; leaseToken: number }): boolean;
  /** Deletes up to `max` messages published at or before `expiredBefore`; answers how many. */
  deleteExpired(queue: Q, expiredBefore: number, max: number): number;
  byReceipt(queue: Q, receipt: { seq: number; leaseToken: number }): M | undefined;
  /** The oldest messages by arrival, in any state. */
  oldest(queue: Q, limit: number): M[];
  /** The next messages a lease may take, in the order it takes them; none published at or before
   * expiredBefore. */
  candidates(queue: Q, now: number, expiredBefore: number, limit: number): M[];
  countInFlight(queue: Q, now: number): number;
  lease(queue: Q, messages: readonly M[], lease: LeaseWrite): void;
  /** Ends the message's lease (a nack): visible again at visibleAt, its delivery count kept. */
  release(queue: Q, message: M, visibleAt: number): void;
  extendLease(queue: Q, message: M, leaseExpiresAt: number): void;
  /** Marks the message corrupt where it is: never leased again, counted in its depth's `corrupt`. */
  markCorrupt(queue: Q, message: M, now: number): void;
  /** Whether the message's body is what was stored (its checksum holds, where the store keeps one). */
  bodyIntact(message: M): boolean;
  markedCorrupt(message: M): boolean;
  stored(message: M): StoredMessage;
  /** The messages in one state, oldest visibility first. */
  peek(queue: Q, state: MessageState, now: number, limit: number): M[];
  /** The messages not in flight at `now`, oldest by arrival first. */
  movable(queue: Q, now: number, limit: number): M[];
  /** The messages in flight at `now` (their seq and order key are what is read). */
  inFlight(queue: Q, now: number): MessageSlot[];
  /** Messages whose lease ended in [visibleFrom, now] after maxDeliveries deliveries. */
  exhausted(
    queue: Q,
    window: { visibleFrom: number; now: number; maxDeliveries: number; limit: number },
  ): M[];
  depth(queue: Q, now: number): QueueDepth;
  nextEvents(queue: Q, now: number): { nextVisibleAt: number | null; oldestPublishedAt: number | null };

  // ---- what a store holds
  /** A mark of what the store holds now; capacityCheck refuses (throws) when a send took it past the
   * store's bound. SQLite's file has no such bound. */
  capacityMark(): number;
  capacityCheck(mark: number): void;
}

export interface ExchangeSlot {
  readonly name: string;
  readonly type: ExchangeType;
}

export interface ExchangeRows<X extends ExchangeSlot> {
  exchange(name: string): X | undefined;
  exchangeRecord(exchange: X): ExchangeRecord;
  /** Every exchange, in name order. */
  exchangeRecords(): ExchangeRecord[];
  exchangeInsert(name: string, type: ExchangeType, alternate: string | null, now: number): void;
  exchangeSetAlternate(exchange: X, alternate: string | null): void;
  /** Removes the exchange, its bindings, and the bindings to it. */
  exchangeRemove(exchange: X): void;
  /** The queues that dead-letter through the exchange `name`. */
  deadLetterExchangeSources(name: string): string[];
  queueExists(name: string): boolean;
  /** Answers whether the binding is new. */
  bindingPut(exchange: X, destination: BindingDestination, pattern: string): boolean;
  /** Answers whether there was such a binding. */
  bindingRemove(exchange: X, destination: BindingDestination, pattern: string): boolean;
  /** Removes every binding to `destination` (a stream being deleted). */
  bindingsRemoveTo(destination: BindingDestination): void;
}
