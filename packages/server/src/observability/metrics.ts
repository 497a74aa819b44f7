/**
 * Prometheus metrics. Queue figures are read from the broker at scrape time: the store's counters
 * are the truth and survive restarts, so each scrape sets the exported counters to them.
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { ExchangeBroker } from "../broker/exchanges.js";
import type { QueueBroker } from "../broker/queues.js";

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

  constructor(
    broker: QueueBroker,
    exchanges: ExchangeBroker,
    store?: { commitStats?: { commits: number; jobs: number } },
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: "hopper_" });
    const events = new Counter({
      name: "hopper_queue_messages_total",
      help: "Messages per queue and event since the queue was created, as the store counts them.",
      labelNames: ["queue", "event"],
      registers: [this.registry],
      // Registered first, so it runs first at a scrape: one listing of the queues fills every metric.
      collect: async () => {
        events.reset();
        depth.reset();
        oldest.reset();
        consumers.reset();
        removedWithQueues.reset();
        removedWithQueues.inc(broker.removedWithDeletedQueues);
        unroutable.reset();
        for (const [exchange, count] of exchanges.unroutable) unroutable.inc({ exchange }, count);
        for (const queue of await broker.listQueues()) {
          const labels = { queue: queue.name };
          for (const event of counterEvents) events.inc({ ...labels, event }, queue.stats[event]);
          depth.set({ ...labels, state: "available" }, queue.stats.available);
          depth.set({ ...labels, state: "delayed" }, queue.stats.delayed);
          depth.set({ ...labels, state: "in_flight" }, queue.stats.inFlight);
          oldest.set(labels, queue.stats.oldestMessageAgeMs / 1000);
          consumers.set(labels, queue.stats.consumers);
        }
      },
    });
    const removedWithQueues = new Counter({
      name: "hopper_messages_removed_with_queue_total",
      help: "Messages removed because their queue was deleted, since this process started.",
      registers: [this.registry],
    });
    const unroutable = new Counter({
      name: "hopper_exchange_unroutable_total",
      help: "Publishes that reached no queue and were not mandatory (never stored), since this process started.",
      labelNames: ["exchange"],
      registers: [this.registry],
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
    }
    const depth = new Gauge({
      name: "hopper_queue_depth",
      help: "Messages per queue and state.",
      labelNames: ["queue", "state"],
      registers: [this.registry],
    });
    const oldest = new Gauge({
      name: "hopper_queue_oldest_message_age_seconds",
      help: "Age of the oldest message in the queue.",
      labelNames: ["queue"],
      registers: [this.registry],
    });
    const consumers = new Gauge({
      name: "hopper_queue_consumers",
      help: "Receive calls in progress per queue.",
      labelNames: ["queue"],
      registers: [this.registry],
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
