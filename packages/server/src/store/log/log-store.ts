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
import { limits } from "../../limits.js";
import type { Random } from "../../random.js";
import { EmbeddedStore } from "../embedded/embedded-store.js";
import type { Durability } from "../store.js";
import { AppendLog, type AppendLogOptions } from "./append-log.js";
import { Commits } from "./commits.js";
import { LogExchangeRows } from "./exchange-rows.js";
import { LogInboxRows } from "./inbox-rows.js";
import type { InboxState } from "./inbox-state.js";
import type { RecoveryOutcome } from "./log-recovery.js";
import { LogState } from "./log-state.js";
import { LogQueueRows } from "./queue-rows.js";
import type { ExchangeState, Message, QueueState } from "./queue-state.js";
import { readChanges } from "./records.js";
import { LogStreamRows } from "./stream-rows.js";
import type { StreamState } from "./stream-state.js";

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

export class LogStore extends EmbeddedStore<QueueState, Message, ExchangeState, InboxState, StreamState> {
  private log: AppendLog | undefined;
  private readonly commits: Commits;
  private readonly state: LogState;
  private compacting: Promise<void> | undefined;
  private compactions = 0;
  /** What the last compaction's snapshot wrote. */
  private snapshotBytes = 0;
  private readonly compactBytesMin: number;

  /** A store in memory only, for tests: `open` is the durable one. */
  constructor(options: LogStoreOptions) {
    // Commits calls back into the store after each flush, once the store exists.
    const afterFlush = { compactIfDue: () => {} };
    // The mark of what the log holds (Commits.runShowing): a message shown by a lease was inserted
    // at its seq, and seqs grow in the order records are appended.
    const commits: Commits = new Commits(
      () => afterFlush.compactIfDue(),
      options.recordBytesMax,
      () => state.lastSeq,
    );
    const state = new LogState(commits);
    const queueRows = new LogQueueRows(state, options.bytesMax ?? limits.logStoreBytesMax);
    const capacity = {
      mark: () => queueRows.capacityMark(),
      check: (mark: number) => queueRows.capacityCheck(mark),
    };
    super(
      {
        queues: queueRows,
        exchanges: new LogExchangeRows(state),
        inboxes: new LogInboxRows(state.inboxes, capacity),
        streams: new LogStreamRows(state.streams, capacity),
      },
      {
        write: (apply, write) => commits.run(apply, write?.applied),
        // A lease answers once the messages it hands out are durable, not waiting for its own record:
        // a crash before that record is durable takes the lease back, and the message is available
        // again (docs/log-store.md, rule 4). Taking a message at most once (autoAck) deletes it, which
        // must be durable before it is handed out.
        lease: (apply, lease) =>
          lease.autoAck ? commits.run(apply) : commits.runShowing(apply, (outcome) => outcome.newestSeq),
        read: (compute) => commits.read(compute),
      },
      options.random,
    );
    this.commits = commits;
    this.state = state;
    this.compactBytesMin = options.compactBytesMin ?? limits.logCompactBytesMin;
    afterFlush.compactIfDue = () => this.compactIfDue();
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
    store.log = AppendLog.open(logOptions, (record, seq, offset) => store.replay(record, { seq, offset }));
    const log = store.log;
    store.state.inboxes.readPlaced = (seq, offset, length) => log.readAt(seq, offset, length);
    store.state.streams.readPlaced = (seq, offset, length) => log.readAt(seq, offset, length);
    store.commits.attach(store.log);
    return store;
  }

  /** Applies one record of the log: the changes of one call, through the same primitives. */
  private replay(record: Buffer, recordAt: { seq: number; offset: number }): void {
    this.commits.replay(() => {
      for (const change of readChanges(record)) this.state.apply(change, recordAt);
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
    const live = Math.max(this.onDiskBytes(), this.snapshotBytes);
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
    // Bodies that lie in the segment files are read as the rewrite reaches them: counted, not held.
    this.snapshotBytes =
      snapshot.reduce((bytes, record) => bytes + (Buffer.isBuffer(record) ? record.length : 0), 0) +
      this.state.inboxes.diskBytes +
      this.state.streams.diskBytes;
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

  /** About what a snapshot writes: the state in memory, and the bodies and records kept on disk. */
  private onDiskBytes(): number {
    return this.state.liveBytes + this.state.inboxes.diskBytes + this.state.streams.diskBytes;
  }

  /** The log's size now and the compactions done since the store opened. */
  get logStats(): { bytes: number; compactions: number } {
    return { bytes: this.log?.bytes ?? 0, compactions: this.compactions };
  }

  /** What the store holds in memory (what its bound counts), and the inbox bodies it keeps only in
   * its segment files. */
  get held(): { bytes: number; inboxBodyBytesOnDisk: number; streamRecordBytesOnDisk: number } {
    return {
      bytes: this.state.liveBytes,
      inboxBodyBytesOnDisk: this.state.inboxes.diskBytes,
      streamRecordBytesOnDisk: this.state.streams.diskBytes,
    };
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
}
