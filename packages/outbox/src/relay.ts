/**
 * The polling relay: it claims the first pending row of each key (up to a batch), publishes them with
 * confirms, and marks each row sent only after the broker confirmed it, so a crash in between publishes
 * it again (the double publish that dedupIds and processOnce absorb) and never loses it. A key's next
 * row becomes claimable only once its head is sent, so each key is published in order, one row at a
 * time; a failed row holds its key until it is retried or dropped.
 *
 * Waits: a retryable failure backs off with full jitter (never under Retry-After); a missing
 * destination is paused alone; an auth failure pauses the relay. With PostgreSQL an idle relay sleeps
 * until a NOTIFY from the insert trigger; with SQLite it polls.
 */
import { HopperClient } from "@hopper/client";
import { backoffDelayMs } from "./backoff.js";
import { type OutboxClock, type RandomFloat, systemClock, systemRandom } from "./clock.js";
import type { OutboxDatabase, OutboxDriver, RowMarks } from "./driver.js";
import { destinationLabel, type OutboxRow } from "./event.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import type { RecordedError } from "./publish-errors.js";
import { groupByDestination, publishDestinationRows, type RowOutcome } from "./publish-rows.js";
import type { TableOptions } from "./tables.js";

export interface RelayOptions extends TableOptions {
  db: OutboxDatabase;
  /** Where to publish: Hopper's URL and key, or a client of your own (the relay does not close it). */
  hopper: { url: string; apiKey?: string } | HopperClient;
  /** "poll" (default): read the outbox table. The log-tailing mode ("wal") is not built yet. */
  mode?: "poll";
  /** How long sent rows are kept before they are deleted; default 24 h. */
  sentRetentionMs?: number;
  /** SQLite: how often an idle relay looks for rows; default 50 ms. */
  pollIntervalMs?: number;
  /** Rows per claim, 1 to 100. */
  batchRowsMax?: number;
  /** Every failure (publish, database); default console.error. The relay goes on after each. */
  onError?: (error: unknown, context: { rows?: readonly OutboxRow[] }) => void;
  /** Called after rows were marked sent (committed), with them and the time of the mark (ms). */
  onPublished?: (rows: readonly OutboxRow[], markedAt: number) => void;
  clock?: OutboxClock;
  random?: RandomFloat;
}

export interface RelayMetrics {
  /** Rows marked sent by this relay since it started. */
  published: number;
  /** Rows marked failed by this relay since it started. */
  failed: number;
  /** Rows waiting to be published now (the whole table, every relay's). */
  pendingRows: number;
  /** Failed rows in the table now. */
  failedRows: number;
  /** Age of the oldest pending row (ms), 0 when none. */
  oldestPendingAgeMs: number;
  /** Destinations (`queue:name`, `exchange:name`) paused because they do not exist. */
  pausedDestinations: string[];
  /** Set while every publish is paused on an auth failure. */
  pausedOn: RecordedError | undefined;
}

export interface Relay {
  /** Finishes the claim in progress (its publish, bounded by the request timeout), then stops. */
  stop(): Promise<void>;
  metrics(): Promise<RelayMetrics>;
  /** Resolves when the relay has stopped. */
  readonly done: Promise<void>;
}

/** Test-only points where a test's child process pauses so that a kill -9 lands exactly there. */
export interface RelayHooks {
  /** After the claim, before the publish. */
  beforePublish?(rows: readonly OutboxRow[]): Promise<void>;
  /** After Hopper confirmed, before the rows are marked sent. */
  afterConfirm?(rows: readonly OutboxRow[]): Promise<void>;
}

export function runRelay(options: RelayOptions): Relay {
  return startRelay(options, {});
}

interface CycleOutcome {
  claimed: number;
  sent: number;
  /** A retryable failure happened: back off before the next claim. */
  retry: boolean;
  retryAfterMs: number | undefined;
}

