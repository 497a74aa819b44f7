/**
 * The log store's state (docs/log-store.md): every queue, exchange and message held in memory, changed
 * only through the primitives below, each of which records its inverse (for a call that throws) and
 * its change (for the log) with Commits. `apply` replays a change read from the log through the same
 * primitives; `snapshot` writes the whole state as records. LogStore (log-store.ts) calls them.
 *
 * Invariants:
 * - Every message is in `bySeq` exactly when it is in its queue's indexes.
 * - `lastSeq` is at least every seq ever given, across restarts and compactions (seqFloor).
 * - `liveBytes` is the sum of the footprints of the messages and dedupIds held.
 */
import { invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import type { BindingDestination, ExchangeType } from "../../model/exchange.js";
import type { NewMessage } from "../../model/message.js";
import type { QueueAttributes, QueueCounters, QueueKind } from "../../model/queue.js";
import type { SnapshotRecord } from "./append-log.js";
import type { Commits } from "./commits.js";
import { LogInboxState } from "./inbox-state.js";
import {
  bindingKey,
  dedupBytes,
  type ExchangeState,
  emptyQueue,
  footprint,
  heapOf,
  insertHeadOf,
  leaseOf,
  linkInQueue,
  type Message,
  messageBytes,
  priorityLevels,
  type QueueState,
  unlinkFromQueue,
} from "./queue-state.js";
import { type Change, changeType, type InsertHead, type LeaseFields, RecordWriter } from "./records.js";
import { LogStreamState } from "./stream-state.js";

export class LogState {
  readonly queues = new Map<string, QueueState>();
  readonly exchanges = new Map<string, ExchangeState>();
  readonly bySeq = new Map<number, Message>();
  lastSeq = 0;
  /** About what a snapshot of the state would write: what compaction weighs the log against. */
  liveBytes = 0;

  /** The inboxes, held beside the queues; what they hold counts in liveBytes. */
  readonly inboxes: LogInboxState;
  /** The streams, held beside the queues; what they hold in memory counts in liveBytes. */
  readonly streams: LogStreamState;

  constructor(private readonly commits: Commits) {
    this.inboxes = new LogInboxState(commits, (bytes) => {
      this.liveBytes += bytes;
    });
    this.streams = new LogStreamState(commits, (bytes) => {
      this.liveBytes += bytes;
    });
  }

  /**
   * Applies one change read from the log; `recordAt` is where its record's payload lies (segment and
   * offset), which places a body change's bytes.
   */
  apply(change: Change, recordAt: { seq: number; offset: number }): void {
    switch (change.type) {
      case changeType.queueCreate:
        this.createQueue(change.name, change.kind, change.attributes, change.createdAt);
        break;
      case changeType.queueAttributes:
        this.setAttributes(this.replayedQueue(change.name), change.attributes);
        break;
      case changeType.queueDrop:
        this.dropQueue(this.replayedQueue(change.name));
        break;
      case changeType.counters:
        this.addCounters(this.replayedQueue(change.queue), change.deltas);
        break;
      case changeType.dedupSet:
        this.setDedup(this.replayedQueue(change.queue), change.dedupId, change.messageId, change.expiresAt);
        break;
      case changeType.dedupForget:
        this.forgetDedup(this.replayedQueue(change.queue), change.dedupId);
        break;
      case changeType.insert:
        // The body is a view into the log's read buffer, which storeMessage copies out of.
        this.storeMessage(this.replayedQueue(change.head.queue), change.head, change.body);
        break;
      case changeType.lease:
        this.setLease(this.replayedMessage(change.seq), change);
        break;
      case changeType.delete:
        this.deleteMessage(this.replayedMessage(change.seq));
        break;
      case changeType.exchangeCreate:
        this.createExchange(change.name, change.exchangeType, change.alternate, change.createdAt);
        break;
      case changeType.exchangeAlternate:
        this.setAlternate(this.replayedExchange(change.name), change.alternate);
        break;
      case changeType.exchangeDrop:
        this.dropExchange(this.replayedExchange(change.name));
        break;
      case changeType.bindingPut:
        this.putBinding(this.replayedExchange(change.exchange), change.destination, change.pattern);
        break;
      case changeType.bindingDelete:
        this.removeBinding(this.replayedExchange(change.exchange), change.destination, change.pattern);
        break;
      case changeType.seqFloor:
        this.lastSeq = Math.max(this.lastSeq, change.seq);
        break;
      case changeType.inbox:
        this.inboxes.apply(change.change);
        break;
      case changeType.inboxBody:
        this.inboxes.applyBody(change.head, change.body, {
          seq: recordAt.seq,
          offset: recordAt.offset + change.bodyOffset,
        });
        break;
      case changeType.stream:
        this.streams.apply(change.change);
        break;
      case changeType.streamRecords:
        this.streams.applyRecords(change.head, change.sizes, {
          seq: recordAt.seq,
          payloadOffset: recordAt.offset,
          changeAt: change.changeAt,
        });
        break;
    }
  }

  /** A record names what earlier records made; anything else means the log is not this store's. */
  private replayedQueue(name: string): QueueState {
    const queue = this.queues.get(name);
    if (!queue) invariant(false, `the log names queue "${name}" before creating it`);
    return queue;
  }

  private replayedMessage(seq: number): Message {
    const message = this.bySeq.get(seq);
    if (!message) invariant(false, `the log names message ${seq} before inserting it`);
    return message;
  }

  private replayedExchange(name: string): ExchangeState {
    const exchange = this.exchanges.get(name);
    invariant(exchange, `the log names exchange "${name}" before creating it`);
    return exchange;
  }

  /**
   * The whole state as records: what compaction writes in place of the log so far. Queues and
   * exchanges first, so that every later record names something already made.
   */
  snapshot(): SnapshotRecord[] {
    const records: SnapshotRecord[] = [];
    const writer = new RecordWriter();
    /** Cuts a record every MiB or so: a whole snapshot need not fit one record. */
    const cut = (force = false) => {
      if (!writer.empty && (force || writer.bytes >= limits.logSnapshotRecordBytes))
        records.push(Buffer.from(writer.take()));
    };
    writer.seqFloor(this.lastSeq);
    for (const queue of this.queues.values()) {
      const { name, kind, attributes, createdAt } = queue;
      writer.json({ type: changeType.queueCreate, name, kind, attributes, createdAt });
      writer.json({ type: changeType.counters, queue: name, deltas: { ...queue.counters } });
      for (const [dedupId, { messageId, expiresAt }] of queue.dedup) {
        writer.json({ type: changeType.dedupSet, queue: name, dedupId, messageId, expiresAt });
        cut();
      }
      cut();
    }
    for (const exchange of this.exchanges.values()) {
      const { name, type, alternate, createdAt } = exchange;
      writer.json({ type: changeType.exchangeCreate, name, exchangeType: type, alternate, createdAt });
      for (const { destination, pattern } of exchange.bindings.values()) {
        writer.json({ type: changeType.bindingPut, exchange: name, destination, pattern });
      }
      cut();
    }
    this.inboxes.snapshot(writer, cut, () => cut(true), records);
    this.streams.snapshot(writer, cut, () => cut(true), records);
    // In seq order, so that each FIFO group is rebuilt in its order.
    for (const message of [...this.bySeq.values()].sort((a, b) => a.seq - b.seq)) {
      writer.insert(insertHeadOf(message), message.body);
      cut();
    }
    cut(true);
    return records;
  }

  // ---- the primitives: every change of state goes through one of these, which records its inverse
  // and, when there is a log, its record (records.ts); replaying the records calls them again.

  createQueue(name: string, kind: QueueKind, attributes: QueueAttributes, createdAt: number): QueueState {
    const queue = emptyQueue(name, kind, attributes, createdAt);
    this.queues.set(name, queue);
    this.commits.changed(
      () => this.queues.delete(name),
      (writer) => writer.json({ type: changeType.queueCreate, name, kind, attributes, createdAt }),
    );
    return queue;
  }

  setAttributes(queue: QueueState, attributes: QueueAttributes): void {
    const before = queue.attributes;
    queue.attributes = attributes;
    this.commits.changed(
      () => {
        queue.attributes = before;
      },
      (writer) => writer.json({ type: changeType.queueAttributes, name: queue.name, attributes }),
    );
  }

  /** Removes an emptied queue; its dedupIds go with it. */
  dropQueue(queue: QueueState): void {
    invariant(queue.messages.size === 0, "a queue dropped with messages");
    this.queues.delete(queue.name);
    let freed = 0;
    for (const [dedupId, { messageId }] of queue.dedup) freed += dedupBytes(dedupId, messageId);
    this.liveBytes -= freed;
    this.commits.changed(
      () => {
        this.liveBytes += freed;
        this.queues.set(queue.name, queue);
      },
      (writer) => writer.json({ type: changeType.queueDrop, name: queue.name }),
    );
  }

  addCounters(queue: QueueState, deltas: Partial<QueueCounters>): void {
    const counters = queue.counters as unknown as { [name: string]: number };
    for (const [name, delta] of Object.entries(deltas)) counters[name] = (counters[name] ?? 0) + (delta ?? 0);
    this.commits.changed(
      () => {
        for (const [name, delta] of Object.entries(deltas))
          counters[name] = (counters[name] ?? 0) - (delta ?? 0);
      },
      (writer) => writer.json({ type: changeType.counters, queue: queue.name, deltas }),
    );
  }

  setDedup(queue: QueueState, dedupId: string, messageId: string, expiresAt: number): void {
    const before = queue.dedup.get(dedupId);
    const added = dedupBytes(dedupId, messageId) - (before ? dedupBytes(dedupId, before.messageId) : 0);
    queue.dedup.set(dedupId, { messageId, expiresAt });
    this.liveBytes += added;
    this.commits.changed(
      () => {
        this.liveBytes -= added;
        if (before) queue.dedup.set(dedupId, before);
        else queue.dedup.delete(dedupId);
      },
      (writer) =>
        writer.json({ type: changeType.dedupSet, queue: queue.name, dedupId, messageId, expiresAt }),
    );
  }

  forgetDedup(queue: QueueState, dedupId: string): void {
    const before = queue.dedup.get(dedupId);
    if (!before) return;
    queue.dedup.delete(dedupId);
    const freed = dedupBytes(dedupId, before.messageId);
    this.liveBytes -= freed;
    this.commits.changed(
      () => {
        this.liveBytes += freed;
        queue.dedup.set(dedupId, before);
      },
      (writer) => writer.json({ type: changeType.dedupForget, queue: queue.name, dedupId }),
    );
  }

  /**
   * Stores one message, leased already when `lease` is given. In a FIFO queue it joins the group of
   * its key ("" without one), as its head if the group was empty; FIFO queues have no priorities.
   */
  insertMessage(
    queue: QueueState,
    message: Omit<NewMessage, "body"> & { body: Buffer | string },
    lease?: { visibleAt: number; firstDeliveredAt: number; token: number },
  ): Message {
    // Checked before any change: linking a message of another priority would fail halfway through.
    const { priority } = message;
    if (!(Number.isInteger(priority) && priority >= 0 && priority < priorityLevels)) {
      invariant(false, `priority ${priority}`);
    }
    const head: InsertHead = {
      queue: queue.name,
      seq: this.lastSeq + 1,
      id: message.id,
      contentType: message.contentType,
      headers: message.headers,
      key: message.key,
      priority: queue.kind === "fifo" ? 0 : message.priority,
      dedupId: message.dedupId,
      publishedAt: message.publishedAt,
      visibleAt: lease?.visibleAt ?? message.visibleAt,
      deliveryCount: lease ? 1 : 0,
      firstDeliveredAt: lease?.firstDeliveredAt ?? null,
      leaseToken: lease?.token ?? null,
    };
    const stored = this.storeMessage(queue, head, message.body);
    this.commits.changed(
      () => {
        this.unlink(stored);
        this.lastSeq = head.seq - 1;
      },
      (writer) => writer.insert(head, message.body),
    );
    return stored;
  }

  /** Builds a message from its insert record's fields and links it in. */
  private storeMessage(queue: QueueState, head: InsertHead, body: Buffer | string): Message {
    // A body is held as it came, text or bytes; footprint counts bytes either way. Bytes are held in
    // memory of their own: a view keeps its whole buffer alive (a request, the log's 1 MiB read chunk,
    // Node's shared 8 KiB pool for a small Buffer), which the memory bound would not count.
    const held = typeof body !== "string" && body.buffer.byteLength !== body.length ? ownCopy(body) : body;
    const stored: Message = {
      heapIndex: -1,
      seq: head.seq,
      queue,
      id: head.id,
      body: held,
      contentType: head.contentType,
      headers: head.headers,
      key: head.key,
      priority: head.priority,
      dedupId: head.dedupId,
      groupKey: queue.kind === "fifo" ? (head.key ?? "") : null,
      publishedAt: head.publishedAt,
      visibleAt: head.visibleAt,
      deliveryCount: head.deliveryCount,
      firstDeliveredAt: head.firstDeliveredAt,
      leaseToken: head.leaseToken,
      bytes: footprint(head, held),
    };
    this.lastSeq = Math.max(this.lastSeq, head.seq);
    this.link(stored, -1);
    return stored;
  }

  /** Deletes one message; if it was its FIFO group's head, the next message of the group becomes it. */
  deleteMessage(message: Message): void {
    const position = this.unlink(message);
    this.commits.changed(
      () => this.link(message, position, true),
      (writer) => writer.delete(message.seq),
    );
  }

  /** Leases, releases or extends: the message's visibility and lease change together. */
  setLease(message: Message, lease: Omit<LeaseFields, "seq">): void {
    const before = leaseOf(message);
    this.applyLease(message, lease);
    this.commits.changed(
      () => this.applyLease(message, before),
      (writer) => writer.lease({ seq: message.seq, ...lease }),
    );
  }

  private applyLease(message: Message, lease: Omit<LeaseFields, "seq">): void {
    const moved = message.visibleAt !== lease.visibleAt;
    message.visibleAt = lease.visibleAt;
    message.leaseToken = lease.leaseToken;
    message.deliveryCount = lease.deliveryCount;
    message.firstDeliveredAt = lease.firstDeliveredAt;
    if (lease.leaseToken === null) message.queue.leased.delete(message);
    else message.queue.leased.add(message);
    if (moved && message.heapIndex >= 0) heapOf(message).update(message);
  }

  createExchange(
    name: string,
    type: ExchangeType,
    alternate: string | null,
    createdAt: number,
  ): ExchangeState {
    const exchange: ExchangeState = { name, type, alternate, createdAt, bindings: new Map() };
    this.exchanges.set(name, exchange);
    this.commits.changed(
      () => this.exchanges.delete(name),
      (writer) =>
        writer.json({ type: changeType.exchangeCreate, name, exchangeType: type, alternate, createdAt }),
    );
    return exchange;
  }

  setAlternate(exchange: ExchangeState, alternate: string | null): void {
    const before = exchange.alternate;
    exchange.alternate = alternate;
    this.commits.changed(
      () => {
        exchange.alternate = before;
      },
      (writer) => writer.json({ type: changeType.exchangeAlternate, name: exchange.name, alternate }),
    );
  }

  /** Removes an exchange and its own bindings (the bindings to it go one by one: deleteBindingsTo). */
  dropExchange(exchange: ExchangeState): void {
    this.exchanges.delete(exchange.name);
    this.commits.changed(
      () => this.exchanges.set(exchange.name, exchange),
      (writer) => writer.json({ type: changeType.exchangeDrop, name: exchange.name }),
    );
  }

  putBinding(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
    const key = bindingKey(destination, pattern);
    if (exchange.bindings.has(key)) return false;
    exchange.bindings.set(key, { destination: { ...destination }, pattern });
    this.commits.changed(
      () => exchange.bindings.delete(key),
      (writer) => writer.json({ type: changeType.bindingPut, exchange: exchange.name, destination, pattern }),
    );
    return true;
  }

  removeBinding(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
    const key = bindingKey(destination, pattern);
    const binding = exchange.bindings.get(key);
    if (!binding) return false;
    exchange.bindings.delete(key);
    this.commits.changed(
      () => exchange.bindings.set(key, binding),
      (writer) =>
        writer.json({ type: changeType.bindingDelete, exchange: exchange.name, destination, pattern }),
    );
    return true;
  }

  /** Puts a message into every index: the store's and its queue's (`position` as linkInQueue). */
  private link(message: Message, position: number, restored = false): void {
    this.liveBytes += messageBytes(message);
    this.bySeq.set(message.seq, message);
    linkInQueue(message, position, restored);
  }

  /** Takes a message out of every index; answers its place in its FIFO group (or -1). */
  private unlink(message: Message): number {
    // A message taken out twice would corrupt its queue's indexes and write a delete replay refuses.
    if (this.bySeq.get(message.seq) !== message) invariant(false, `message ${message.seq} is not held`);
    this.liveBytes -= messageBytes(message);
    this.bySeq.delete(message.seq);
    return unlinkFromQueue(message);
  }
}

/** A copy of `bytes` in a buffer of its own, outside Node's shared pool. */
function ownCopy(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
}
