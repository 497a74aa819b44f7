/**
 * Prometheus metrics. Queue figures are read from the broker at scrape time: the store's counters
 * are the truth and survive restarts, so each scrape sets the exported counters to them.
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { ExchangeBroker } from "../broker/exchanges.js";
import type { QueueBroker, QueueInfo } from "../broker/queues.js";

const counterEvents = [
  "published",
  "delivered",
  "redelivered",
  "acked",
  "nacked",
  "expired",
  "deadLettered",
  "purged",
  "dropped",
  "redriven",
] as const;

export class Metrics {
  private readonly registry = new Registry();
  /**
   * The queues as listed for the scrape under way. prom-client collects every metric at once, not one
   * after another, so each queue metric awaits this one listing and fills itself from it.
   */
  private queues: Promise<QueueInfo[]> = Promise.resolve([]);

  constructor(
    private readonly broker: QueueBroker,
    exchanges: ExchangeBroker,
    store?: {
      commitStats?: { commits: number; jobs: number };
      checkpointStats?: { frames: number } | undefined;
    },
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: "hopper_" });
    const listedQueues = () => this.queues;
    /** A collect that refills its metric from the scrape's one listing of the queues. */
    const fromListing = <M extends { reset(): void }>(fill: (metric: M, queues: QueueInfo[]) => void) =>
      async function (this: M): Promise<void> {
        const queues = await listedQueues();
        this.reset();
        fill(this, queues);
      };
    new Counter({
      name: "hopper_queue_messages_total",
      help: "Messages per queue and event since the queue was created, as the store counts them.",
      labelNames: ["queue", "event"],
      registers: [this.registry],
      collect: fromListing<Counter>((counter, queues) => {
        for (const { name, stats } of queues) {
          for (const event of counterEvents) counter.inc({ queue: name, event }, stats[event]);
        }
      }),
    });
    new Gauge({
      name: "hopper_queue_depth",
      help: "Messages per queue and state.",
      labelNames: ["queue", "state"],
      registers: [this.registry],
      collect: fromListing<Gauge>((gauge, queues) => {
        for (const { name, stats } of queues) {
          gauge.set({ queue: name, state: "available" }, stats.available);
          gauge.set({ queue: name, state: "delayed" }, stats.delayed);
          gauge.set({ queue: name, state: "in_flight" }, stats.inFlight);
        }
      }),
    });
    new Gauge({
      name: "hopper_queue_oldest_message_age_seconds",
      help: "Age of the oldest message in the queue.",
      labelNames: ["queue"],
      registers: [this.registry],
      collect: fromListing<Gauge>((gauge, queues) => {
        for (const { name, stats } of queues) gauge.set({ queue: name }, stats.oldestMessageAgeMs / 1000);
      }),
    });
    new Gauge({
      name: "hopper_queue_consumers",
      help: "Receive calls in progress per queue.",
      labelNames: ["queue"],
      registers: [this.registry],
      collect: fromListing<Gauge>((gauge, queues) => {
        for (const { name, stats } of queues) gauge.set({ queue: name }, stats.consumers);
      }),
    });
    new Counter({
      name: "hopper_messages_removed_with_queue_total",
      help: "Messages removed because their queue was deleted, since this process started.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(broker.removedWithDeletedQueues);
      },
    });
    new Counter({
      name: "hopper_exchange_unroutable_total",
      help: "Publishes that reached no queue and were not mandatory (never stored), since this process started.",
      labelNames: ["exchange"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [exchange, count] of exchanges.unroutable) this.inc({ exchange }, count);
      },
    });
    // The embedded store's group commit: jobs ÷ commits is how many calls shared each commit (and fsync).
    if (store?.commitStats) {
      const commitStats = () => store.commitStats ?? { commits: 0, jobs: 0 };
      new Counter({
        name: "hopper_store_commits_total",
        help: "Transactions the embedded store committed (one fsync each with durability fsync).",
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(commitStats().commits);
        },
      });
      new Counter({
        name: "hopper_store_commit_jobs_total",
        help: "Store calls committed; divided by hopper_store_commits_total, the calls per group commit.",
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(commitStats().jobs);
        },
      });
      new Counter({
        name: "hopper_store_checkpoint_frames_total",
        help: "WAL frames (pages) the embedded store's checkpoint thread copied into the database file.",
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(store.checkpointStats?.frames ?? 0);
        },
      });
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    this.queues = this.broker.listQueues();
    // A failed listing fails the scrape through each metric that awaits it; this only keeps it from
    // counting as unhandled before they do.
    this.queues.catch(() => {});
    return this.registry.metrics();
  }
}
