/**
 * Group commit: write jobs that arrive in the same turn of the event loop run in one transaction and
 * share one commit (and so one fsync). A job that throws fails alone and the others still commit: the
 * batch then runs again with each job in its own savepoint (runAll says why not always). A job's promise settles only after the commit has
 * returned: a confirm sent on resolution means the write is on disk.
 */
import type { Database, Statement } from "better-sqlite3";

interface Job {
  run: () => unknown;
  /** How many messages the job writes, at least 1: what a commit's size is counted in. */
  weight: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** What runs around every commit (the commit count, commit-count.ts). */
export interface CommitHooks {
  /** Last in the transaction, after every job: a throw fails the whole commit. */
  inTransaction(): void;
  /** Once the commit returned, before any job hears of it. */
  committed(): void;
}

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

  /** Counts commits and jobs, for the benchmark's "jobs per commit" figure. */
  readonly stats = { commits: 0, jobs: 0 };

  constructor(
    private readonly db: Database,
    /** Bounds one transaction by the messages its jobs write (a job always goes whole): a burst
     * larger than this is split across commits, and the first commit's answers leave while the next
     * one runs. */
    private readonly weightPerCommitMax: number,
    private readonly hooks?: CommitHooks,
  ) {
    this.begin = db.prepare("BEGIN IMMEDIATE");
    this.commit = db.prepare("COMMIT");
    this.rollback = db.prepare("ROLLBACK");
    this.savepoint = db.prepare("SAVEPOINT job");
    this.release = db.prepare("RELEASE job");
    this.rollbackToSavepoint = db.prepare("ROLLBACK TO job");
  }

  /**
   * Queues `run` for the next commit; resolves with its result once that commit is durable. `weight`
   * is how many messages it writes (a send's messages, a lease's maximum, an ack's receipts).
   */
  run<T>(run: () => T, weight = 1): Promise<T> {
    if (this.closed) return Promise.reject(new Error("store is closed"));
    return new Promise<T>((resolve, reject) => {
      this.pending.push({
        run,
        weight: Math.max(1, weight),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
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

  /** The pending jobs that fit one commit: the first always, then while their weight fits. */
  private nextBatch(): Job[] {
    let weight = 0;
    let count = 0;
    for (const job of this.pending) {
      if (count > 0 && weight + job.weight > this.weightPerCommitMax) break;
      weight += job.weight;
      count++;
    }
    return this.pending.splice(0, count);
  }

  private flushBatch(): void {
    const jobs = this.nextBatch();
    if (jobs.length === 0) return;
    let outcomes: Outcome[];
    try {
      outcomes = this.runAll(jobs) ?? this.runEachInSavepoint(jobs);
      this.commit.run();
    } catch (error) {
      // The transaction as a whole failed (for example the disk is full): nothing of it is durable.
      if (this.db.inTransaction) this.rollback.run();
      for (const job of jobs) job.reject(error);
      return;
    }
    // Outside the try: the commit is durable, so its jobs are not rejected. A throw here is the disk
    // failing under the side file; it ends the process before any job is answered.
    this.hooks?.committed();
    this.stats.commits++;
    this.stats.jobs += jobs.length;
    jobs.forEach((job, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    });
  }

  /**
   * Runs the jobs in one transaction with no savepoint around each: a savepoint copies every page a
   * job first changes into a sub-journal, which for a batch of appends to the same pages is most of
   * what it writes. Answers the outcomes, ready to commit; or, when a job threw, rolls the whole
   * transaction back and answers undefined, and the batch runs again with a savepoint per job, so that
   * the job that threw fails alone. (A batch of one job needs no second run: its failure is the whole
   * transaction's, rolled back.) A job's work is in the database only, so running it twice is safe.
   */
  private runAll(jobs: readonly Job[]): Outcome[] | undefined {
    this.begin.run();
    const outcomes: Outcome[] = [];
    for (const job of jobs) {
      try {
        outcomes.push({ ok: true, value: job.run() });
      } catch (error) {
        this.rollback.run();
        if (jobs.length > 1) return undefined;
        this.begin.run();
        outcomes.push({ ok: false, error });
      }
    }
    this.hooks?.inTransaction();
    return outcomes;
  }

  /** Runs the jobs in one transaction, each in its own savepoint: a job that throws rolls back alone. */
  private runEachInSavepoint(jobs: readonly Job[]): Outcome[] {
    this.begin.run();
    const outcomes = jobs.map((job) => this.runInSavepoint(job));
    this.hooks?.inTransaction();
    return outcomes;
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