export function startRelay(options: RelayOptions, hooks: RelayHooks): Relay {
  // Over 80 lines: the relay's loop, its wake-ups and its metrics share the state in this closure.
  if (options.mode !== undefined && options.mode !== "poll") {
    // Refused rather than ignored: a relay that silently polled instead would not be what was asked for.
    throw new Error(
      `runRelay: mode ${JSON.stringify(options.mode)} is not built yet (docs/outbox.md); use "poll"`,
    );
  }
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const driver: OutboxDriver = openDriver(options.db, options);
  const batchRowsMax = options.batchRowsMax ?? outboxLimits.claimRowsMax;
  if (!Number.isInteger(batchRowsMax) || batchRowsMax < 1 || batchRowsMax > outboxLimits.claimRowsMax) {
    throw new RangeError(`batchRowsMax must be 1 to ${outboxLimits.claimRowsMax}`);
  }
  const sentRetentionMs = options.sentRetentionMs ?? outboxLimits.sentRetentionMsDefault;
  const idleWaitMs =
    driver.dialect === "sqlite"
      ? (options.pollIntervalMs ?? outboxLimits.sqlitePollIntervalMs)
      : outboxLimits.postgresSafetyPollIntervalMs;
  const onError =
    options.onError ??
    ((error: unknown) => console.error("[hopper-outbox]", error instanceof Error ? error.message : error));
  const ownsClient = !(options.hopper instanceof HopperClient);
  const hopper =
    options.hopper instanceof HopperClient
      ? options.hopper
      : new HopperClient({ ...options.hopper, requestTimeoutMs: outboxLimits.publishTimeoutMs });

  const counters = { published: 0, failed: 0 };
  /** Paused destinations: until when (ms), and how many pauses in a row (the back-off's attempt). */
  const pauses = new Map<string, { untilMs: number; attempt: number }>();
  let pausedOn: RecordedError | undefined;
  let stopped = false;
  const stopController = new AbortController();
  /** Aborted to end an idle wait early (a NOTIFY, or stop); replaced after each wait. */
  let wakeController = new AbortController();
  let wakeRequested = false;
  const wake = () => {
    wakeRequested = true;
    wakeController.abort();
  };

  async function publishClaimed(rows: OutboxRow[], cycle: CycleOutcome): Promise<RowMarks> {
    await hooks.beforePublish?.(rows);
    const groups = groupByDestination(rows);
    const outcomes = await Promise.all(groups.map((group) => publishDestinationRows(hopper, group)));
    await hooks.afterConfirm?.(rows);
    const marks: RowMarks = { sent: [], failed: [] };
    const now = clock.now();
    for (const [groupIndex, group] of groups.entries()) {
      const label = destinationLabel((group[0] as OutboxRow).destination);
      let paused = false;
      for (const [index, row] of group.entries()) {
        const outcome = outcomes[groupIndex]?.[index] as RowOutcome;
        if (outcome.kind === "sent") marks.sent.push(row.seq);
        else if (outcome.kind === "failed") marks.failed.push({ seq: row.seq, error: outcome.error });
        else if (outcome.kind === "retry") {
          cycle.retry = true;
          cycle.retryAfterMs = Math.max(cycle.retryAfterMs ?? 0, outcome.retryAfterMs ?? 0) || undefined;
        } else if (outcome.scope === "relay") {
          pausedOn = outcome.error;
          cycle.retry = true;
        } else paused = true;
        if (outcome.kind !== "sent" && outcome.kind !== "failed" && index === 0) {
          onError(
            Object.assign(new Error(`${label}: ${outcome.error.code}: ${outcome.error.message}`), {
              outcome,
            }),
            {
              rows: group,
            },
          );
        }
      }
      if (paused) {
        const attempt = (pauses.get(label)?.attempt ?? 0) + 1;
        pauses.set(label, { untilMs: now + backoffDelayMs(attempt, random, undefined), attempt });
      } else pauses.delete(label);
    }
    if (!cycle.retry) pausedOn = undefined;
    return marks;
  }

  async function cycle(): Promise<CycleOutcome> {
    const now = clock.now();
    for (const [label, pause] of pauses) if (pause.untilMs <= now) pauses.delete(label);
    // A destination whose pause ended is claimed again; its attempt count is kept in case it fails.
    const excluded = [...pauses.entries()].filter(([, pause]) => pause.untilMs > now).map(([label]) => label);
    const outcome: CycleOutcome = { claimed: 0, sent: 0, retry: false, retryAfterMs: undefined };
    let marks: RowMarks | undefined;
    let claimedRows: OutboxRow[] = [];
    outcome.claimed = await driver.outboxClaimHeads(
      { limit: batchRowsMax, excludedDestinations: excluded, now: () => clock.now() },
      async (rows) => {
        claimedRows = rows;
        marks = await publishClaimed(rows, outcome);
        return marks;
      },
    );
    // Counted once the marks are committed: a claim whose transaction failed published rows that are
    // still pending, and will be published again.
    if (marks) {
      outcome.sent = marks.sent.length;
      counters.published += marks.sent.length;
      counters.failed += marks.failed.length;
      if (options.onPublished && marks.sent.length > 0) {
        const sent = new Set(marks.sent);
        options.onPublished(
          claimedRows.filter((row) => sent.has(row.seq)),
          clock.now(),
        );
      }
    }
    return outcome;
  }

  async function prune(): Promise<void> {
    await driver.outboxPruneSent({
      sentBefore: clock.now() - sentRetentionMs,
      limit: outboxLimits.pruneRowsMax,
    });
  }

  async function loop(): Promise<void> {
    let listener: { close(): Promise<void> } | undefined;
    let failureAttempt = 0;
    let nextPruneAt = clock.now();
    try {
      while (!stopped) {
        if (driver.listen && !listener) {
          listener = await driver
            .listen(wake, (error) => onError(error, {}))
            .catch((error) => {
              onError(error, {});
              return undefined;
            });
        }
        wakeRequested = false;
        let outcome: CycleOutcome;
        try {
          outcome = await cycle();
          if (clock.now() >= nextPruneAt) {
            nextPruneAt = clock.now() + outboxLimits.pruneIntervalMs;
            await prune();
          }
        } catch (error) {
          onError(error, {});
          outcome = { claimed: 0, sent: 0, retry: true, retryAfterMs: undefined };
          // The listening session may be the one that broke; open a new one on the next turn.
          await listener?.close().catch(() => {});
          listener = undefined;
        }
        if (outcome.retry) {
          failureAttempt += 1;
          // Not cut short by a NOTIFY: a stream of inserts must not defeat the back-off.
          await clock.sleep(
            backoffDelayMs(failureAttempt, random, outcome.retryAfterMs),
            stopController.signal,
          );
          continue;
        }
        failureAttempt = 0;
        // A sent row may have uncovered the next row of its key, and a full claim may have left more.
        if (outcome.sent > 0 || outcome.claimed === batchRowsMax || wakeRequested) continue;
        const now = clock.now();
        let waitMs = idleWaitMs;
        for (const pause of pauses.values()) waitMs = Math.min(waitMs, Math.max(pause.untilMs - now, 0));
        await clock.sleep(waitMs, wakeController.signal);
        if (wakeController.signal.aborted) wakeController = new AbortController();
      }
    } finally {
      await listener?.close().catch(() => {});
      if (ownsClient) await hopper.close();
    }
  }

  const done = loop();
  return {
    done,
    async stop() {
      stopped = true;
      stopController.abort();
      wakeController.abort();
      await done;
    },
    async metrics() {
      const stats = await driver.outboxStats();
      const now = clock.now();
      return {
        ...counters,
        pendingRows: stats.pendingRows,
        failedRows: stats.failedRows,
        oldestPendingAgeMs:
          stats.oldestPendingCreatedAt === undefined ? 0 : Math.max(0, now - stats.oldestPendingCreatedAt),
        pausedDestinations: [...pauses.entries()].filter(([, p]) => p.untilMs > now).map(([label]) => label),
        pausedOn,
      };
    },
  };
}
