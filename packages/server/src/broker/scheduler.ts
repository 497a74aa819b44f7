/**
 * One timer per queue, set to the earliest moment something is known to fall due in it (a delayed
 * message, a lease's end, the oldest message's retention). When it fires, the broker looks at the
 * store, does the due work and sets the timer again from what the store says is next. Anything that
 * adds a due time only has to offer it: `offer` keeps the earliest. No per-message loops, no polling.
 */
import type { Clock } from "../clock.js";

interface Slot {
  atMs: number;
  cancel: () => void;
}

export class Scheduler {
  private readonly slots = new Map<string, Slot>();
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly onDue: (queue: string) => Promise<void>,
  ) {}

  /** Makes sure `queue` is looked at no later than `atMs`. */
  offer(queue: string, atMs: number): void {
    if (this.stopped) return;
    const slot = this.slots.get(queue);
    if (slot && slot.atMs <= atMs) return;
    slot?.cancel();
    const cancel = this.clock.setTimer(atMs, () => {
      this.slots.delete(queue);
      return this.onDue(queue);
    });
    this.slots.set(queue, { atMs, cancel });
  }

  forget(queue: string): void {
    this.slots.get(queue)?.cancel();
    this.slots.delete(queue);
  }

  stop(): void {
    this.stopped = true;
    for (const queue of [...this.slots.keys()]) this.forget(queue);
  }

  nextDueAt(queue: string): number | undefined {
    return this.slots.get(queue)?.atMs;
  }
}
