/**
 * How the log store's calls become durable. A call applies to the state in memory at once, all of it
 * or none: each change records its inverse, and a call that throws is undone before it rejects. The
 * records of a call that returned are appended to the log; its answer waits for the end of the turn,
 * when the turn's flush asks the log to make every record appended so far durable, and only then are
 * the turn's answers released, in call order. The log writes one batch at a time (one write, one
 * fdatasync): the flushes of the turns that ran while a batch was on the disk share the next one. So a
 * confirm means the message is on disk, and calls share an fsync, as the SQLite store's group commit
 * does.
 *
 * A call whose answer shows only what is already durable need not wait for its own record: `runShowing`
 * answers once the records it shows are durable (by the store's mark, see there), which is at once
 * when they were made durable by an earlier flush. Its own record still goes into the next batch, so a
 * crash may take back its change but never what it showed.
 *
 * A flush that fails leaves memory ahead of the disk: the store stops (every later call rejects with
 * the failure) and a restart recovers what the log holds.
 */
import { HopperError, invariant } from "../../errors.js";
import type { AppendLog } from "./append-log.js";
import { recordBytesMax as recordBytesMaxOfLog } from "./log-format.js";
import { RecordWriter } from "./records.js";

function recordTooLarge(bytes: number, bytesMax: number): HopperError {
  return new HopperError(
    "request_too_large",
    `This call would write ${bytes} bytes to the log in one record, more than ${bytesMax}: send fewer or smaller messages per call, or bind fewer queues to the exchange.`,
    { bytes, bytesMax },
  );
}

export class Commits {
  private undo: (() => void)[] | undefined;
  /** The running call's changes, appended to the log as one record when the call returns. */
  private readonly writer = new RecordWriter();
  private answers: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  private scheduled = false;
  private replaying = false;
  private closed = false;
  private failure: unknown;
  /** The last flush's settling, for close. */
  private flushing: Promise<void> = Promise.resolve();
  /** The store's mark as of the last flush that made its records durable. */
  private durableMark = 0;
  /** The last flush begun: the mark it makes durable, and its settling (rejected if it fails). */
  private lastFlush: { mark: number; done: Promise<void> } | undefined;
  /** Counts flushes and calls, for the benchmark's "calls per commit" figure. */
  readonly stats = { commits: 0, jobs: 0 };

  /** Until a log is attached, a store in memory (for tests): calls answer at the end of the turn. */
  private log: AppendLog | undefined;

  constructor(
    /** Called after each flush that made records durable (compaction looks then). */
    private readonly afterFlush: () => void = () => {},
    /** The largest record a call may write: the log's frame limit, lower in tests. */
    private readonly recordBytesMax = recordBytesMaxOfLog,
    /**
     * The store's mark: a number that grows with what the records appended so far hold, such that
     * whatever a call shows was made when the mark was at most a number the call can name (LogStore:
     * the last message seq given). Read between calls, as each flush begins.
     */
    private readonly mark: () => number = () => 0,
  ) {}

  /** From now on, records go to `log` and answers wait for its flush (after the log's replay). */
  attach(log: AppendLog): void {
    invariant(this.answers.length === 0 && !this.scheduled, "a log attached after calls began");
    this.log = log;
    // What the replay made is on disk already.
    this.durableMark = this.mark();
  }

  /**
   * Applies the job and answers once its record is durable. `applied`, if given, is called with the
   * job's value as soon as it holds in memory (the answer still waits).
   */
  run<T>(job: () => T, applied?: (value: T) => void): Promise<T> {
    const outcome = this.apply(job);
    if (outcome instanceof Promise) return outcome;
    if (applied && "value" in outcome) applied(outcome.value);
    return this.answerAfterFlush(outcome);
  }

  /**
   * A call whose answer shows only what was made at or below the mark `shows(value)` answers once that
   * is durable, not waiting for its own record (a lease: the messages it hands out must be on disk,
   * the lease itself need not be, see docs/log-store.md). A refusal waits as in `run`.
   */
  runShowing<T>(job: () => T, shows: (value: T) => number): Promise<T> {
    const outcome = this.apply(job);
    if (outcome instanceof Promise) return outcome;
    if (!this.log || !("value" in outcome)) return this.answerAfterFlush(outcome);
    const { value } = outcome;
    const needed = shows(value);
    if (needed <= this.durableMark) return Promise.resolve(value);
    const flush = this.lastFlush;
    if (flush && needed <= flush.mark) return flush.done.then(() => value);
    return this.answerAfterFlush(outcome);
  }

