/**
 * Copies the WAL back into the database file on a thread of its own, so that the event loop never
 * waits for a checkpoint. SQLite's automatic checkpoint runs inside the COMMIT that crosses its
 * threshold: it writes the pages of about 1,000 frames into the database file and fsyncs it while
 * every call waits. Here a worker with its own connection runs a PASSIVE checkpoint every
 * `intervalMs`; PASSIVE takes no lock that a writer waits for, and a writer restarts the WAL from
 * its start once everything in it has been copied. Commits and their fsync of the WAL are unchanged,
 * so durability is too. The main connection keeps an automatic checkpoint far above what the worker
 * lets the WAL reach, as a backstop should the worker fall behind.
 */
import { Worker } from "node:worker_threads";

export interface CheckpointerStats {
  /** Frames copied into the database file. */
  frames: number;
}

export class Checkpointer {
  private readonly worker: Worker;
  readonly stats: CheckpointerStats = { frames: 0 };

  constructor(path: string, intervalMs: number) {
    this.worker = new Worker(new URL("./checkpointer-worker.js", import.meta.url), {
      workerData: { path, intervalMs },
    });
    this.worker.on("message", (copied: number) => {
      this.stats.frames += copied;
    });
    // A checkpoint that fails (the disk is full) is tried again at the next interval; the backstop
    // checkpoint of the main connection still bounds the WAL. A worker that dies is not restarted:
    // the backstop then does the work, as SQLite would have without this thread.
    this.worker.on("error", () => {});
    this.worker.unref();
  }

  /** Stops the worker; an unfinished checkpoint is abandoned, which SQLite tolerates at any point. */
  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
