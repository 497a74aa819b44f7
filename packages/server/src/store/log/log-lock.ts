/**
 * One process writes a log directory at a time: two would interleave their appends and each would
 * delete the other's segments when it compacts. `lockDirectory` puts a `LOCK` file in the directory
 * naming this process (`<pid> <hostname>`), taken as store/file-lock.ts takes any lock file: never seen
 * half written, taken over from a process that is gone, never from one on another host.
 */
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { takeLockFile } from "../file-lock.js";

export const lockFileName = "LOCK";

/** The directories this process holds, by real path: a LOCK names a process, not an open log. */
const held = new Set<string>();

/** Locks `dir` for this process, or throws naming who holds it. Answers the release. */
export function lockDirectory(dir: string): () => void {
  const real = realpathSync(dir);
  if (held.has(real))
    throw new Error(`${dir} is already open in this process: one log writes a directory at a time.`);
  const path = join(real, lockFileName);
  const release = takeLockFile(
    path,
    (holder) =>
      new Error(
        `${dir} is in use by ${holder.local ? `process ${holder.pid}` : `a process on ${holder.host ?? "an unknown host"} (${holder.text})`}` +
          ` (its ${lockFileName} file): one process writes a log at a time. If it is stopped, remove ${path}.`,
      ),
  );
  held.add(real);
  return () => {
    held.delete(real);
    release();
  };
}
