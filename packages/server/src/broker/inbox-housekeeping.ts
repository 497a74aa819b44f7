/**
 * Inbox retention: a pass every `limits.inboxSweepIntervalMs` on the injected clock sweeps each
 * namespace (store.inboxSweep: entries past maxAgeMs, devices unseen for forgetDeviceAfterMs and the
 * entries only they held, message ids past the dedup window), in calls of a bounded size. Only the node
 * that leads housekeeping sweeps; the others only keep asking, so one of them takes over from a
 * leader that died. Sweeping is idempotent, so two nodes that briefly both lead do no harm.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { ClusterLink } from "../store/cluster-link.js";
import type { InboxStore } from "../store/inbox-store.js";
import { PeriodicPass } from "./periodic-pass.js";
import type { Logger } from "./queue-context.js";

/** What an inbox broker needs of the store: the inboxes, and the cluster's housekeeping leader. */
export type InboxBrokerStore = InboxStore & Pick<ClusterLink, "housekeepingLeader" | "watch">;

/** What one pass removed, over every namespace. */
export interface SweepTotals {
  expired: number;
  devicesForgotten: number;
  acked: number;
}

export class InboxHousekeeping {
  private readonly timer: PeriodicPass;

  constructor(
    private readonly store: InboxBrokerStore,
    private readonly clock: Clock,
    log: Logger,
  ) {
    this.timer = new PeriodicPass(
      clock,
      limits.inboxSweepIntervalMs,
      () => this.pass(),
      (error) => log.error({ err: error }, "inbox housekeeping failed; retrying next pass"),
    );
  }

  /** Sets the first pass one interval from now. */
  start(): void {
    this.timer.start();
  }

  stop(): void {
    this.timer.stop();
  }

  /** One pass: when this node leads housekeeping, sweeps every namespace; answers what was removed. */
  async pass(): Promise<SweepTotals> {
    const totals: SweepTotals = { expired: 0, devicesForgotten: 0, acked: 0 };
    if (!(await this.store.housekeepingLeader())) return totals;
    for (const inbox of await this.store.inboxList()) {
      if (this.timer.isStopped) break;
      const swept = await this.sweep(inbox.name, this.clock.now());
      totals.expired += swept.expired;
      totals.devicesForgotten += swept.devicesForgotten;
      totals.acked += swept.acked;
    }
    return totals;
  }

  /**
   * Sweeps one namespace in calls of `inboxSweepBatchMax`, while a call finds a full batch to remove,
   * at most `inboxSweepCallsPerPassMax` calls: the rest waits for the next pass.
   */
  private async sweep(name: string, now: number): Promise<SweepTotals> {
    const totals: SweepTotals = { expired: 0, devicesForgotten: 0, acked: 0 };
    const max = limits.inboxSweepBatchMax;
    for (let call = 0; call < limits.inboxSweepCallsPerPassMax; call++) {
      let swept: SweepTotals;
      try {
        swept = await this.store.inboxSweep({ name, now, max });
      } catch (error) {
        // Deleted since the listing: nothing left to sweep.
        if (error instanceof HopperError && error.code === "inbox_not_found") break;
        throw error;
      }
      totals.expired += swept.expired;
      totals.devicesForgotten += swept.devicesForgotten;
      totals.acked += swept.acked;
      if (swept.expired + swept.devicesForgotten + swept.acked < max) break;
    }
    return totals;
  }
}
