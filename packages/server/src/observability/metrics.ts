/**
 * Prometheus metrics. Queue figures are read from the broker at scrape time: the store's counters
 * are the truth and survive restarts, so each scrape exports them as they are.
 *
 * The per-queue families (15 series a queue) are written here rather than through prom-client, page
 * by page of the queue listing with a turn of the event loop between pages: with 10,000 queues,
 * prom-client's labelled `set`/`inc` and its formatting of 150,000 series held the event loop for
 * about half a second per scrape, and every other request waited (bench/results/2026-12-01-session-9.md).
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { ExchangeBroker } from "../broker/exchanges.js";
import type { InboxBroker } from "../broker/inboxes.js";
import type { QueueBroker } from "../broker/queues.js";
import type { StreamBroker } from "../broker/streams.js";
import type { RecoveryOutcome } from "../store/log/log-recovery.js";
import { Family, labelValue } from "./families.js";
import { renderStreams } from "./stream-metrics.js";

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

/** The store's counters of a namespace's entries, by how they arrived or left (InboxCounters). */
const inboxEvents = ["appended", "duplicates", "skipped", "acked", "expired", "overflowed"] as const;

export class Metrics {
  private readonly registry = new Registry();

  constructor(
    private readonly broker: QueueBroker,
    exchanges: ExchangeBroker,
    store?: {
      commitStats?: { commits: number; jobs: number };
      checkpointStats?: { frames: number } | undefined;
      recovery?: RecoveryOutcome | undefined;
    },
    private readonly inboxes?: InboxBroker,
    private readonly streams?: StreamBroker,
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: "hopper_" });
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
      name: "hopper_messages_corrupt_total",
      help: "Messages withheld from delivery because their body failed its checksum (SQLite), since this process started.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(broker.corruptFound);
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
    // The embedded stores' group commit (SQLite's, the log store's flushes): jobs ÷ commits is how many
    // calls shared each commit (and fsync).
    if (store?.commitStats) {
      const commitStats = () => store.commitStats ?? { commits: 0, jobs: 0 };
      new Counter({
        name: "hopper_store_commits_total",
        help: "Commits of the embedded store (SQLite transactions, log store batches written): at most one fsync each.",
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
    if (store && "checkpointStats" in store) {
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
    if (store?.recovery) this.recoveryGauges(store.recovery);
  }

  /** What the log store's recovery did when this process opened it (a refusal never gets this far:
   * the process exits naming the damage, docs/log-store.md "Recovery"). */
  private recoveryGauges(recovery: RecoveryOutcome): void {
    const figures: Array<[string, string, number]> = [
      ["records_replayed", "Log records replayed when the store opened.", recovery.recordsReplayed],
      [
        "records_cut",
        "Intact records in the unfinished last write cut from the log when the store opened (never confirmed).",
        recovery.cut?.records ?? 0,
      ],
      [
        "bytes_cut",
        "Bytes of an unfinished last write cut from the log when the store opened, kept in set-aside/.",
        recovery.cut?.bytes ?? 0,
      ],
      [
        "files_set_aside",
        "Whole files (unfinished compactions, unfinished new segments) moved to set-aside/ when the store opened.",
        recovery.setAside.length,
      ],
    ];
    for (const [name, help, value] of figures) {
      new Gauge({ name: `hopper_log_recovery_${name}`, help, registers: [this.registry] }).set(value);
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The scrape: prom-client's metrics, then the per-queue families, then the per-namespace ones. */
  async render(): Promise<string> {
    const queueFamilies = await this.renderQueues();
    const inboxFamilies = this.inboxes ? `\n${await this.renderInboxes(this.inboxes)}` : "";
    const streamFamilies = this.streams ? `\n${await renderStreams(this.streams)}` : "";
    return `${await this.registry.metrics()}\n${queueFamilies}${inboxFamilies}${streamFamilies}`;
  }

  /**
   * The per-namespace inbox families: the store's counters and sizes (shared by every node), and this
   * node's live figures (subscriptions, replay sizes, ack lag), which restart at 0 with the process.
   */
  private async renderInboxes(inboxes: InboxBroker): Promise<string> {
    const entries = new Family(
      "hopper_inbox_entries_total",
      "Inbox entries per namespace and event since the namespace was created, as the store counts them.",
      "counter",
    );
    const forgotten = new Family(
      "hopper_inbox_devices_forgotten_total",
      "Devices forgotten after forgetDeviceAfterMs unseen.",
      "counter",
    );
    const held = new Family("hopper_inbox_entries", "Entries held now, over every recipient.", "gauge");
    const recipients = new Family(
      "hopper_inbox_recipients",
      "Recipients with a log in the namespace.",
      "gauge",
    );
    const open = new Family("hopper_inbox_subscriptions", "Live subscriptions on this node.", "gauge");
    const opened = new Family(
      "hopper_inbox_subscriptions_opened_total",
      "Subscriptions opened on this node since it started.",
      "counter",
    );
    const replay = new Family(
      "hopper_inbox_replay_entries",
      "Entries a subscription replayed before it went live, on this node.",
      "histogram",
    );
    const ackLag = new Family(
      "hopper_inbox_ack_lag_seconds",
      "Time from an entry's append to its ack by a device, on this node.",
      "histogram",
    );
    for (const { name, stats } of await inboxes.listInboxes()) {
      const inbox = `inbox="${labelValue(name)}"`;
      for (const event of inboxEvents) entries.add(`${inbox},event="${event}"`, stats[event]);
      forgotten.add(inbox, stats.devicesForgotten);
      held.add(inbox, stats.entries);
      recipients.add(inbox, stats.recipients);
      open.add(inbox, inboxes.subscriptionsOpen(name));
      const live = inboxes.liveStats(name);
      opened.add(inbox, live?.subscriptionsOpened ?? 0);
      if (live) {
        replay.addHistogram(inbox, live.replayEntries);
        ackLag.addHistogram(inbox, live.ackLagSeconds);
      }
    }
    return [entries, forgotten, held, recipients, open, opened, replay, ackLag]
      .map((family) => family.text())
      .join("\n");
  }

  /** The per-queue families, written page by page of the queue listing (QueueBroker.queuePages). */
  private async renderQueues(): Promise<string> {
    const messages = new Family(
      "hopper_queue_messages_total",
      "Messages per queue and event since the queue was created, as the store counts them.",
      "counter",
    );
    const depth = new Family("hopper_queue_depth", "Messages per queue and state.", "gauge");
    const oldest = new Family(
      "hopper_queue_oldest_message_age_seconds",
      "Age of the oldest message in the queue.",
      "gauge",
    );
    const consumers = new Family("hopper_queue_consumers", "Receive calls in progress per queue.", "gauge");
    for await (const page of this.broker.queuePages()) {
      for (const { name, stats } of page) {
        const queue = `queue="${labelValue(name)}"`;
        for (const event of counterEvents) messages.add(`${queue},event="${event}"`, stats[event]);
        depth.add(`${queue},state="available"`, stats.available);
        depth.add(`${queue},state="delayed"`, stats.delayed);
        depth.add(`${queue},state="in_flight"`, stats.inFlight);
        oldest.add(queue, stats.oldestMessageAgeMs / 1000);
        consumers.add(queue, stats.consumers);
      }
    }
    return [messages, depth, oldest, consumers].map((family) => family.text()).join("\n");
  }
}
