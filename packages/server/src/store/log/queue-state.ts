/**
 * The log store's state in memory (log-state.ts changes it): each queue's messages and the indexes
 * that a lease, an ack and a scan read, each exchange's bindings, and the conversions to the Store's
 * records. Nothing here writes the log or records an undo: the primitives of log-state.ts do both around
 * these calls.
 *
 * Invariants:
 * - Every message is in its queue's `messages`, and in exactly one lease order: its priority's heap
 *   (standard queue), or, while it is its group's head, the heads heap (FIFO queue).
 *   A FIFO message is in its group's array, in seq order, and is the head exactly when it is first.
 * - `leased` holds exactly the queue's messages with a lease token.
 */
import { invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import type {
  BindingDestination,
  BindingRecord,
  ExchangeRecord,
  ExchangeType,
} from "../../model/exchange.js";
import { bodyByteLength, type StoredMessage } from "../../model/message.js";
import {
  depthOf,
  type QueueAttributes,
  type QueueCounters,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
  zeroCounters,
} from "../../model/queue.js";
import { type HeapSlot, IndexedHeap } from "./indexed-heap.js";
import type { InsertHead } from "./records.js";

/** Priorities run 0 to limits.priorityMax (NewMessage.priority), one index each. */
export const priorityLevels = limits.priorityMax + 1;

export interface Message extends HeapSlot {
  readonly seq: number;
  readonly queue: QueueState;
  readonly id: string;
  /** As it came (NewMessage.body): bytes, or a JSON body's text when its caller gave text. */
  readonly body: Buffer | string;
  readonly contentType: string;
  readonly headers: Record<string, string>;
  readonly key: string | null;
  readonly priority: number;
  readonly dedupId: string | null;
  /** FIFO queues only: the group (the key, or ""). */
  readonly groupKey: string | null;
  readonly publishedAt: number;
  visibleAt: number;
  deliveryCount: number;
  firstDeliveredAt: number | null;
  leaseToken: number | null;
  /** What it costs the store's memory and a snapshot, about (footprint). */
  readonly bytes: number;
}

export interface QueueState {
  readonly name: string;
  readonly kind: QueueKind;
  attributes: QueueAttributes;
  readonly createdAt: number;
  readonly counters: QueueCounters;
  readonly messages: Map<number, Message>;
  /** The lease order: a heap per priority (standard), or one heap of group heads (FIFO). */
  readonly ready: IndexedHeap<Message>[];
  readonly groups: Map<string, Group>;
  readonly leased: Set<Message>;
  readonly dedup: Map<string, { messageId: string; expiresAt: number }>;
  /**
   * Whether `messages` iterates in arrival order (publish time, then seq): true while every message
   * came in with a publish time no earlier than the one before (always, when the clock does not step
   * back) and none was put back by an undo. Then the oldest are the first: see `oldest`.
   */
  arrivalOrdered: boolean;
  /** The latest publish time among the messages linked since the queue was last empty. */
  lastPublishedAt: number;
}

export interface ExchangeState {
  readonly name: string;
  readonly type: ExchangeType;
  alternate: string | null;
  readonly createdAt: number;
  /** By `bindingKey`. */
  readonly bindings: Map<string, BindingRecord>;
}

/** Lease order: earlier visibility first, then arrival. */
export function visibleFirst(a: Message, b: Message): boolean {
  return a.visibleAt < b.visibleAt || (a.visibleAt === b.visibleAt && a.seq < b.seq);
}

/** Arrival order for the oldest-first paths (overflow, redrive): publish time, then seq. */
export function byArrival(a: Message, b: Message): number {
  return a.publishedAt - b.publishedAt || a.seq - b.seq;
}

export function byVisibility(a: Message, b: Message): number {
  return a.visibleAt - b.visibleAt || a.seq - b.seq;
}

export function bindingKey(destination: BindingDestination, pattern: string): string {
  return JSON.stringify([destination.kind, destination.name, pattern]);
}

export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function toStored(message: Message): StoredMessage {
  return {
    id: message.id,
    body: message.body,
    contentType: message.contentType,
    headers: message.headers,
    key: message.key,
    priority: message.priority,
    dedupId: message.dedupId,
    publishedAt: message.publishedAt,
    visibleAt: message.visibleAt,
    deliveryCount: message.deliveryCount,
    firstDeliveredAt: message.firstDeliveredAt,
  };
}

export function toQueueRecord(queue: QueueState): QueueRecord {
  return {
    name: queue.name,
    kind: queue.kind,
    attributes: { ...queue.attributes },
    createdAt: queue.createdAt,
    counters: { ...queue.counters },
  };
}

export function toExchangeRecord(exchange: ExchangeState): ExchangeRecord {
  const bindings = [...exchange.bindings.values()].sort(
    (a, b) =>
      compareText(a.destination.kind, b.destination.kind) ||
      compareText(a.destination.name, b.destination.name) ||
      compareText(a.pattern, b.pattern),
  );
  return {
    name: exchange.name,
    type: exchange.type,
    alternate: exchange.alternate,
    createdAt: exchange.createdAt,
    bindings: bindings.map((binding) => ({
      destination: { ...binding.destination },
      pattern: binding.pattern,
    })),
  };
}

/** The insert record that makes the message again as it is now, lease and all (a snapshot's). */
export function insertHeadOf(message: Message): InsertHead {
  // Written out, not spread from toStored: a snapshot builds one per message held.
  return {
    queue: message.queue.name,
    seq: message.seq,
    id: message.id,
    contentType: message.contentType,
    headers: message.headers,
    key: message.key,
    priority: message.priority,
    dedupId: message.dedupId,
    publishedAt: message.publishedAt,
    visibleAt: message.visibleAt,
    deliveryCount: message.deliveryCount,
    firstDeliveredAt: message.firstDeliveredAt,
    leaseToken: message.leaseToken,
  };
}

/** What a message adds to a snapshot, about: its body and its insert record's head. */
export function messageBytes(message: Message): number {
  return message.bytes;
}

/**
 * What a message costs, about: its body in bytes (the same figure whether it is held as text or as
 * bytes, so a body read back from the log counts as it did when sent), its strings and headers (as
 * UTF-16 units, as they are held), and a fixed overhead for its fields in memory and its insert
 * record's head.
 */
export function footprint(
  message: {
    id: string;
    contentType: string;
    key: string | null;
    dedupId: string | null;
    headers: Record<string, string>;
  },
  body: Buffer | string,
): number {
  let bytes =
    limits.logMessageOverheadBytes + bodyByteLength(body) + message.id.length + message.contentType.length;
  bytes += (message.key?.length ?? 0) + (message.dedupId?.length ?? 0);
  for (const name in message.headers) bytes += name.length + (message.headers[name]?.length ?? 0) + 8;
  return bytes;
}

/** What a remembered dedupId costs, about. */
export function dedupBytes(dedupId: string, messageId: string): number {
  return limits.logDedupEntryOverheadBytes + dedupId.length + messageId.length;
}

export function leaseOf(
  message: Message,
): Pick<Message, "visibleAt" | "leaseToken" | "deliveryCount" | "firstDeliveredAt"> {
  return {
    visibleAt: message.visibleAt,
    leaseToken: message.leaseToken,
    deliveryCount: message.deliveryCount,
    firstDeliveredAt: message.firstDeliveredAt,
  };
}

// ---- a queue's indexes

/** A queue with no messages: one heap per priority (standard), or one heap of group heads (FIFO). */
export function emptyQueue(
  name: string,
  kind: QueueKind,
  attributes: QueueAttributes,
  createdAt: number,
): QueueState {
  const levels = kind === "fifo" ? 1 : priorityLevels;
  return {
    name,
    kind,
    attributes,
    createdAt,
    counters: { ...zeroCounters },
    messages: new Map(),
    ready: Array.from({ length: levels }, () => new IndexedHeap<Message>(visibleFirst)),
    groups: new Map(),
    leased: new Set(),
    dedup: new Map(),
    arrivalOrdered: true,
    lastPublishedAt: Number.NEGATIVE_INFINITY,
  };
}

export function heapOf(message: Message): IndexedHeap<Message> {
  return message.queue.ready[message.priority] as IndexedHeap<Message>;
}

/**
 * Puts a message into every index of its queue. `position` is its place in its FIFO group when it
 * comes back by an undo, or -1 for the group's end; `restored` says it comes back by an undo.
 */
export function linkInQueue(message: Message, position: number, restored = false): void {
  const queue = message.queue;
  if (queue.messages.size === 0) {
    queue.arrivalOrdered = true;
    queue.lastPublishedAt = Number.NEGATIVE_INFINITY;
  }
  // A Map keeps insertion order: a message put back by an undo lands last, whatever its age.
  if (restored || message.publishedAt < queue.lastPublishedAt) queue.arrivalOrdered = false;
  queue.lastPublishedAt = Math.max(queue.lastPublishedAt, message.publishedAt);
  queue.messages.set(message.seq, message);
  if (message.leaseToken !== null) queue.leased.add(message);
  if (message.groupKey === null) {
    heapOf(message).push(message);
    return;
  }
  let group = queue.groups.get(message.groupKey);
  if (!group) {
    group = new Group();
    queue.groups.set(message.groupKey, group);
  }
  const index = position < 0 ? group.length : position;
  group.insert(index, message);
  if (index === 0) {
    // The message heads its group again: the one that was head (promoted when it left) steps back.
    const former = group.at(1);
    if (former) (queue.ready[0] as IndexedHeap<Message>).remove(former);
    (queue.ready[0] as IndexedHeap<Message>).push(message);
  }
}

/** Takes a message out of every index of its queue; answers its place in its FIFO group (or -1). */
export function unlinkFromQueue(message: Message): number {
  const queue = message.queue;
  queue.messages.delete(message.seq);
  queue.leased.delete(message);
  if (message.groupKey === null) {
    heapOf(message).remove(message);
    return -1;
  }
  const group = queue.groups.get(message.groupKey) as Group;
  const index = group.remove(message);
  if (index === 0) {
    const heads = queue.ready[0] as IndexedHeap<Message>;
    heads.remove(message);
    const next = group.at(0);
    if (next) heads.push(next);
  }
  if (group.length === 0) queue.groups.delete(message.groupKey);
  return index;
}

/**
 * A FIFO group's messages in seq order, its head first. Acks take heads, so taking the head is O(1):
 * the array keeps a start index and is compacted once the dead space before it is half the array.
 * Taking a message from the middle (a purge, a trim, expiry) is O(group).
 */
export class Group {
  private items: (Message | undefined)[] = [];
  private start = 0;

  get length(): number {
    return this.items.length - this.start;
  }

  at(index: number): Message | undefined {
    return this.items[this.start + index];
  }

  insert(index: number, message: Message): void {
    if (index === this.length) this.items.push(message);
    else if (index === 0 && this.start > 0) this.items[--this.start] = message;
    else this.items.splice(this.start + index, 0, message);
  }

  /** Takes the message out; answers where it was. */
  remove(message: Message): number {
    if (this.items[this.start] === message) {
      this.items[this.start++] = undefined;
      if (this.start >= limits.logGroupCompactMin && this.start * 2 >= this.items.length) {
        this.items = this.items.slice(this.start);
        this.start = 0;
      }
      return 0;
    }
    const at = this.items.indexOf(message, this.start);
    invariant(at >= 0, `message ${message.seq} is not in its group`);
    this.items.splice(at, 1);
    return at - this.start;
  }
}

// ---- scans

/** A scan of the queue: what is not visible now, and the oldest publish time. */
export function scanDepth(queue: QueueState, now: number): QueueDepth {
  let delayed = 0;
  let inFlight = 0;
  let oldest: number | null = null;
  for (const message of queue.messages.values()) {
    if (message.visibleAt > now) {
      if (message.leaseToken === null) delayed++;
      else inFlight++;
    }
    if (oldest === null || message.publishedAt < oldest) oldest = message.publishedAt;
  }
  return {
    available: depthOf(queue.counters) - delayed - inFlight,
    delayed,
    inFlight,
    corrupt: 0,
    oldestPublishedAt: oldest,
  };
}

/**
 * The queue's oldest messages by arrival that pass `filter`, at most `limit`: the first ones while the
 * queue is in arrival order (O(limit) when most pass), else by a scan and a sort (O(queue)).
 */
export function oldest(queue: QueueState, filter: (message: Message) => boolean, limit: number): Message[] {
  if (!queue.arrivalOrdered) return select(queue, filter, byArrival, limit);
  const chosen: Message[] = [];
  for (const message of queue.messages.values()) {
    if (chosen.length >= limit) break;
    if (filter(message)) chosen.push(message);
  }
  return chosen;
}

/** The queue's messages that pass `filter`, sorted, at most `limit`. */
export function select(
  queue: QueueState,
  filter: (message: Message) => boolean,
  order: (a: Message, b: Message) => number,
  limit: number,
): Message[] {
  const chosen: Message[] = [];
  for (const message of queue.messages.values()) if (filter(message)) chosen.push(message);
  return chosen.sort(order).slice(0, limit);
}

/**
 * The next messages a lease may take, in the order it takes them (the heaps read in order, without
 * taking anything out): a FIFO queue's available heads; a standard queue's available messages,
 * higher priority first, each priority in visibility order. Messages past retention are passed over.
 */
export function leaseCandidates(
  queue: QueueState,
  now: number,
  expiredBefore: number,
  limit: number,
): Message[] {
  const chosen: Message[] = [];
  for (let level = queue.ready.length - 1; level >= 0 && chosen.length < limit; level--) {
    const heap = queue.ready[level] as IndexedHeap<Message>;
    inOrder(heap.values(), visibleFirst, (message) => {
      // Everything still to visit becomes visible at or after this one.
      if (message.visibleAt > now) return "done";
      if (message.publishedAt > expiredBefore) chosen.push(message);
      return chosen.length < limit ? "go" : "done";
    });
  }
  return chosen;
}

/**
 * Visits a heap's items in order without changing it, as long as `visit` says "go": a second, small
 * heap of positions holds the frontier (each visited item's children), so visiting k items costs
 * O(k log k). "done" ends the walk.
 */
function inOrder<Item extends HeapSlot>(
  items: readonly Item[],
  before: (a: Item, b: Item) => boolean,
  visit: (item: Item) => "go" | "done",
): void {
  if (items.length === 0) return;
  const frontier = new IndexedHeap<{ heapIndex: number; at: number }>((a, b) =>
    before(items[a.at] as Item, items[b.at] as Item),
  );
  frontier.push({ heapIndex: -1, at: 0 });
  for (;;) {
    const next = frontier.pop();
    if (!next) return;
    if (visit(items[next.at] as Item) === "done") return;
    for (const child of [2 * next.at + 1, 2 * next.at + 2]) {
      if (child < items.length) frontier.push({ heapIndex: -1, at: child });
    }
  }
}
