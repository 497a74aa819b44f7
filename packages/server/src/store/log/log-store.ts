/**
 * The log store (docs/log-store.md): every queue, exchange and message held in memory, changed only
 * through the primitives below, each of which records its inverse (for a call that throws) and its
 * change (for the log). commits.ts turns a call's changes into one log record and answers after the
 * log's fdatasync; `open` replays the log into memory; compaction rewrites it as a snapshot. The
 * state itself, a queue's indexes and their scans are in queue-state.ts, with their invariants.
 *
 * Invariants:
 * - Every message is in `bySeq` exactly when it is in its queue's indexes.
 * - `lastSeq` is at least every seq ever given, across restarts and compactions (seqFloor).
 * - `liveBytes` is the sum of the footprints of the messages and dedupIds held.
 * - A call either applies whole or not at all, and the log holds it whole or not at all.
 */
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  exchangeInUse,
  exchangeNotFound,
  exchangeTypeMismatch,
  HopperError,
  invariant,
  queueFull,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import type { Random } from "../../random.js";
import { decodeReceipt, encodeReceipt } from "../receipts.js";
import { byTarget, notHeldBack, planMoves, redriveScanMax } from "../redrive-order.js";
import {
  type BindingDestination,
  type DeadLetterRoute,
  deadLetterHeaders,
  depthOf,
  type ExchangeRecord,
  type ExchangeType,
  type Handoff,
  handoffRanks,
  type LeasedMessage,
  type MessageState,
  type NewMessage,
  type QueueAttributes,
  type QueueCounters,
  type QueueDepth,
  type QueueKind,
  type QueueListPage,
  type QueueRecord,
  type QueueSend,
  type ReceiptResult,
  type SendOutcome,
  type SendPolicy,
  type Store,
  type StoredMessage,
  type StoreEvent,
} from "../store.js";
import { AppendLog, type AppendLogOptions } from "./append-log.js";
import { Commits } from "./commits.js";
import {
  asOrderRow,
  bindingKey,
  byVisibility,
  compareText,
  dedupBytes,
  type ExchangeState,
  emptyQueue,
  footprint,
  heapOf,
  inFlightAtMost,
  insertHeadOf,
  leaseCandidates,
  leaseOf,
  linkInQueue,
  type Message,
  messageBytes,
  oldest as oldestOf,
  priorityLevels,
  type QueueState,
  scanDepth,
  select,
  toExchangeRecord,
  toLeased,
  toQueueRecord,
  toStored,
  unlinkFromQueue,
} from "./queue-state.js";
import {
  type Change,
  changeType,
  type InsertHead,
  type LeaseFields,
  RecordWriter,
  readChanges,
} from "./records.js";

export interface LogStoreOptions {
  random: Random;
  /** Compaction waits for the log to reach at least this size (default limits.logCompactBytesMin). */
  compactBytesMin?: number;
  /** The most bytes of messages the store holds (default limits.logStoreBytesMax). */
  bytesMax?: number;
  /** The largest log record one call may write (default: the log's limit, 256 MiB); for tests. */
  recordBytesMax?: number;
}

const jsonContentType = "application/json";
/** A snapshot is cut into records of about this size. */
const snapshotRecordBytes = 1024 * 1024;

