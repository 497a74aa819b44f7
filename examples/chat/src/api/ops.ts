/**
 * The ops strip's figures, read server-side with Hopper's API key (which never reaches a browser):
 * each user's inbox (depth, head, what each device would replay on reconnect, who is connected), the
 * namespace's counters (duplicates caught, entries dropped by retention), ack lag and replay sizes from
 * Hopper's /metrics histograms, the three queues and their dead letters, and the outbox's backlog.
 */
import type { HopperClient } from "@hopper/client";
import { outboxStatus } from "@hopper/outbox";
import type Database from "better-sqlite3";
import { names } from "../config.js";
import type { ChatQueries } from "../db.js";
import type { HopperInboxes } from "../hopper-inboxes.js";

/** Users the strip lists; a demonstration has a handful. */
const opsUsersMax = 50;

export interface OpsDeps {
  hopper: HopperClient;
  hopperUrl: string;
  hopperApiKey: string;
  inboxes: HopperInboxes;
  db: Database.Database;
  queries: ChatQueries;
}

/** The sum and count of a histogram of /metrics for the chat namespace. */
function histogram(metricsText: string, name: string): { sum: number; count: number } {
  const read = (suffix: string) => {
    const pattern = new RegExp(`^${name}_${suffix}\\{inbox="${names.inbox}"\\} (\\S+)$`, "m");
    return Number(pattern.exec(metricsText)?.[1] ?? 0);
  };
  return { sum: read("sum"), count: read("count") };
}

async function metricsText(deps: OpsDeps): Promise<string> {
  const response = await fetch(`${deps.hopperUrl}/metrics`, {
    headers: { authorization: `Bearer ${deps.hopperApiKey}` },
  });
  return response.ok ? response.text() : "";
}

async function usersOps(deps: OpsDeps) {
  const users = deps.queries.users.all().slice(0, opsUsersMax);
  return Promise.all(
    users.map(async ({ id }) => {
      const info = await deps.inboxes.recipient(id);
      const behind = info.devices.map((device) => info.head - device.cursor);
      return {
        user: id,
        depth: info.depth,
        head: info.head,
        devices: info.devices.length,
        connected: info.connected.length,
        replayOnReconnect: behind.length === 0 ? info.depth : Math.max(...behind),
      };
    }),
  );
}

async function queuesOps(deps: OpsDeps) {
  const queues = Object.values(names.queues).flatMap((queue) => [queue, `${queue}.dlq`]);
  return Promise.all(
    queues.map(async (queue) => {
      const { stats } = await deps.hopper.getQueue(queue);
      return {
        queue,
        depth: stats.available + stats.delayed + stats.inFlight,
        inFlight: stats.inFlight,
        oldestAgeMs: stats.oldestMessageAgeMs,
        deadLettered: stats.deadLettered,
        acked: stats.acked,
      };
    }),
  );
}

export async function readOps(deps: OpsDeps) {
  const [users, queues, inbox, text, outbox] = await Promise.all([
    usersOps(deps),
    queuesOps(deps),
    deps.inboxes.get(),
    metricsText(deps),
    outboxStatus(deps.db),
  ]);
  const ackLag = histogram(text, "hopper_inbox_ack_lag_seconds");
  const replay = histogram(text, "hopper_inbox_replay_entries");
  const stats = inbox.stats;
  return {
    users,
    queues,
    inbox: {
      entries: stats.entries ?? 0,
      appended: stats.appended ?? 0,
      duplicatesCaught: stats.duplicates ?? 0,
      droppedByRetention: (stats.expired ?? 0) + (stats.overflowed ?? 0),
      trimmedAfterAck: stats.acked ?? 0,
      ackLagMeanMs: ackLag.count === 0 ? null : Math.round((ackLag.sum / ackLag.count) * 1000),
      replayMeanEntries: replay.count === 0 ? null : Math.round((replay.sum / replay.count) * 10) / 10,
      subscriptionsReplayed: replay.count,
    },
    outbox: {
      pendingRows: outbox.pendingRows,
      failedRows: outbox.failedRows,
      oldestPendingCreatedAt: outbox.oldestPendingCreatedAt,
    },
  };
}
