/**
 * A lock file that names the one process holding something (a log directory, a SQLite file):
 * `<pid> <hostname>`, written to a file of its own first, then linked into place, so that a lock file
 * is never seen empty or half written, and two processes racing for a free one cannot both win (link
 * fails when the name exists).
 *
 * A lock file whose process is gone (killed with `kill -9`, a crash) is taken over: the kernel has
 * already let go of everything that process held. Whether it is gone can only be asked on its own
 * host, so a lock file from another hostname (another machine or container sharing the volume) is
 * never taken over: remove it by hand once that process is known to be stopped. Two processes that
 * find the same stale lock file at the same instant could both take it over; the server is started by
 * one supervisor, so this is left as a documented limit (docs/log-store.md).
 */
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";

/** Who a lock file names, as its caller's refusal describes it. */
export interface LockHolder {
  /** NaN when the file names no process. */
  pid: number;
  host: string | undefined;
  /** The holder is on this host, where whether it runs can be asked. */
  local: boolean;
  /** The file's text, trimmed. */
  text: string;
}

/**
 * Takes the lock file at `path` for this process, or throws `refuse(holder)` while another live
 * process holds it. Answers the release, which removes the file if it is still this process's. The
 * caller keeps its own count of what this process holds: a lock file naming this very process is taken
 * as left by an earlier life of it.
 */
export function takeLockFile(path: string, refuse: (holder: LockHolder) => Error): () => void {
  const ours = `${process.pid} ${hostname()}\n`;
  const draft = `${path}.${process.pid}`;
  writeFileSync(draft, ours);
  try {
    takeOver(path, draft, ours, refuse);
  } finally {
    unlinkSync(draft);
  }
  return () => {
    // Removed only if still ours: a lock another process took over (this one was thought gone) stays.
    if (readFileSync(path, "utf8") === ours) unlinkSync(path);
  };
}

function takeOver(path: string, draft: string, ours: string, refuse: (holder: LockHolder) => Error): void {
  try {
    linkSync(draft, path);
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const text = readFileSync(path, "utf8").trim();
  const [pidText, host] = text.split(" ");
  const pid = Number(pidText);
  const local = host === hostname();
  const gone = local && Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && !isRunning(pid);
  // This process's own pid on this host: left by an earlier life of it (a restarted container, where
  // the server is pid 1 every time), since the caller holds no lock on it.
  const earlierSelf = local && pid === process.pid;
  if (!gone && !earlierSelf) throw refuse({ pid, host, local, text });
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
