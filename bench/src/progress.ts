/** Waiting for progress, and failing loudly when there is none: every workload loop is bounded. */

import { watchdogIntervalMs } from "./limits.js";

/** Lets loops sleep until something they wait for may have changed. */
export class Wakeup {
  private waiting: (() => void)[] = [];

  /** Resolves at the next `notify()`. */
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  notify(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}

export interface WatchdogOptions {
  /** Names the workload in the failure message. */
  workload: string;
  /** The whole workload must finish within this. */
  deadlineMs: number;
  /** Fail when `progress()` has not changed for this long. */
  stallMs: number;
  /** Any number that grows while work gets done (messages confirmed plus received, say). */
  progress: () => number;
  /** Describes the state for the failure message: what was confirmed, received, missing. */
  describe: () => string;
}

/**
 * Runs `work` under a deadline and a stall limit. On either it rejects with a message that says which
 * workload stopped and where it was, instead of letting the bench hang.
 */
export async function withWatchdog<T>(options: WatchdogOptions, work: Promise<T>): Promise<T> {
  const startedAt = performance.now();
  let lastProgress = options.progress();
  let lastProgressAt = startedAt;
  let timer: ReturnType<typeof setInterval> | undefined;
  const watchdog = new Promise<never>((_resolve, reject) => {
    timer = setInterval(() => {
      const now = performance.now();
      const progress = options.progress();
      if (progress !== lastProgress) {
        lastProgress = progress;
        lastProgressAt = now;
      }
      if (now - startedAt > options.deadlineMs) {
        reject(
          new Error(
            `${options.workload} missed its ${options.deadlineMs} ms deadline: ${options.describe()}`,
          ),
        );
      } else if (now - lastProgressAt > options.stallMs) {
        reject(new Error(`${options.workload} stalled for ${options.stallMs} ms: ${options.describe()}`));
      }
    }, watchdogIntervalMs);
  });
  try {
    return await Promise.race([work, watchdog]);
  } finally {
    clearInterval(timer);
  }
}
