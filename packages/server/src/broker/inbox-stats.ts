/**
 * What this node counts of inbox deliveries, per namespace, for /metrics (DESIGN.md §6, "Stats"): live
 * subscriptions, the size of each replay on (re)subscribe, and the lag of each ack. The store keeps the
 * counters of what entered and left a namespace (InboxCounters); these are the live side's, kept in
 * memory, so they restart at 0 with the process and each node reports its own.
 */
import { limits } from "../limits.js";

/** A cumulative histogram in the Prometheus sense: counts per upper bound, plus +Inf, sum and count. */
export class Histogram {
  /** Observations at or below each bound of `bounds`, in order (not yet cumulative). */
  private readonly perBucket: number[];
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.perBucket = bounds.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    const index = this.bounds.findIndex((bound) => value <= bound);
    if (index !== -1) this.perBucket[index] = (this.perBucket[index] ?? 0) + 1;
  }

  /** [bound, observations at or below it] for each bound, cumulative, as Prometheus buckets are. */
  cumulative(): [number, number][] {
    let running = 0;
    return this.bounds.map((bound, i) => {
      running += this.perBucket[i] ?? 0;
      return [bound, running];
    });
  }
}

export interface InboxLiveFigures {
  /** Subscriptions opened on this node since it started. */
  subscriptionsOpened: number;
  /** Entries sent by each replay (the backlog a device found on subscribing). */
  replayEntries: Histogram;
  /** Seconds from an entry's append to its ack by a device. */
  ackLagSeconds: Histogram;
}

export class InboxLiveStats {
  private readonly byNamespace = new Map<string, InboxLiveFigures>();

  /** The figures of one namespace, made on first use. */
  of(namespace: string): InboxLiveFigures {
    let figures = this.byNamespace.get(namespace);
    if (!figures) {
      figures = {
        subscriptionsOpened: 0,
        replayEntries: new Histogram(limits.inboxReplayEntriesBuckets),
        ackLagSeconds: new Histogram(limits.inboxAckLagSecondsBuckets),
      };
      this.byNamespace.set(namespace, figures);
    }
    return figures;
  }

  /** The figures of a namespace if anything was counted for it. */
  peek(namespace: string): InboxLiveFigures | undefined {
    return this.byNamespace.get(namespace);
  }

  /** A namespace was deleted: its series end with it. */
  forget(namespace: string): void {
    this.byNamespace.delete(namespace);
  }
}
