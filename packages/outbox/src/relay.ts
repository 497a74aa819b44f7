/**
 * runRelay: the relay that publishes the outbox's events to Hopper with confirms, in order per key, in
 * one of two modes that share their publish code (publisher.ts) and their metrics:
 *
 * - "poll" (poll-relay.ts): reads pending rows from the outbox table and marks them sent;
 * - "wal" (wal-relay.ts, PostgreSQL): reads the inserts from logical decoding over a replication
 *   slot, and acknowledges the slot's position once Hopper confirmed them.
 */
import type { HopperClient } from "@hopper/client";
import type { Registry } from "prom-client";
import type { OutboxClock, RandomFloat } from "./clock.js";
import type { OutboxDatabase } from "./driver.js";
import type { OutboxRow } from "./event.js";
import { outboxLimits } from "./limits.js";
import { startPollRelay } from "./poll-relay.js";
import type { RecordedError } from "./publish-errors.js";
import type { RelayHooks } from "./publisher.js";
import { registerRelayMetrics } from "./relay-metrics.js";
import type { TableOptions, WalOptions } from "./tables.js";
import { startWalRelay } from "./wal-relay.js";

export type { RelayHooks } from "./publisher.js";

export interface RelayOptions extends TableOptions, WalOptions {
  /** The application's database. The WAL mode takes a `pg.Pool` (it opens a replication session
   * with the pool's settings). */
  db: OutboxDatabase;
  /** Where to publish: Hopper's URL and key, or a client of your own (the relay does not close it). */
  hopper: { url: string; apiKey?: string } | HopperClient;
  /** "poll" (default): read the outbox table. "wal": read its inserts from PostgreSQL's logical
   * decoding (docs/outbox.md, "The WAL mode"). */
  mode?: "poll" | "wal";
  /** Polling: how long sent rows are kept before they are deleted; default 24 h. */
  sentRetentionMs?: number;
  /** Polling on SQLite: how often an idle relay looks for rows; default 50 ms. */
  pollIntervalMs?: number;
  /** WAL mode: how often the relay reports its confirmed position to the server and, when idle,
   * moves the slot past other tables' WAL; default 10 s (outboxLimits.walFeedbackIntervalMs). */
  feedbackIntervalMs?: number;
  /** Rows per publish round, 1 to 100. */
  batchRowsMax?: number;
  /** Every failure (publish, database); default console.error. The relay goes on after each. */
  onError?: (error: unknown, context: { rows?: readonly OutboxRow[] }) => void;
  /** Called after rows were marked sent (committed) or, in WAL mode, confirmed by Hopper, with them
   * and the time (ms). */
  onPublished?: (rows: readonly OutboxRow[], markedAt: number) => void;
  /** A prom-client registry to export the relay's metrics to (relay-metrics.ts); removed on stop. */
  registry?: Registry;
  clock?: OutboxClock;
  random?: RandomFloat;
}

export interface RelayMetrics {
  mode: "poll" | "wal";
  /** Rows published (marked sent, or confirmed in WAL mode) by this relay since it started. */
  published: number;
  /** Rows marked failed (or written to the failed table) by this relay since it started. */
  failed: number;
  /** Rows waiting to be published now: polling, the table's (every relay's); WAL, the events this
   * relay has read from the slot and not yet published (the slot's lag counts the rest). */
  pendingRows: number;
  /** Failed rows in the database now (the outbox table's and the failed table's). */
  failedRows: number;
  /** Age of the oldest pending row (ms), 0 when none. */
  oldestPendingAgeMs: number;
  /** WAL mode: bytes of WAL the slot holds (the server's current position minus the slot's
   * confirmed one); undefined when polling, or when the slot could not be read. */
  slotLagBytes: number | undefined;
  /** Destinations (`queue:name`, `exchange:name`) paused because they do not exist. */
  pausedDestinations: string[];
  /** Set while every publish is paused on an auth failure. */
  pausedOn: RecordedError | undefined;
}

export interface Relay {
  /** Finishes the publish in progress (bounded by the request timeout), then stops. */
  stop(): Promise<void>;
  metrics(): Promise<RelayMetrics>;
  /** Resolves when the relay has stopped. */
  readonly done: Promise<void>;
}

export function runRelay(options: RelayOptions): Relay {
  return startRelay(options, {});
}

export function startRelay(options: RelayOptions, hooks: RelayHooks): Relay {
  const batchRowsMax = options.batchRowsMax ?? outboxLimits.claimRowsMax;
  if (!Number.isInteger(batchRowsMax) || batchRowsMax < 1 || batchRowsMax > outboxLimits.claimRowsMax) {
    throw new RangeError(`batchRowsMax must be 1 to ${outboxLimits.claimRowsMax}`);
  }
  const mode = options.mode ?? "poll";
  if (mode !== "poll" && mode !== "wal") {
    throw new TypeError(`runRelay: mode must be "poll" or "wal", not ${JSON.stringify(mode)}`);
  }
  const relay = mode === "wal" ? startWalRelay(options, hooks) : startPollRelay(options, hooks);
  if (!options.registry) return relay;
  const unregister = registerRelayMetrics(options.registry, relay, mode);
  return {
    done: relay.done,
    metrics: () => relay.metrics(),
    async stop() {
      await relay.stop();
      unregister();
    },
  };
}
