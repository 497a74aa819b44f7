/**
 * A pass that runs every `intervalMs` on the injected clock (retention of inboxes and streams): the
 * next pass is set when one ends, so passes never overlap, and a pass that fails is reported and
 * tried again at the next interval.
 */
import type { Clock } from "../clock.js";

export class PeriodicPass {
  private cancelTimer: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly intervalMs: number,
    private readonly pass: () => Promise<unknown>,
    /** Called with a failed pass's error while not stopped. */
    private readonly failed: (error: unknown) => void,
  ) {}

  /** Sets the first pass one interval from now. */
  start(): void {
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  private arm(): void {
    if (this.stopped) return;
    this.cancelTimer?.();
    this.cancelTimer = this.clock.setTimer(this.clock.now() + this.intervalMs, async () => {
      this.cancelTimer = undefined;
      try {
        await this.pass();
      } catch (error) {
        if (!this.stopped) this.failed(error);
      }
      this.arm();
    });
  }
}
