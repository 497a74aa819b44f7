/**
 * Waiting for a SQLite store's checkpoint thread (store/sqlite/checkpointer.ts). It runs on a real
 * thread on a real interval, which no fake clock reaches, so this waits in real time, with a bound.
 */
import type { CheckpointerStats } from "../store/sqlite/checkpointer.js";

/** A bound that a debug build on a busy CI machine stays well inside (the thread runs every 50 ms). */
const checkpointWaitMsMax = 5_000;

/**
 * Resolves once the store's checkpoint thread has copied at least `frames` WAL frames, or after
 * `checkpointWaitMsMax`; the caller asserts on what it then reads.
 */
export async function checkpointed(
  store: { readonly checkpointStats: CheckpointerStats | undefined },
  frames: number,
): Promise<void> {
  const deadline = Date.now() + checkpointWaitMsMax;
  while ((store.checkpointStats?.frames ?? 0) < frames && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
