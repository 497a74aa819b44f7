/**
 * One process writes a log directory at a time: two would interleave their appends and each would
 * delete the other's segments when it compacts. `lockDirectory` writes the process id into a `LOCK`
 * file, created exclusively. A LOCK left by a process that is gone (killed with `kill -9`, or a
 * machine that stopped) is taken over, since the kernel has already let go of everything it held. Two
 * processes that both find the same stale LOCK in the same instant could both take it over; the
 * server is started by one supervisor, so this is left as a documented limit (docs/log-store.md).
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { resolve } from "node:path";

export const lockFileName = "LOCK";

/** The directories this process holds, by resolved path: a LOCK names a process, not an open log. */
const held = new Set<string>();

/** Locks `dir` for this process, or throws naming the live process that holds it. Answers the release. */
export function lockDirectory(dir: string): () => void {
  const path = resolve(dir, lockFileName);
  if (held.has(path))
    throw new Error(`${dir} is already open in this process: one log writes a directory at a time.`);
  const ours = `${process.pid}\n`;
  try {
    const fd = openSync(path, "wx");
    try {
      writeSync(fd, ours);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    const holder = Number.parseInt(readFileSync(path, "utf8"), 10);
    if (Number.isSafeInteger(holder) && holder > 0 && holder !== process.pid && isRunning(holder)) {
      throw new Error(
        `${dir} is in use by process ${holder} (its ${lockFileName} file): one process writes a log at a time. ` +
          `If no such process runs, remove ${path}.`,
      );
    }
    writeFileSync(path, ours);
  }
  held.add(path);
  return () => {
    held.delete(path);
    // Removed only if still ours: a lock another process took over (this one was thought gone) stays.
    if (readFileSync(path, "utf8") === ours) unlinkSync(path);
  };
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists, under another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