  /**
   * Runs the job against the state, all of it or none, and appends its record: answers its outcome,
   * or a rejected promise when the store has stopped.
   */
  private apply<T>(job: () => T): { value: T } | { error: unknown } | Promise<never> {
    const refusal = this.refusal();
    if (refusal) return Promise.reject(refusal);
    invariant(this.undo === undefined, "a store call ran inside another");
    this.undo = [];
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: job() };
      // One record per call, so a torn tail can only cut between calls: a call whose record would
      // pass the log's limit is refused and undone, like any call that throws.
      if (this.writer.bytes > this.recordBytesMax)
        throw recordTooLarge(this.writer.bytes, this.recordBytesMax);
    } catch (error) {
      this.undoCall();
      outcome = { error };
    }
    this.undo = undefined;
    if (this.log && !this.writer.empty) {
      try {
        const record = this.writer.take();
        const locates = this.writer.takeLocates();
        this.log.append(
          record,
          locates.length === 0
            ? undefined
            : (seq, offset) => {
                for (const locate of locates) locate.located(seq, offset + locate.offset);
              },
        );
      } catch (error) {
        // The log refuses appends once a write failed (a read's flush may have found it first).
        return Promise.reject(this.fail(error));
      }
      this.scheduleFlush();
    }
    this.stats.jobs++;
    return outcome;
  }

  /** Answers once everything appended so far is durable; a refusal waits too, as it may rest on it. */
  private answerAfterFlush<T>(outcome: { value: T } | { error: unknown }): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.answers.push({
        resolve: () => ("value" in outcome ? resolve(outcome.value) : reject(outcome.error)),
        reject,
      });
      this.scheduleFlush();
    });
  }

  /** The turn's flush, once per turn: it makes what the turn appended durable, then answers. */
  private scheduleFlush(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Takes back every change of the running call, newest first, and forgets its record. */
  private undoCall(): void {
    const undo = this.undo ?? [];
    this.writer.discard();
    for (let i = undo.length - 1; i >= 0; i--) (undo[i] as () => void)();
  }

  /** Applies the records of a log being recovered: changes record neither inverses nor records. */
  replay(apply: () => void): void {
    this.replaying = true;
    try {
      apply();
    } finally {
      this.replaying = false;
    }
  }

  /** Records a change of the running call: how to take it back, and how to write it to the log. */
  changed(undo: () => void, write: (writer: RecordWriter) => void): void {
    if (this.replaying) return;
    invariant(this.undo !== undefined, "a change outside a store call");
    this.undo.push(undo);
    if (this.log) write(this.writer);
  }

  /**
   * A read: computed now, answered once everything applied until now is durable, so that a reader
   * never sees what a crash could still take back (as a reader of the SQLite store sees only
   * committed state).
   */
  async read<T>(compute: () => T): Promise<T> {
    const refusal = this.refusal();
    if (refusal) throw refusal;
    const value = compute();
    if (this.log) await this.log.flush().catch((error: unknown) => Promise.reject(this.fail(error)));
    return value;
  }

  /**
   * Refuses calls from now on, and resolves once the answers of the calls made before are settled:
   * the turn's flush runs now rather than after the log has closed.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.scheduled) this.flush();
    await this.flushing;
  }

  private refusal(): unknown {
    if (this.failure !== undefined) return this.failure;
    if (this.closed) return new Error("the store is closed");
    return undefined;
  }

  private flush(): void {
    if (!this.scheduled) return;
    this.scheduled = false;
    const answers = this.answers;
    this.answers = [];
    this.stats.commits++;
    if (!this.log) {
      for (const answer of answers) answer.resolve();
      return;
    }
    const mark = this.mark();
    const done = this.log.flush().then(
      () => {
        this.durableMark = Math.max(this.durableMark, mark);
      },
      (error: unknown) => Promise.reject(this.fail(error)),
    );
    this.lastFlush = { mark, done };
    this.flushing = done.then(
      () => {
        for (const answer of answers) answer.resolve();
        this.afterFlush();
      },
      (failure: unknown) => {
        for (const answer of answers) answer.reject(failure);
      },
    );
  }

  /** Stops the store for good: memory may now be ahead of the disk. Answers the error calls get. */
  private fail(cause: unknown): unknown {
    this.failure ??= new Error("the log store stopped: a write to its log failed; restart to recover", {
      cause,
    });
    return this.failure;
  }
}
