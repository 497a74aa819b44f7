// Time is injected so that the worker's heartbeats, back-off and request timeouts can be tested with a
// fake clock, without sleeping.

/** An opaque timer handle, as returned by `Clock.setTimeout`. */
export type ClockTimer = unknown;

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  setTimeout(callback: () => void, delayMs: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

/** The real clock: `Date.now` and the platform's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, delayMs) => globalThis.setTimeout(callback, delayMs),
  clearTimeout: (timer) => globalThis.clearTimeout(timer as ReturnType<typeof globalThis.setTimeout>),
};

/**
 * A wait on `clock` that its owner can cut short: `wait` resolves after `delayMs`, or at once when
 * `wake()` is called (a stop or close that should not wait out a back-off).
 */
export function interruptibleWait(clock: Clock, delayMs: number): { wait: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const wait = new Promise<void>((resolve) => {
    const timer = clock.setTimeout(() => wake(), delayMs);
    wake = () => {
      clock.clearTimeout(timer);
      resolve();
    };
  });
  return { wait, wake };
}
