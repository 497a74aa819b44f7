/**
 * The log store (docs/log-store.md): every queue, exchange and message held in memory, changed only
 * through the primitives of log-state.ts, each of which records its inverse (for a call that throws)
 * and its change (for the log). commits.ts turns a call's changes into one log record and answers
 * after the log's fdatasync; `open` replays the log into memory; compaction rewrites it as a
 * snapshot. The state's own invariants are in log-state.ts; a queue's indexes and their scans are in
 * queue-state.ts, with theirs.
 *
 * Invariants:
 * - A call either applies whole or not at all, and the log holds it whole or not at all.
 */
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  exchangeInUse,
  exchangeNotFound,
  exchangeTypeMismatch,
  HopperError,
  queueFull,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type {
  LeasedMessage,
  MessageState,
  NewMessage,
  ReceiptResult,
  StoredMessage,
} from "../../model/message.js";
import { deadLetterHeaders, type Handoff, handoffRanks, type SendPolicy } from "../../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type QueueAttributes,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
} from "../../model/queue.js";
import { decodeReceipt, encodeReceipt } from "../../model/receipts.js";
import type { Random } from "../../random.js";
import { byTarget, notHeldBack, planMoves, redriveScanMax } from "../redrive-order.js";
import type {
  Applied,
  Durability,
  QueueListPage,
  QueueSend,
  SendOutcome,
  Store,
  StoreEvent,
} from "../store.js";
import { AppendLog, type AppendLogOptions } from "./append-log.js";
import { Commits } from "./commits.js";
import type { RecoveryOutcome } from "./log-recovery.js";
import { LogState } from "./log-state.js";
import {
  asOrderRow,
  byVisibility,
  compareText,
  type ExchangeState,
  inFlightAtMost,
  leaseCandidates,
  leaseOf,
  type Message,
  oldest as oldestOf,
  type QueueState,
  scanDepth,
  select,
  toExchangeRecord,
  toLeased,
  toQueueRecord,
  toStored,
} from "./queue-state.js";
import { readChanges } from "./records.js";

export interface LogStoreOptions {
  random: Random;
  /** Compaction waits for the log to reach at least this size (default limits.logCompactBytesMin). */
  compactBytesMin?: number;
  /** The most bytes of messages the store holds (default limits.logStoreBytesMax). */
  bytesMax?: number;
  /** The largest log record one call may write (default: the log's limit, 256 MiB); for tests. */
  recordBytesMax?: number;
}

/** Where the log store's state lives and how durable a confirm is. */
export interface LogStoreDiskOptions {
  dir: string;
  /** "fsync" (default): an answer leaves once its call's record is fdatasync'ed; "os": once it is
   * written to the OS (AppendLogOptions.durability). */
  durability?: Durability;
  io?: AppendLogOptions["io"];
  weakenedRecoveryForTests?: AppendLogOptions["weakenedRecoveryForTests"];
}

