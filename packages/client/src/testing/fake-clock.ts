import type { Clock, ClockTimer } from "../clock.js";

interface FakeTimer {
  dueAt: number;
  callback: () => void;
}

/** Lets every promise chain and deferred batch that is ready run to completion. */
export async function settle(): Promise<void> {
  // Response bodies and batch flushes take a few event-loop turns; 20 is far more than any test needs.
  for (let turn = 0; turn < 20; turn++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A clock that moves only when a test calls `advance`, running due timers in order. */
export class FakeClock implements Clock {
  private nowMs: number;
  private nextTimerId = 1;
  private readonly timers = new Map<number, FakeTimer>();

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  setTimeout(callback: () => void, delayMs: number): ClockTimer {
    const id = this.nextTimerId++;
    this.timers.set(id, { dueAt: this.nowMs + Math.max(0, delayMs), callback });
    return id;
  }

  clearTimeout(timer: ClockTimer): void {
    this.timers.delete(timer as number);
  }

  get pendingTimerCount(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing each due timer at its own time and settling after each. */
  async advance(ms: number): Promise<void> {
    const targetMs = this.nowMs + ms;
    for (;;) {
      await settle();
      const next = this.nextDue(targetMs);
      if (next === undefined) break;
      const [id, timer] = next;
      this.timers.delete(id);
      this.nowMs = timer.dueAt;
      timer.callback();
    }
    this.nowMs = targetMs;
    await settle();
  }

  private nextDue(limitMs: number): [number, FakeTimer] | undefined {
    let earliest: [number, FakeTimer] | undefined;
    for (const entry of this.timers) {
      if (entry[1].dueAt <= limitMs && (earliest === undefined || entry[1].dueAt < earliest[1].dueAt)) {
        earliest = entry;
      }
    }
    return earliest;
  }
}
