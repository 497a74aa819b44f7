/**
 * One process writes a log directory at a time: two would interleave their appends and each would
 * delete the other's segments when it compacts. `lockDirectory` puts a `LOCK` file in the directory
 * naming this process (`<pid> <hostname>`): written to a file of its own first, then linked into
 * place, so that a LOCK is never seen empty or half written, and two processes racing for a free
 * directory cannot both win (link fails when the name exists).
 *
 * A LOCK whose process is gone (killed with `kill -9`, a crash) is taken over: the kernel has already
 * let go of everything that process held. Whether it is gone can only be asked on its own host, so a
 * LOCK from another hostname (another machine or container sharing the volume) is never taken over:
 * remove it by hand once that writer is known to be stopped. Two processes that find the same stale
 * LOCK at the same instant could both take it over; the server is started by one supervisor, so this
 * is left as a documented limit (docs/log-store.md).
 */
import { linkSync, readFileSync, realpathSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

export const lockFileName = "LOCK";

/** The directories this process holds, by real path: a LOCK names a process, not an open log. */
const held = new Set<string>();

/** Locks `dir` for this process, or throws naming who holds it. Answers the release. */
export function lockDirectory(dir: string): () => void {
  const real = realpathSync(dir);
  if (held.has(real))
    throw new Error(`${dir} is already open in this process: one log writes a directory at a time.`);
  const path = join(real, lockFileName);
  const ours = `${process.pid} ${hostname()}\n`;
  const draft = join(real, `${lockFileName}.${process.pid}`);
  writeFileSync(draft, ours);
  try {
    takeLock(path, draft, ours, dir);
  } finally {
    unlinkSync(draft);
  }
  held.add(real);
  return () => {
    held.delete(real);
    // Removed only if still ours: a lock another process took over (this one was thought gone) stays.
    if (readFileSync(path, "utf8") === ours) unlinkSync(path);
  };
}

function takeLock(path: string, draft: string, ours: string, dir: string): void {
  try {
    linkSync(draft, path);
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const holder = readFileSync(path, "utf8");
  const [pidText, host] = holder.trim().split(" ");
  const pid = Number(pidText);
  const local = host === hostname();
  const gone = local && Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && !isRunning(pid);
  // This process's own pid on this host: left by an earlier life of it (a restarted container, where
  // the server is pid 1 every time), since this process holds no lock on the directory (`held`).
  const earlierSelf = local && pid === process.pid;
  if (!gone && !earlierSelf) {
    throw new Error(
      `${dir} is in use by ${local ? `process ${pid}` : `a process on ${host ?? "an unknown host"} (${holder.trim()})`}` +
        ` (its ${lockFileName} file): one process writes a log at a time. If it is stopped, remove ${path}.`,
    );
  }
  // Replaced in one rename, so that no reader sees it missing or half written.
  writeFileSync(`${path}.new`, ours);
  renameSync(`${path}.new`, path);
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
