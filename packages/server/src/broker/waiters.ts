/**
 * Long polls waiting on queues. A waiter is resolved when the queue may have something for it
 * (a commit added or released messages, or a delayed message fell due), when its deadline passes, or
 * when its request is abandoned. Resolution only says "look again"; the waiter then tries to lease.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";

interface Waiter {
  wake: () => void;
}

export class Waiters {
  private readonly byQueue = new Map<string, Set<Waiter>>();
  /** Counts notifications per queue, so a caller can tell whether one came while it was looking. */
  private readonly versions = new Map<string, number>();
  private count = 0;

  constructor(private readonly clock: Clock) {}

  /** The queue's notification count: take it before looking at the queue, pass it to wait(). */
  version(queue: string): number {
    return this.versions.get(queue) ?? 0;
  }

  /**
   * Resolves at the first of: notify(queue), deadlineMs, or the signal aborting. If a notification
   * came since `sinceVersion` was read, resolves at once: the caller looked too early to see it.
   */
  wait(queue: string, deadlineMs: number, sinceVersion: number, signal?: AbortSignal): Promise<void> {
    if (this.version(queue) !== sinceVersion) return Promise.resolve();
    if (this.count >= limits.waitersMax) return Promise.reject(new HopperError("too_many_waiters"));
    return new Promise<void>((resolve) => {
      let set = this.byQueue.get(queue);
      if (!set) {
        set = new Set();
        this.byQueue.set(queue, set);
      }
      const waiters = set;
      const waiter: Waiter = {
        wake: () => {
          if (!waiters.delete(waiter)) return;
          this.count--;
          if (waiters.size === 0) this.byQueue.delete(queue);
          cancelTimer();
          signal?.removeEventListener("abort", waiter.wake);
          resolve();
        },
      };
      waiters.add(waiter);
      this.count++;
      const cancelTimer = this.clock.setTimer(deadlineMs, waiter.wake);
      signal?.addEventListener("abort", waiter.wake, { once: true });
    });
  }

  /**
   * Wakes every waiter of the queue: each looks again, and those that find nothing wait on. Waking
   * all keeps the rule simple (no waiter is left asleep beside an available message) at the cost of
   * some empty looks when many wait on one queue.
   */
  notify(queue: string): void {
    this.versions.set(queue, this.version(queue) + 1);
    const set = this.byQueue.get(queue);
    if (!set) return;
    for (const waiter of [...set]) waiter.wake();
  }

  /** Wakes every waiter of every queue (at shutdown, or when a queue is deleted). */
  notifyAll(): void {
    for (const queue of [...this.byQueue.keys()]) this.notify(queue);
  }

  waitingOn(queue: string): number {
    return this.byQueue.get(queue)?.size ?? 0;
  }
}
