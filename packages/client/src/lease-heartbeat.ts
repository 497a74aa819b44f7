import type { HopperClient } from "./client.js";
import type { ClockTimer } from "./clock.js";
import { HopperError } from "./errors.js";
import { isItemError } from "./types.js";

export interface LeaseHeartbeatParams {
  client: HopperClient;
  queue: string;
  receipt: string;
  /** The lease length each extend asks for. */
  leaseMs: number;
  heartbeatMs: number;
  report: (error: unknown) => void;
}

/**
 * Extends one message's lease every `heartbeatMs` while its handler runs. When the server answers
 * `stale_receipt` the lease is gone (another consumer may hold the message now), so `signal` fires
 * with that error and the heartbeat ends.
 */
export class LeaseHeartbeat {
  private readonly controller = new AbortController();
  private timer: ClockTimer | undefined;
  private stopped = false;

  constructor(private readonly params: LeaseHeartbeatParams) {
    this.schedule();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get leaseLost(): boolean {
    return this.controller.signal.aborted;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) {
      this.params.client.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private schedule(): void {
    const { client, heartbeatMs } = this.params;
    this.timer = client.clock.setTimeout(() => void this.beat(), heartbeatMs);
  }

  private async beat(): Promise<void> {
    this.timer = undefined;
    const { client, queue, receipt, leaseMs, report } = this.params;
    try {
      const result = await client.extendLater(queue, receipt, leaseMs);
      if (isItemError(result)) {
        const error = HopperError.fromItem(result.error, 200);
        if (error.code === "stale_receipt") {
          this.stopped = true;
          this.controller.abort(error);
          report(error);
          return;
        }
        report(error);
      }
    } catch (error) {
      // A failed extend may be a passing network fault; the lease may still be alive, so keep beating.
      report(error);
    }
    if (!this.stopped) {
      this.schedule();
    }
  }
}
