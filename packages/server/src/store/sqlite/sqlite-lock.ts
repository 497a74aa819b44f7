/**
 * One process serves a SQLite file at a time. SQLite's own locking lets a second process open the file
 * and write to it, but the wake-ups of long polls and push consumers, and the hand-off of a send to a
 * waiting consumer, live in each process's memory: consumers of one process would not hear of what the
 * other sent until their poll timed out. So the file gets a lock file beside it, `<file>.lock`, naming
 * the process (store/file-lock.ts), and a second `hopper serve` refuses to start, naming the holder.
 */
import { realpathSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { takeLockFile } from "../file-lock.js";

/** The lock files this process holds, by real path, with how many of its stores opened each. */
const held = new Map<string, { opens: number; release: () => void }>();

/** The lock file of the database at `path`. */
export function databaseLockPath(path: string): string {
  return `${path}.lock`;
}

/**
 * Locks the database at `path` (its directory must exist) for this process, or throws naming the
 * process that holds it. Stores of one process may share a file (tests do); the lock file goes with
 * the last of them. Answers the release.
 */
export function lockDatabaseFile(path: string): () => void {
  const lockPath = join(realpathSync(dirname(path)), databaseLockPath(basename(path)));
  let entry = held.get(lockPath);
  if (entry === undefined) {
    const release = takeLockFile(
      lockPath,
      (holder) =>
        new Error(
          `${path} is served by ${holder.local ? `process ${holder.pid}` : `a process on ${holder.host ?? "an unknown host"} (${holder.text})`}` +
            ` (its lock file ${lockPath}): one process serves a SQLite file at a time, since the wake-ups of` +
            ` waiting consumers do not cross processes. If it is stopped, remove ${lockPath}.`,
        ),
    );
    entry = { opens: 0, release };
    held.set(lockPath, entry);
  }
  entry.opens++;
  const opened = entry;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    opened.opens--;
    if (opened.opens > 0) return;
    held.delete(lockPath);
    opened.release();
  };
}
