/**
 * How the log store's calls become durable. A call applies to the state in memory at once, all of it
 * or none: each change records its inverse, and a call that throws is undone before it rejects. The
 * records of a call that returned are appended to the log; its answer waits for the end of the turn,
 * when one flush (one write, one fdatasync) makes the records of every call of the turn durable, and
 * only then are their answers released, in call order. So a confirm means the message is on disk,
 * and calls in one turn share one fsync, as the SQLite store's group commit does.
 *
 * A flush that fails leaves memory ahead of the disk: the store stops (every later call rejects with
 * the failure) and a restart recovers what the log holds.
 */
import { invariant } from "../../errors.js";
import type { AppendLog } from "./append-log.js";
import { RecordWriter } from "./records.js";

export class Commits {
  private undo: (() => void)[] | undefined;
  /** The running call's changes, appended to the log as one record when the call returns. */
  private readonly writer = new RecordWriter();
  private answers: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  private scheduled = false;
  private replaying = false;
  private closed = false;
  private failure: unknown;
  /** Counts flushes and calls, for the benchmark's "calls per commit" figure. */
  readonly stats = { commits: 0, jobs: 0 };

  /** Until a log is attached, a store in memory (for tests): calls answer at the end of the turn. */
  private log: AppendLog | undefined;

  constructor(
    /** Called after each flush that made records durable (compaction looks then). */
    private readonly afterFlush: () => void = () => {},
  ) {}

  /** From now on, records go to `log` and answers wait for its flush (after the log's replay). */
  attach(log: AppendLog): void {
    invariant(this.answers.length === 0 && !this.scheduled, "a log attached after calls began");
    this.log = log;
  }

  run<T>(job: () => T): Promise<T> {
    const refusal = this.refusal();
    if (refusal) return Promise.reject(refusal);
    invariant(this.undo === undefined, "a store call ran inside another");
    this.undo = [];
    let value: T;
    try {
      value = job();
    } catch (error) {
      const undo = this.undo;
      this.undo = undefined;
      this.writer.discard();
      for (let i = undo.length - 1; i >= 0; i--) (undo[i] as () => void)();
      return Promise.reject(error);
    }
    this.undo = undefined;
    // One record per call: a torn tail can only cut between calls, never through one.
    if (this.log && !this.writer.empty) {
      try {
        this.log.append(this.writer.take());
      } catch (error) {
        // The log refuses appends once a write failed (a read's flush may have found it first).
        return Promise.reject(this.fail(error));
      }
    }
    this.stats.jobs++;
    return new Promise<T>((resolve, reject) => {
      this.answers.push({ resolve: () => resolve(value), reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
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

  close(): void {
    this.closed = true;
  }

  private refusal(): unknown {
    if (this.failure !== undefined) return this.failure;
    if (this.closed) return new Error("the store is closed");
    return undefined;
  }

  private flush(): void {
    this.scheduled = false;
    const answers = this.answers;
    this.answers = [];
    this.stats.commits++;
    if (!this.log) {
      for (const answer of answers) answer.resolve();
      return;
    }
    this.log.flush().then(
      () => {
        for (const answer of answers) answer.resolve();
        this.afterFlush();
      },
      (error: unknown) => {
        const failure = this.fail(error);
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
