/**
 * Time and randomness for the relay's semantics (back-off, retention, timestamps) come from here, so
 * tests can inject their own.
 */
import { randomFillSync } from "node:crypto";

export interface OutboxClock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Resolves after `delayMs`, or at once when `signal` fires. */
  sleep(delayMs: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: OutboxClock = {
  now: () => Date.now(),
  sleep: (delayMs, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, delayMs);
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    }),
};

/** A float in [0, 1): the jitter of back-offs. */
export type RandomFloat = () => number;

export const systemRandom: RandomFloat = () => {
  const bytes = new Uint32Array(1);
  randomFillSync(bytes);
  return (bytes[0] as number) / 2 ** 32;
};