type MoveParams = Parameters<Store["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<Store["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<Store["queueDeadLetterExhausted"]>[0];

export class LogStore implements Store {
  readonly commitsInCallOrder = true;
  private readonly random: Random;
  private log: AppendLog | undefined;
  private readonly commits: Commits;
  private readonly queues = new Map<string, QueueState>();
  private readonly exchanges = new Map<string, ExchangeState>();
  private readonly bySeq = new Map<number, Message>();
  private lastSeq = 0;
  /** About what a snapshot of the state would write: what compaction weighs the log against. */
  private liveBytes = 0;
  private compacting: Promise<void> | undefined;
  private compactions = 0;
  /** What the last compaction's snapshot wrote. */
  private snapshotBytes = 0;
  private readonly compactBytesMin: number;
  private readonly bytesMax: number;

  /** A store in memory only, for tests: `open` is the durable one. */
  constructor(options: LogStoreOptions) {
    this.random = options.random;
    this.compactBytesMin = options.compactBytesMin ?? limits.logCompactBytesMin;
    this.bytesMax = options.bytesMax ?? limits.logStoreBytesMax;
    this.commits = new Commits(() => this.compactIfDue(), options.recordBytesMax);
  }

  /**
   * Opens the store kept in `dir` (created if missing): reads its log back into memory, then appends
   * to it. What was answered before a crash is there; what was applied but not yet flushed is not,
   * and was never answered.
   */
  static open(options: LogStoreOptions & { dir: string; io?: AppendLogOptions["io"] }): LogStore {
    const store = new LogStore(options);
    const logOptions = { dir: options.dir, segmentBytesMax: limits.logSegmentBytesMax, io: options.io };
    store.log = AppendLog.open(logOptions, (record) => store.replay(record));
    store.commits.attach(store.log);
    return store;
  }

  /** Applies one record of the log: the changes of one call, through the same primitives. */
  private replay(record: Buffer): void {
    this.commits.replay(() => {
      for (const change of readChanges(record)) this.apply(change);
    });
  }

  /** Applies one change read from the log. */
  private apply(change: Change): void {
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
        // The body is a view into the log's read buffer: copied, so that the buffer can go.
        this.storeMessage(this.replayedQueue(change.head.queue), change.head, Buffer.from(change.body));
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
  private snapshot(): Buffer[] {
    const records: Buffer[] = [];
    const writer = new RecordWriter();
    /** Cuts a record every MiB or so: a whole snapshot need not fit one record. */
    const cut = (force = false) => {
      if (!writer.empty && (force || writer.bytes >= snapshotRecordBytes))
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
    // In seq order, so that each FIFO group is rebuilt in its order.
    for (const message of [...this.bySeq.values()].sort((a, b) => a.seq - b.seq)) {
      writer.insert(insertHeadOf(message), message.body);
      cut();
    }
    cut(true);
    return records;
  }

  /**
   * Compacts once the log holds several times what a snapshot would write: the cost of a compaction
   * (the live state) is then a fraction of what was appended since the last one.
   */
  private compactIfDue(): void {
    const log = this.log;
    if (!log || this.compacting) return;
    // Weighed against what the last snapshot wrote too: liveBytes is an estimate, and a snapshot that
    // outgrew it would otherwise be written again at every flush.
    const live = Math.max(this.liveBytes, this.snapshotBytes);
    if (log.bytes < Math.max(this.compactBytesMin, limits.logCompactRatio * live)) return;
    // The log refuses appends after a failed write, so the next call reports the failure.
    this.compact().catch(() => {});
  }

  /** Rewrites the log as a snapshot of the state now (after a compaction already running). */
  async compact(): Promise<void> {
    const log = this.log;
    if (!log) return;
    while (this.compacting) await this.compacting.catch(() => {});
    // Materialized now: the snapshot is the state at this instant, and records appended from here on
    // come after it in the log, whatever the rewrite's own pace.
    const snapshot = this.snapshot();
    this.snapshotBytes = snapshot.reduce((bytes, record) => bytes + record.length, 0);
    const compaction = log
      .rewrite(snapshot)
      .then(() => {
        this.compactions++;
      })
      .finally(() => {
        this.compacting = undefined;
      });
    this.compacting = compaction;
    await compaction;
  }

  /** The log's size now and the compactions done since the store opened. */
  get logStats(): { bytes: number; compactions: number; truncatedBytes: number } {
    return {
      bytes: this.log?.bytes ?? 0,
      compactions: this.compactions,
      truncatedBytes: this.log?.truncatedBytes ?? 0,
    };
  }

  /** Jobs and commits so far: the benchmark's "calls per commit". */
  get commitStats(): { commits: number; jobs: number } {
    return { ...this.commits.stats };
  }

  async ping(): Promise<void> {
    await this.commits.read(() => undefined);
  }

  /** Closes the log, which first makes durable what was appended; a failed write is reported then. */
  async close(): Promise<void> {
    await this.commits.close();
    // A compaction that failed has failed the log too: closing it reports that.
    await this.compacting?.catch(() => {});
    await this.log?.close();
  }

  /** One process owns the state, so no change ever comes from elsewhere. */
  watch(_listener: (event: StoreEvent) => void): void {}

  async housekeepingLeader(): Promise<boolean> {
    return true;
  }

  async signalBroadcast(_params: { channel: string; dataJson: string }): Promise<void> {}

  // ---- the primitives: every change of state goes through one of these, which records its inverse
  // and, when there is a log, its record (records.ts); replaying the records calls them again.

  private createQueue(
    name: string,
    kind: QueueKind,
    attributes: QueueAttributes,
    createdAt: number,
  ): QueueState {
    const queue = emptyQueue(name, kind, attributes, createdAt);
    this.queues.set(name, queue);
    this.commits.changed(
      () => this.queues.delete(name),
      (writer) => writer.json({ type: changeType.queueCreate, name, kind, attributes, createdAt }),
    );
    return queue;
  }

  private setAttributes(queue: QueueState, attributes: QueueAttributes): void {
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
  private dropQueue(queue: QueueState): void {
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

  private addCounters(queue: QueueState, deltas: Partial<QueueCounters>): void {
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

  private setDedup(queue: QueueState, dedupId: string, messageId: string, expiresAt: number): void {
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

  private forgetDedup(queue: QueueState, dedupId: string): void {
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
  private insertMessage(
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
    const stored: Message = {
      heapIndex: -1,
      seq: head.seq,
      queue,
      id: head.id,
      body: head.contentType === jsonContentType && typeof body !== "string" ? body.toString("utf8") : body,
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
      bytes: footprint(head, body),
    };
    this.lastSeq = Math.max(this.lastSeq, head.seq);
    this.link(stored, -1);
    return stored;
  }

  /** Deletes one message; if it was its FIFO group's head, the next message of the group becomes it. */
  private deleteMessage(message: Message): void {
    const position = this.unlink(message);
    this.commits.changed(
      () => this.link(message, position, true),
      (writer) => writer.delete(message.seq),
    );
  }

  /** Leases, releases or extends: the message's visibility and lease change together. */
  private setLease(message: Message, lease: Omit<LeaseFields, "seq">): void {
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

  private createExchange(
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

  private setAlternate(exchange: ExchangeState, alternate: string | null): void {
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
  private dropExchange(exchange: ExchangeState): void {
    this.exchanges.delete(exchange.name);
    this.commits.changed(
      () => this.exchanges.set(exchange.name, exchange),
      (writer) => writer.json({ type: changeType.exchangeDrop, name: exchange.name }),
    );
  }

  private putBinding(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
    const key = bindingKey(destination, pattern);
    if (exchange.bindings.has(key)) return false;
    exchange.bindings.set(key, { destination: { ...destination }, pattern });
    this.commits.changed(
      () => exchange.bindings.delete(key),
      (writer) => writer.json({ type: changeType.bindingPut, exchange: exchange.name, destination, pattern }),
    );
    return true;
  }

  private removeBinding(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
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

  // ---- reads

  private requireQueue(name: string): QueueState {
    const queue = this.queues.get(name);
    if (!queue) throw queueNotFound(name);
    return queue;
  }

  private requireExchange(name: string): ExchangeState {
    const exchange = this.exchanges.get(name);
    if (!exchange) {
      throw exchangeNotFound(name);
    }
    return exchange;
  }

  // ---- queues

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.commits.run(() => {
      this.checkDeadLetterTarget(params.name, params.attributes);
      const existing = this.queues.get(params.name);
      if (existing) {
        if (existing.kind !== params.kind) {
          throw queueKindMismatch(params.name, existing.kind);
        }
        this.setAttributes(existing, { ...params.attributes });
        return { created: false, queue: toQueueRecord(existing) };
      }
      if (this.queues.size >= limits.queuesMax) throw new HopperError("too_many_queues");
      this.createQueue(params.name, params.kind, { ...params.attributes }, params.now);
      return { created: true, queue: toQueueRecord(this.requireQueue(params.name)) };
    });
  }

  private checkDeadLetterTarget(queueName: string, attributes: QueueAttributes): void {
    const target = attributes.deadLetter;
    if (!target) return;
    if ("queue" in target) {
      if (target.queue !== queueName && !this.queues.has(target.queue)) {
        throw deadLetterQueueNotFound(target.queue);
      }
    } else if (!this.exchanges.has(target.exchange)) {
      throw deadLetterExchangeNotFound(target.exchange);
    }
  }

  queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    return this.commits.read(() => {
      const queue = this.queues.get(params.name);
      return queue && toQueueRecord(queue);
    });
  }

  queueList(): Promise<QueueRecord[]> {
    return this.commits.read(() => this.sortedQueues().map(toQueueRecord));
  }

  private sortedQueues(): QueueState[] {
    return [...this.queues.values()].sort((a, b) => compareText(a.name, b.name));
  }

  /**
   * As the SQLite store (rule 20a): the messages stored before the delete began go in steps of
   * limits.purgeStepMax, each its own call, counted as purged; the last step takes the rest and the
   * queue, its dedupIds and the bindings to it. Refused while another queue dead-letters into it.
   */
  async queueDelete(params: { name: string }): Promise<{ removed: number }> {
    const removed = await this.inSteps(params.name, (queue, lastSeq) => {
      this.refuseDeadLetterTarget(params.name);
      const deleted = this.deleteStep(queue, lastSeq);
      if (deleted === limits.purgeStepMax) {
        this.addCounters(queue, { purged: deleted });
        return { removed: deleted, done: false };
      }
      const rest = [...queue.messages.values()];
      for (const message of rest) this.deleteMessage(message);
      this.dropQueue(queue);
      this.deleteBindingsTo({ kind: "queue", name: params.name });
      return { removed: deleted + rest.length, done: true };
    });
    return { removed };
  }

  private async inSteps(
    name: string,
    step: (queue: QueueState, lastSeq: number) => { removed: number; done: boolean },
  ): Promise<number> {
    let lastSeq: number | undefined;
    let removed = 0;
    for (;;) {
      const outcome = await this.commits.run(() => {
        const queue = lastSeq === undefined ? this.requireQueue(name) : this.queues.get(name);
        if (!queue) return { removed: 0, done: true };
        lastSeq ??= this.lastSeq;
        return step(queue, lastSeq);
      });
      removed += outcome.removed;
      if (outcome.done) return removed;
    }
  }

  /** Deletes up to limits.purgeStepMax of the queue's messages at or below lastSeq; counts nothing. */
  private deleteStep(queue: QueueState, lastSeq: number): number {
    const step: Message[] = [];
    for (const message of queue.messages.values()) {
      if (step.length >= limits.purgeStepMax) break;
      if (message.seq <= lastSeq) step.push(message);
    }
    for (const message of step) this.deleteMessage(message);
    return step.length;
  }

  private refuseDeadLetterTarget(name: string): void {
    const sources = this.sortedQueues()
      .filter((queue) => {
        const target = queue.attributes.deadLetter;
        return queue.name !== name && target !== null && "queue" in target && target.queue === name;
      })
      .map((queue) => queue.name);
    if (sources.length > 0) {
      throw queueInUse(name, sources);
    }
  }

  queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    return this.commits.read(() => scanDepth(this.requireQueue(params.name), params.now));
  }

  queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]> {
    return this.commits.read(() => {
      const after = params.after ?? "";
      const queues = this.sortedQueues().filter((queue) => queue.name > after);
      return queues
        .slice(0, params.limit ?? queues.length)
        .map((queue) => ({ queue: toQueueRecord(queue), depth: scanDepth(queue, params.now) }));
    });
  }

  queueSendMany(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]> {
    return this.commits.run(() => params.sends.map((send) => this.sendOne(send, params.now)));
  }

  /** One queue's part of a send: deduplication, then the overflow check, the inserts, the trim. */
  private sendOne(send: QueueSend, now: number): SendOutcome {
    const queue = this.requireQueue(send.queue);
    const ranks = queue.kind === "standard" ? handoffRanks(send, now) : undefined;
    if (ranks && send.handoff) return this.sendHandingOff(queue, send.messages, ranks, send.handoff, now);
    const { dedupWindowMs, overflow } = send.policy;
    const seen = new Map<string, string>();
    const ids = send.messages.map((message) => {
      if (message.dedupId === null || dedupWindowMs === 0) return message.id;
      const remembered = queue.dedup.get(message.dedupId);
      const earlier =
        seen.get(message.dedupId) ??
        (remembered && remembered.expiresAt > now ? remembered.messageId : undefined);
      if (earlier !== undefined) return earlier;
      seen.set(message.dedupId, message.id);
      return message.id;
    });
    const stored = send.messages.filter((message, i) => ids[i] === message.id);
    this.refuseBeyondBytesMax(stored);
    if (overflow?.policy === "reject" && stored.length > 0) {
      const depth = depthOf(queue.counters);
      if (depth + stored.length > overflow.maxDepth) throw queueFull(send.queue, overflow.maxDepth, depth);
    }
    for (const message of stored) {
      this.insertMessage(queue, message);
      if (message.dedupId !== null && dedupWindowMs > 0) {
        this.setDedup(queue, message.dedupId, message.id, now + dedupWindowMs);
      }
    }
    if (stored.length > 0) this.addCounters(queue, { published: stored.length });
    this.trimOverflow(queue, send.policy, now);
    return { ids, leased: [] };
  }

  /**
   * The state lives in memory, so its size is bounded (bytesMax): a send that would take the messages
   * held past it is refused whole. Dead letters and redrives move what is held already and are not.
   */
  private refuseBeyondBytesMax(messages: readonly NewMessage[]): void {
    let incoming = 0;
    for (const message of messages) incoming += footprint(message, message.body);
    if (this.liveBytes + incoming <= this.bytesMax) return;
    throw new HopperError(
      "store_full",
      `The log store holds ${this.liveBytes} of at most ${this.bytesMax} bytes of messages.`,
      { bytes: this.liveBytes, bytesMax: this.bytesMax },
    );
  }

  /** A send whose hand-off leases the messages ranked 1 to its in-flight room as it stores them. */
  private sendHandingOff(
    queue: QueueState,
    messages: NewMessage[],
    ranks: number[],
    handoff: Handoff,
    now: number,
  ): SendOutcome {
    this.refuseBeyondBytesMax(messages);
    const inFlight = inFlightAtMost(queue, now, handoff.max, handoff.inFlightMax);
    const room = Math.max(0, Math.min(handoff.max, handoff.inFlightMax - inFlight));
    const tokenBase = Math.floor(this.random.uint48() / 2 ** 8);
    const leased: LeasedMessage[] = [];
    messages.forEach((message, index) => {
      const rank = ranks[index] ?? 0;
      if (rank === 0 || rank > room) {
        this.insertMessage(queue, message);
        return;
      }
      const lease = { visibleAt: handoff.leaseExpiresAt, firstDeliveredAt: now, token: tokenBase + rank };
      const stored = this.insertMessage(queue, message, lease);
      leased[rank - 1] = toLeased(stored, encodeReceipt(stored.seq, lease.token));
    });
    this.addCounters(queue, { published: messages.length, delivered: leased.length });
    queue.inFlightBound = inFlight + leased.length;
    return { ids: messages.map((message) => message.id), leased };
  }

  /** drop-oldest or dead-letter-oldest: the oldest messages go until the queue holds at most maxDepth. */
  private trimOverflow(queue: QueueState, policy: SendPolicy, now: number): void {
    const overflow = policy.overflow;
    if (!overflow || overflow.policy === "reject") return;
    const excess = depthOf(queue.counters) - overflow.maxDepth;
    if (excess <= 0) return;
    const oldest = oldestOf(queue, () => true, Math.min(excess, limits.overflowTrimMax));
    if (overflow.policy === "dead-letter-oldest" && overflow.deadLetter) {
      for (const message of oldest) this.deadLetter(message, overflow.deadLetter, now, "max_depth");
      return;
    }
    for (const message of oldest) this.deleteMessage(message);
    this.addCounters(queue, { dropped: oldest.length });
  }

  /**
   * Moves one message to its dead-letter queues, a new message in each, with the headers that say
   * why; with no target left it is dropped, and counted as dead-lettered either way.
   */
  private deadLetter(
    message: Message,
    route: DeadLetterRoute,
    now: number,
    reason: "max_deliveries" | "max_depth" = "max_deliveries",
  ): void {
    const stored = toStored(message);
    const headers = deadLetterHeaders(stored, message.queue.name, reason);
    const copy = { ...stored, headers, publishedAt: now, visibleAt: now };
    for (const name of route.queues) {
      const target = this.queues.get(name);
      if (!target) continue;
      this.insertMessage(target, copy);
      this.addCounters(target, { published: 1 });
    }
    this.deleteMessage(message);
    this.addCounters(message.queue, { deadLettered: 1 });
  }

  // ---- leases and receipts

  queueLease(params: {
    queue: string;
    max: number;
    now: number;
    leaseExpiresAt: number;
    expiredBefore: number;
    inFlightMax: number;
    deadLetter: DeadLetterRoute | null;
    autoAck?: boolean;
  }): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      const inFlight = inFlightAtMost(queue, params.now, params.max, params.inFlightMax);
      const wanted = Math.min(params.max, params.inFlightMax - inFlight);
      const messages: LeasedMessage[] = [];
      const taken: Message[] = [];
      let deadLettered = 0;
      let redelivered = 0;
      // Each pass leases or dead-letters every candidate it reads, so the loop ends; the bound keeps
      // a queue full of exhausted messages from holding one call for long.
      // A lease that ends at once (a visibility timeout of 0) leaves its messages available: a second
      // pass would hand them out again, so it gets one pass.
      const passes = params.leaseExpiresAt > params.now ? limits.leasePassesMax : 1;
      for (let pass = 0; pass < passes && messages.length < wanted; pass++) {
        const candidates = leaseCandidates(queue, params.now, params.expiredBefore, wanted - messages.length);
        if (candidates.length === 0) break;
        // 40 random bits: with the seq added the token stays below 2^53, exact as a JavaScript number.
        const tokenBase = Math.floor(this.random.uint48() / 2 ** 8);
        for (const message of candidates) {
          if (params.deadLetter && message.deliveryCount >= params.deadLetter.maxDeliveries) {
            this.deadLetter(message, params.deadLetter, params.now);
            deadLettered++;
            continue;
          }
          const token = tokenBase + message.seq;
          this.setLease(message, {
            visibleAt: params.leaseExpiresAt,
            leaseToken: token,
            deliveryCount: message.deliveryCount + 1,
            firstDeliveredAt: message.firstDeliveredAt ?? params.now,
          });
          if (message.deliveryCount > 1) redelivered++;
          messages.push(toLeased(message, encodeReceipt(message.seq, token)));
          taken.push(message);
        }
      }
      if (messages.length > 0) this.addCounters(queue, { delivered: messages.length, redelivered });
      if (!params.autoAck) queue.inFlightBound = inFlight + messages.length;
      if (params.autoAck && taken.length > 0) {
        for (const message of taken) this.deleteMessage(message);
        this.addCounters(queue, { acked: taken.length });
      }
      return { messages, deadLettered };
    });
  }

  /** The message whose latest lease the receipt names, in this queue. */
  private byReceipt(queue: QueueState, receipt: string): Message | "invalid_receipt" | undefined {
    const decoded = decodeReceipt(receipt);
    if (!decoded) return "invalid_receipt";
    const message = this.bySeq.get(decoded.seq);
    return message && message.queue === queue && message.leaseToken === decoded.leaseToken
      ? message
      : undefined;
  }

  /** Runs `apply` for each receipt that names the latest lease of a message of the queue. */
  private forEachReceipt(
    queue: QueueState,
    receipts: string[],
    apply: (message: Message) => void,
  ): ReceiptResult[] {
    // A receipt that appears twice in one batch counts once; its repeat is stale, as in a later call.
    const seen = new Set<number>();
    return receipts.map((receipt): ReceiptResult => {
      const message = this.byReceipt(queue, receipt);
      if (message === "invalid_receipt") return { error: message };
      if (!message || seen.has(message.seq)) return { error: "stale_receipt" };
      seen.add(message.seq);
      apply(message);
      return { ok: true };
    });
  }

  queueAck(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      let acked = 0;
      const results = this.forEachReceipt(queue, params.receipts, (message) => {
        this.deleteMessage(message);
        acked++;
      });
      if (acked > 0) this.addCounters(queue, { acked });
      return results;
    });
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      let nacked = 0;
      let deadLettered = 0;
      const results = this.forEachReceipt(queue, params.receipts, (message) => {
        nacked++;
        if (params.deadLetter && message.deliveryCount >= params.deadLetter.maxDeliveries) {
          this.deadLetter(message, params.deadLetter, params.now);
          deadLettered++;
          return;
        }
        this.setLease(message, {
          visibleAt: params.now + params.retryDelayMs(message.deliveryCount),
          leaseToken: null,
          deliveryCount: message.deliveryCount,
          firstDeliveredAt: message.firstDeliveredAt,
        });
      });
      if (nacked > 0) this.addCounters(queue, { nacked });
      return { results, deadLettered };
    });
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      queue.inFlightBound = undefined;
      return this.forEachReceipt(queue, params.receipts, (message) => {
        this.setLease(message, { ...leaseOf(message), visibleAt: params.leaseExpiresAt });
      });
    });
  }

  queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    return this.commits.read(() => {
      const queue = this.requireQueue(params.queue);
      const { now } = params;
      const filter = {
        available: (message: Message) => message.visibleAt <= now,
        delayed: (message: Message) => message.visibleAt > now && message.leaseToken === null,
        "in-flight": (message: Message) => message.visibleAt > now && message.leaseToken !== null,
      }[params.state];
      return select(queue, filter, byVisibility, params.limit).map(toStored);
    });
  }

  /** Deletes the messages stored before the purge began, in steps of their own (as queueDelete). */
  async queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    const purged = await this.inSteps(params.queue, (queue, lastSeq) => {
      const deleted = this.deleteStep(queue, lastSeq);
      if (deleted > 0) this.addCounters(queue, { purged: deleted });
      return { removed: deleted, done: deleted < limits.purgeStepMax };
    });
    return { purged };
  }

  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      const expired = oldestOf(queue, (message) => message.publishedAt <= params.expiredBefore, params.max);
      for (const message of expired) this.deleteMessage(message);
      if (expired.length > 0) this.addCounters(queue, { expired: expired.length });
      // A Map may lose entries while it is walked.
      for (const [dedupId, entry] of queue.dedup) {
        if (entry.expiresAt <= params.now) this.forgetDedup(queue, dedupId);
      }
      return { expired: expired.length };
    });
  }

  queueMove(params: MoveParams): Promise<MoveResult> {
    return this.commits.run(() => {
      const source = this.requireQueue(params.queue);
      const { now } = params;
      const movable = (message: Message) => message.visibleAt <= now || message.leaseToken === null;
      const candidates = oldestOf(source, movable, redriveScanMax).map(asOrderRow);
      const inFlight = [...source.leased].filter((message) => message.visibleAt > now).map(asOrderRow);
      const { rows, held } = notHeldBack(candidates, inFlight, params.max);
      const { moves, stoppedBy } = planMoves(
        rows.map(({ message }) => message),
        { ...params, source: source.name },
        (name) => {
          const target = this.queues.get(name);
          return target && depthOf(target.counters);
        },
      );
      for (const { item } of moves) this.deleteMessage(item);
      if (moves.length > 0) this.addCounters(source, { redriven: moves.length });
      const targets = byTarget(moves);
      for (const [name, { policy, items }] of targets) {
        const target = this.requireQueue(name);
        for (const item of items)
          this.insertMessage(target, { ...toStored(item), publishedAt: now, visibleAt: now });
        this.addCounters(target, { published: items.length });
        this.trimOverflow(target, policy, now);
      }
      return { moved: moves.length, held, targets: [...targets.keys()], stoppedBy };
    });
  }

  queueDeadLetterExhausted(params: DeadLetterExhaustedParams): Promise<{ deadLettered: number }> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      const exhausted: Message[] = [];
      for (const message of queue.leased) {
        if (exhausted.length >= params.max) break;
        if (
          message.visibleAt >= params.visibleFrom &&
          message.visibleAt <= params.now &&
          message.deliveryCount >= params.deadLetter.maxDeliveries
        ) {
          exhausted.push(message);
        }
      }
      for (const message of exhausted) this.deadLetter(message, params.deadLetter, params.now);
      return { deadLettered: exhausted.length };
    });
  }

  /** A scan of the queue's messages (docs/log-store.md "Costs"). */
  queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }> {
    return this.commits.read(() => {
      const queue = this.queues.get(params.queue);
      let next: number | null = null;
      let oldest: number | null = null;
      for (const message of queue?.messages.values() ?? []) {
        if (message.visibleAt > params.now && (next === null || message.visibleAt < next)) {
          next = message.visibleAt;
        }
        if (oldest === null || message.publishedAt < oldest) oldest = message.publishedAt;
      }
      return { nextVisibleAt: next, oldestPublishedAt: oldest };
    });
  }

  // ---- exchanges

  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    return this.commits.run(() => {
      const existing = this.exchanges.get(params.name);
      if (!existing) {
        const exchange = this.createExchange(params.name, params.type, params.alternate, params.now);
        return { created: true, exchange: toExchangeRecord(exchange) };
      }
      if (existing.type !== params.type) {
        throw exchangeTypeMismatch(params.name, existing.type);
      }
      this.setAlternate(existing, params.alternate);
      return { created: false, exchange: toExchangeRecord(existing) };
    });
  }

  exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    return this.commits.read(() => {
      const exchange = this.exchanges.get(params.name);
      return exchange && toExchangeRecord(exchange);
    });
  }

  exchangeList(): Promise<ExchangeRecord[]> {
    return this.commits.read(() =>
      [...this.exchanges.values()].sort((a, b) => compareText(a.name, b.name)).map(toExchangeRecord),
    );
  }

  exchangeDelete(params: { name: string }): Promise<void> {
    return this.commits.run(() => {
      const exchange = this.requireExchange(params.name);
      const sources = this.sortedQueues()
        .filter((queue) => {
          const target = queue.attributes.deadLetter;
          return target !== null && "exchange" in target && target.exchange === params.name;
        })
        .map((queue) => queue.name);
      if (sources.length > 0) {
        throw exchangeInUse(params.name, sources);
      }
      this.dropExchange(exchange);
      this.deleteBindingsTo({ kind: "exchange", name: params.name });
    });
  }

  private deleteBindingsTo(destination: BindingDestination): void {
    for (const exchange of this.exchanges.values()) {
      for (const binding of [...exchange.bindings.values()]) {
        if (binding.destination.kind === destination.kind && binding.destination.name === destination.name) {
          this.removeBinding(exchange, binding.destination, binding.pattern);
        }
      }
    }
  }

  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }> {
    return this.commits.run(() => {
      const exchange = this.requireExchange(params.exchange);
      if (params.destination.kind === "queue") this.requireQueue(params.destination.name);
      else this.requireExchange(params.destination.name);
      return { created: this.putBinding(exchange, params.destination, params.pattern) };
    });
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.commits.run(() => {
      const exchange = this.requireExchange(params.exchange);
      return { deleted: this.removeBinding(exchange, params.destination, params.pattern) };
    });
  }
}
