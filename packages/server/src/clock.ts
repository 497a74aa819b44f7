/**
 * The only source of time in the server. Broker semantics (leases, delays, retention, long polls)
 * read `now()` and schedule with `setTimer()`, so tests drive them with a FakeClock instead of sleeping.
 */
import { limits } from "./limits.js";

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Calls `fn` once `now() >= atMs`. The returned function cancels the timer. `fn` may return a
   * promise of the work it started, which a FakeClock waits for so that tests see that work done.
   */
  setTimer(atMs: number, fn: TimerCallback): () => void;
}

export type TimerCallback = () => void | Promise<void>;

// setTimeout takes a signed 32-bit delay; a longer one fires at once, so long waits are chained.
// Node's bound, not one of ours, so it stays here rather than in limits.ts.
const timeoutMsMax = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(atMs, fn) {
    let handle: NodeJS.Timeout;
    const arm = () => {
      const delayMs = atMs - Date.now();
      if (delayMs > timeoutMsMax) {
        handle = setTimeout(arm, timeoutMsMax);
      } else {
        handle = setTimeout(() => void fn(), Math.max(0, delayMs));
      }
      handle.unref?.();
    };
    arm();
    return () => clearTimeout(handle);
  },
};

interface FakeTimer {
  atMs: number;
  order: number;
  fn: TimerCallback;
}

/** A clock that moves only when a test calls `advance()`; due timers fire in time order. */
export class FakeClock implements Clock {
  private nowMs: number;
  private timers: FakeTimer[] = [];
  private nextOrder = 0;

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimer(atMs: number, fn: TimerCallback): () => void {
    const timer = { atMs, order: this.nextOrder++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, firing every timer that falls due, earliest first. */
  async advance(ms: number): Promise<void> {
    const targetMs = this.nowMs + ms;
    for (let fired = 0; ; fired++) {
      // Code that keeps setting timers that are already due would spin for ever in real time too.
      if (fired >= limits.fakeClockTimersPerAdvanceMax)
        throw new Error(`over ${limits.fakeClockTimersPerAdvanceMax} timers fired in one advance: a spin`);
      const due = this.timers
        .filter((t) => t.atMs <= targetMs)
        .sort((a, b) => a.atMs - b.atMs || a.order - b.order)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.nowMs = Math.max(this.nowMs, due.atMs);
      // Wait for the work the timer started, and the promise chains it set off, before the next one.
      await due.fn();
      await settle();
    }
    this.nowMs = targetMs;
    await settle();
  }

  pendingTimers(): number {
    return this.timers.length;
  }
}

/** Resolves after the current macrotask queue has drained (I/O callbacks and immediates). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}