type MoveParams = Parameters<Store["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<Store["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<Store["queueDeadLetterExhausted"]>[0];

export class LogStore implements Store {
  readonly commitsInCallOrder = true;
  private readonly random: Random;
  private log: AppendLog | undefined;
  private readonly commits: Commits;
  private readonly state: LogState;
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
    // The mark of what the log holds (Commits.runShowing): a message shown by a lease was inserted
    // at its seq, and seqs grow in the order records are appended.
    this.commits = new Commits(
      () => this.compactIfDue(),
      options.recordBytesMax,
      () => this.state.lastSeq,
    );
    this.state = new LogState(this.commits);
  }

  /**
   * Opens the store kept in `dir` (created if missing): reads its log back into memory, then appends
   * to it. What was answered before a crash is there; what was applied but not yet flushed is not,
   * and was never answered.
   */
  static open(options: LogStoreOptions & LogStoreDiskOptions): LogStore {
    const store = new LogStore(options);
    const logOptions = {
      dir: options.dir,
      segmentBytesMax: limits.logSegmentBytesMax,
      io: options.io,
      durability: options.durability,
      weakenedRecoveryForTests: options.weakenedRecoveryForTests,
    };
    store.log = AppendLog.open(logOptions, (record) => store.replay(record));
    store.commits.attach(store.log);
    return store;
  }

  /** Applies one record of the log: the changes of one call, through the same primitives. */
  private replay(record: Buffer): void {
    this.commits.replay(() => {
      for (const change of readChanges(record)) this.state.apply(change);
    });
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
    const live = Math.max(this.state.liveBytes, this.snapshotBytes);
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
    const snapshot = this.state.snapshot();
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
  get logStats(): { bytes: number; compactions: number } {
    return { bytes: this.log?.bytes ?? 0, compactions: this.compactions };
  }

  /** What opening the log found and repaired: records replayed, a tail cut, files set aside. */
  get recovery(): RecoveryOutcome | undefined {
    return this.log?.recovery;
  }

  /** Calls and commits so far, for the benchmark's "calls per commit": on disk a commit is a batch the
   * log wrote and fdatasync'ed (the flushes of several turns share one while another is on disk), in
   * memory a turn's flush. */
  get commitStats(): { commits: number; jobs: number } {
    const { commits, jobs } = this.commits.stats;
    return { commits: this.log?.stats.batches ?? commits, jobs };
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

  // ---- reads

  private requireQueue(name: string): QueueState {
    const queue = this.state.queues.get(name);
    if (!queue) throw queueNotFound(name);
    return queue;
  }

  private requireExchange(name: string): ExchangeState {
    const exchange = this.state.exchanges.get(name);
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
      const existing = this.state.queues.get(params.name);
      if (existing) {
        if (existing.kind !== params.kind) {
          throw queueKindMismatch(params.name, existing.kind);
        }
        this.state.setAttributes(existing, { ...params.attributes });
        return { created: false, queue: toQueueRecord(existing) };
      }
      if (this.state.queues.size >= limits.queuesMax) throw new HopperError("too_many_queues");
      this.state.createQueue(params.name, params.kind, { ...params.attributes }, params.now);
      return { created: true, queue: toQueueRecord(this.requireQueue(params.name)) };
    });
  }

  private checkDeadLetterTarget(queueName: string, attributes: QueueAttributes): void {
    const target = attributes.deadLetter;
    if (!target) return;
    if ("queue" in target) {
      if (target.queue !== queueName && !this.state.queues.has(target.queue)) {
        throw deadLetterQueueNotFound(target.queue);
      }
    } else if (!this.state.exchanges.has(target.exchange)) {
      throw deadLetterExchangeNotFound(target.exchange);
    }
  }

  queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    return this.commits.read(() => {
      const queue = this.state.queues.get(params.name);
      return queue && toQueueRecord(queue);
    });
  }

  queueList(): Promise<QueueRecord[]> {
    return this.commits.read(() => this.sortedQueues().map(toQueueRecord));
  }

  private sortedQueues(): QueueState[] {
    return [...this.state.queues.values()].sort((a, b) => compareText(a.name, b.name));
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
        this.state.addCounters(queue, { purged: deleted });
        return { removed: deleted, done: false };
      }
      const rest = [...queue.messages.values()];
      for (const message of rest) this.state.deleteMessage(message);
      this.state.dropQueue(queue);
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
        const queue = lastSeq === undefined ? this.requireQueue(name) : this.state.queues.get(name);
        if (!queue) return { removed: 0, done: true };
        lastSeq ??= this.state.lastSeq;
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
    for (const message of step) this.state.deleteMessage(message);
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
    if (overflow?.policy === "reject" && stored.length > 0) {
      const depth = depthOf(queue.counters);
      if (depth + stored.length > overflow.maxDepth) throw queueFull(send.queue, overflow.maxDepth, depth);
    }
    const held = this.state.liveBytes;
    for (const message of stored) this.state.insertMessage(queue, message);
    this.refuseBeyondBytesMax(held);
    for (const message of stored) {
      if (message.dedupId !== null && dedupWindowMs > 0) {
        this.state.setDedup(queue, message.dedupId, message.id, now + dedupWindowMs);
      }
    }
    if (stored.length > 0) this.state.addCounters(queue, { published: stored.length });
    this.trimOverflow(queue, send.policy, now);
    return { ids, leased: [] };
  }

  /**
   * The state lives in memory, so its size is bounded (bytesMax): a send whose messages, once stored
   * (each counted as it is linked), take what is held past it is refused, and the call undone whole.
   * `held` is what was held before the send. Dead letters and redrives move what is held already and
   * are not refused.
   */
  private refuseBeyondBytesMax(held: number): void {
    if (this.state.liveBytes <= this.bytesMax) return;
    throw new HopperError(
      "store_full",
      `The log store holds ${held} of at most ${this.bytesMax} bytes of messages.`,
      {
        bytes: held,
        bytesMax: this.bytesMax,
      },
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
    const held = this.state.liveBytes;
    const inFlight = inFlightAtMost(queue, now, handoff.max, handoff.inFlightMax);
    const room = Math.max(0, Math.min(handoff.max, handoff.inFlightMax - inFlight));
    const tokenBase = Math.floor(this.random.uint48() / 2 ** 8);
    const leased: LeasedMessage[] = [];
    messages.forEach((message, index) => {
      const rank = ranks[index] ?? 0;
      if (rank === 0 || rank > room) {
        this.state.insertMessage(queue, message);
        return;
      }
      const lease = { visibleAt: handoff.leaseExpiresAt, firstDeliveredAt: now, token: tokenBase + rank };
      const stored = this.state.insertMessage(queue, message, lease);
      leased[rank - 1] = toLeased(stored, encodeReceipt(stored.seq, lease.token));
    });
    this.refuseBeyondBytesMax(held);
    this.state.addCounters(queue, { published: messages.length, delivered: leased.length });
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
    for (const message of oldest) this.state.deleteMessage(message);
    this.state.addCounters(queue, { dropped: oldest.length });
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
      const target = this.state.queues.get(name);
      if (!target) continue;
      this.state.insertMessage(target, copy);
      this.state.addCounters(target, { published: 1 });
    }
    this.state.deleteMessage(message);
    this.state.addCounters(message.queue, { deadLettered: 1 });
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
    /** The newest message the lease hands out, by seq: what its answer shows. */
    let newestSeq = 0;
    const lease = () => {
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
          this.state.setLease(message, {
            visibleAt: params.leaseExpiresAt,
            leaseToken: token,
            deliveryCount: message.deliveryCount + 1,
            firstDeliveredAt: message.firstDeliveredAt ?? params.now,
          });
          if (message.deliveryCount > 1) redelivered++;
          messages.push(toLeased(message, encodeReceipt(message.seq, token)));
          taken.push(message);
          newestSeq = Math.max(newestSeq, message.seq);
        }
      }
      if (messages.length > 0) this.state.addCounters(queue, { delivered: messages.length, redelivered });
      if (!params.autoAck) queue.inFlightBound = inFlight + messages.length;
      if (params.autoAck && taken.length > 0) {
        for (const message of taken) this.state.deleteMessage(message);
        this.state.addCounters(queue, { acked: taken.length });
      }
      return { messages, deadLettered };
    };
    // A lease answers once the messages it hands out are durable, not waiting for its own record: a
    // crash before that record is durable takes the lease back, and the message is available again
    // (docs/log-store.md, rule 4). Taking a message at most once (autoAck) deletes
    // it, which must be durable before it is handed out.
    if (params.autoAck) return this.commits.run(lease);
    return this.commits.runShowing(lease, () => newestSeq);
  }

  /** The message whose latest lease the receipt names, in this queue. */
  private byReceipt(queue: QueueState, receipt: string): Message | "invalid_receipt" | undefined {
    const decoded = decodeReceipt(receipt);
    if (!decoded) return "invalid_receipt";
    const message = this.state.bySeq.get(decoded.seq);
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

  queueAck(params: { queue: string; receipts: string[]; applied?: Applied }): Promise<ReceiptResult[]> {
    return this.commits.run(() => {
      const queue = this.requireQueue(params.queue);
      let acked = 0;
      const results = this.forEachReceipt(queue, params.receipts, (message) => {
        this.state.deleteMessage(message);
        acked++;
      });
      if (acked > 0) this.state.addCounters(queue, { acked });
      return results;
    }, params.applied);
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
    applied?: Applied;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    const { applied } = params;
    return this.commits.run(
      () => {
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
          this.state.setLease(message, {
            visibleAt: params.now + params.retryDelayMs(message.deliveryCount),
            leaseToken: null,
            deliveryCount: message.deliveryCount,
            firstDeliveredAt: message.firstDeliveredAt,
          });
        });
        if (nacked > 0) this.state.addCounters(queue, { nacked });
        return { results, deadLettered };
      },
      applied && ((outcome) => applied(outcome.results)),
    );
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
        this.state.setLease(message, { ...leaseOf(message), visibleAt: params.leaseExpiresAt });
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
      if (deleted > 0) this.state.addCounters(queue, { purged: deleted });
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
      for (const message of expired) this.state.deleteMessage(message);
      if (expired.length > 0) this.state.addCounters(queue, { expired: expired.length });
      // A Map may lose entries while it is walked.
      for (const [dedupId, entry] of queue.dedup) {
        if (entry.expiresAt <= params.now) this.state.forgetDedup(queue, dedupId);
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
          const target = this.state.queues.get(name);
          return target && depthOf(target.counters);
        },
      );
      for (const { item } of moves) this.state.deleteMessage(item);
      if (moves.length > 0) this.state.addCounters(source, { redriven: moves.length });
      const targets = byTarget(moves);
      for (const [name, { policy, items }] of targets) {
        const target = this.requireQueue(name);
        for (const item of items)
          this.state.insertMessage(target, { ...toStored(item), publishedAt: now, visibleAt: now });
        this.state.addCounters(target, { published: items.length });
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
      const queue = this.state.queues.get(params.queue);
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
      const existing = this.state.exchanges.get(params.name);
      if (!existing) {
        const exchange = this.state.createExchange(params.name, params.type, params.alternate, params.now);
        return { created: true, exchange: toExchangeRecord(exchange) };
      }
      if (existing.type !== params.type) {
        throw exchangeTypeMismatch(params.name, existing.type);
      }
      this.state.setAlternate(existing, params.alternate);
      return { created: false, exchange: toExchangeRecord(existing) };
    });
  }

  exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    return this.commits.read(() => {
      const exchange = this.state.exchanges.get(params.name);
      return exchange && toExchangeRecord(exchange);
    });
  }

  exchangeList(): Promise<ExchangeRecord[]> {
    return this.commits.read(() =>
      [...this.state.exchanges.values()].sort((a, b) => compareText(a.name, b.name)).map(toExchangeRecord),
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
      this.state.dropExchange(exchange);
      this.deleteBindingsTo({ kind: "exchange", name: params.name });
    });
  }

  private deleteBindingsTo(destination: BindingDestination): void {
    for (const exchange of this.state.exchanges.values()) {
      for (const binding of [...exchange.bindings.values()]) {
        if (binding.destination.kind === destination.kind && binding.destination.name === destination.name) {
          this.state.removeBinding(exchange, binding.destination, binding.pattern);
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
      return { created: this.state.putBinding(exchange, params.destination, params.pattern) };
    });
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.commits.run(() => {
      const exchange = this.requireExchange(params.exchange);
      return { deleted: this.state.removeBinding(exchange, params.destination, params.pattern) };
    });
  }
}
