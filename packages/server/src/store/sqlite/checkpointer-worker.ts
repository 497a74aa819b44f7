/**
 * The checkpointer's thread (checkpointer.ts): its own connection to the store's file, a PASSIVE
 * checkpoint every interval, and the number of frames each one copied posted back when there were any.
 */
import { parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import { limits } from "../../limits.js";

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const db = new Database(path);
db.pragma(`busy_timeout = ${limits.sqliteBusyTimeoutMs}`);
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");
// The frames of the WAL copied as of the last checkpoint. SQLite counts them from the WAL's start,
// which a writer moves back to 0 once all was copied, so a smaller count means a new start.
let copiedBefore = 0;

setInterval(() => {
  try {
    const { checkpointed } = checkpoint.get() as { checkpointed: number };
    const copied = checkpointed >= copiedBefore ? checkpointed - copiedBefore : checkpointed;
    copiedBefore = checkpointed;
    if (copied > 0) parentPort?.postMessage(copied);
  } catch {
    // Busy or the disk failing: the next interval tries again.
  }
}, intervalMs);
