/** The peers' stand-in for a long poll: ask again after a short pause until something comes or the wait ends. */
import { setTimeout as sleep } from "node:timers/promises";
import { peerEmptyPollMs, receiveWaitMs } from "../limits.js";

/**
 * Calls `fetchOnce` until it answers something, `receiveWaitMs` has passed, or `signal` aborts; then
 * answers what it got ([] on timeout or abort). At most receiveWaitMs / peerEmptyPollMs + 1 calls.
 */
export async function pollUntilAny<T>(fetchOnce: () => Promise<T[]>, signal: AbortSignal): Promise<T[]> {
  const deadline = performance.now() + receiveWaitMs;
  for (;;) {
    const found = await fetchOnce();
    if (found.length > 0 || signal.aborted || performance.now() >= deadline) return found;
    try {
      await sleep(peerEmptyPollMs, undefined, { signal });
    } catch {
      return [];
    }
  }
}
