/**
 * Group commit: write jobs that arrive in the same turn of the event loop run in one transaction and
 * share one commit (and so one flush). Each job runs inside its own savepoint, so a job that throws
 * rolls back alone and the others still commit. A job's promise settles only once its commit is on
 * disk: a confirm sent on resolution means the write is durable.
 *
 * With a `flush` function the commit itself does not wait for the disk (the store runs SQLite with
 * synchronous=NORMAL): the commit writes the log, then `flush` (an fdatasync of the log on the thread
 * pool) makes it durable while the event loop goes on, and the commits that returned meanwhile share
 * the next flush. Since the log is written in order, a flush started after a commit returned covers
 * that commit and every earlier one.
 */
import type { Database, Statement } from "better-sqlite3";

interface Job {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export class GroupCommit {
  private pending: Job[] = [];
  private flushScheduled = false;
  private closed = false;
  private readonly begin: Statement;
  private readonly commit: Statement;
  private readonly rollback: Statement;
  private readonly savepoint: Statement;
  private readonly release: Statement;
  private readonly rollbackToSavepoint: Statement;

  /** Jobs committed but not yet flushed, with how each ended. */
  private unflushed: { job: Job; outcome: Outcome }[] = [];
  private flushing = false;

  /** Counts commits, jobs and flushes, for the benchmark's "jobs per commit" figure. */
  readonly stats = { commits: 0, jobs: 0, flushes: 0 };

  constructor(
    private readonly db: Database,
    /** Makes every commit returned so far durable; without it each commit waits for the disk. */
    private readonly flushLog?: () => Promise<void>,
    /** Bounds one transaction: a burst larger than this is split across commits. */
    private readonly jobsPerCommitMax = 1000,
  ) {
    this.begin = db.prepare("BEGIN IMMEDIATE");
    this.commit = db.prepare("COMMIT");
    this.rollback = db.prepare("ROLLBACK");
    this.savepoint = db.prepare("SAVEPOINT job");
    this.release = db.prepare("RELEASE job");
    this.rollbackToSavepoint = db.prepare("ROLLBACK TO job");
  }

  /** Queues `run` for the next commit; resolves with its result once that commit is durable. */
  run<T>(run: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new Error("store is closed"));
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // setImmediate runs after the I/O callbacks of this loop turn, so every request that arrived
        // together has queued its job before the transaction starts.
        setImmediate(() => this.flush());
      }
    });
  }

  /** Runs what is pending and waits for nothing more; later jobs are refused. */
  close(): void {
    this.closed = true;
    while (this.pending.length > 0) this.flushBatch();
  }

  private flush(): void {
    this.flushScheduled = false;
    this.flushBatch();
    if (this.pending.length > 0 && !this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flushBatch(): void {
    const jobs = this.pending.splice(0, this.jobsPerCommitMax);
    if (jobs.length === 0) return;
    const outcomes: Outcome[] = [];
    try {
      this.begin.run();
      for (const job of jobs) outcomes.push(this.runInSavepoint(job));
      this.commit.run();
    } catch (error) {
      // The transaction as a whole failed (for example the disk is full): nothing of it is durable.
      if (this.db.inTransaction) this.rollback.run();
      for (const job of jobs) job.reject(error);
      return;
    }
    this.stats.commits++;
    this.stats.jobs += jobs.length;
    const settled = jobs.map((job, i) => ({ job, outcome: outcomes[i] as Outcome }));
    if (!this.flushLog || this.closed) return settle(settled);
    this.unflushed.push(...settled);
    if (!this.flushing) void this.flushUnflushed(this.flushLog);
  }

  /** Flushes the log until no committed job waits for it, then settles each flush's jobs. */
  private async flushUnflushed(flushLog: () => Promise<void>): Promise<void> {
    this.flushing = true;
    while (this.unflushed.length > 0) {
      const waiting = this.unflushed;
      this.unflushed = [];
      try {
        await flushLog();
        this.stats.flushes++;
        settle(waiting);
      } catch (error) {
        // The disk refused the flush: none of these writes is known to be durable.
        for (const { job } of waiting) job.reject(error);
      }
    }
    this.flushing = false;
  }

  /** Resolves once every commit so far is flushed (close waits for it). */
  async drained(): Promise<void> {
    while (this.flushing || this.unflushed.length > 0) await new Promise((resolve) => setImmediate(resolve));
  }

  private runInSavepoint(job: Job): Outcome {
    this.savepoint.run();
    try {
      const value = job.run();
      this.release.run();
      return { ok: true, value };
    } catch (error) {
      this.rollbackToSavepoint.run();
      this.release.run();
      return { ok: false, error };
    }
  }
}

function settle(settled: { job: Job; outcome: Outcome }[]): void {
  for (const { job, outcome } of settled) {
    if (outcome.ok) job.resolve(outcome.value);
    else job.reject(outcome.error);
  }
}
