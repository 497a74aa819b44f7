/**
 * The relay's metrics in a prom-client registry, read from `relay.metrics()` at scrape time (one read
 * per scrape, shared by every family), so a scrape shows what the database and the slot hold then.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { Relay, RelayMetrics } from "./relay.js";

/** Registers the families; answers the function that removes them again. */
export function registerRelayMetrics(
  registry: Registry,
  relay: Pick<Relay, "metrics">,
  mode: "poll" | "wal",
): () => void {
  // The families of one scrape are collected concurrently: they share the read in flight.
  let reading: Promise<RelayMetrics> | undefined;
  const read = () => {
    reading ??= relay.metrics().finally(() => {
      reading = undefined;
    });
    return reading;
  };
  const gauge = (name: string, help: string, value: (metrics: RelayMetrics) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const current = value(await read());
        if (current === undefined) this.reset();
        else this.set(current);
      },
    });
  const counter = (name: string, help: string, value: (metrics: RelayMetrics) => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      async collect() {
        this.reset();
        this.inc(value(await read()));
      },
    });
  const families: (Gauge | Counter)[] = [
    gauge("hopper_outbox_pending_rows", "Outbox rows waiting to be published", (m) => m.pendingRows),
    gauge(
      "hopper_outbox_oldest_pending_age_seconds",
      "Age of the oldest outbox row waiting to be published",
      (m) => m.oldestPendingAgeMs / 1000,
    ),
    gauge(
      "hopper_outbox_failed_rows",
      "Outbox rows refused by Hopper, kept for retry or drop",
      (m) => m.failedRows,
    ),
    counter("hopper_outbox_published_total", "Outbox rows published by this relay", (m) => m.published),
    counter("hopper_outbox_failed_total", "Outbox rows refused by Hopper for this relay", (m) => m.failed),
  ];
  if (mode === "wal") {
    families.push(
      gauge(
        "hopper_outbox_slot_lag_bytes",
        "Bytes of WAL the relay's replication slot holds back (current position minus confirmed)",
        (m) => m.slotLagBytes,
      ),
    );
  }
  return () => {
    for (const family of families) registry.removeSingleMetric((family as unknown as { name: string }).name);
  };
}
