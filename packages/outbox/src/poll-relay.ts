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
import { backoffDelayMs } from "./backoff.js";
import type { OutboxDriver, RowMarks } from "./driver.js";
import type { OutboxRow } from "./event.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import type { RelayHooks } from "./publisher.js";
import type { Relay, RelayOptions } from "./relay.js";
import { relayBase } from "./relay-base.js";

interface CycleOutcome {
  claimed: number;
  sent: number;
  /** A retryable failure happened: back off before the next claim. */
  retry: boolean;
  retryAfterMs: number | undefined;
}

export function startPollRelay(options: RelayOptions, hooks: RelayHooks): Relay {
  // Over 80 lines: the relay's loop, its wake-ups and its metrics share the state in this closure.
  const base = relayBase(options, hooks);
  const { clock, random, onError, publisher, counters, batchRowsMax } = base;
  const driver: OutboxDriver = openDriver(options.db, options);
  const sentRetentionMs = options.sentRetentionMs ?? outboxLimits.sentRetentionMsDefault;
  const idleWaitMs =
    driver.dialect === "sqlite"
      ? (options.pollIntervalMs ?? outboxLimits.sqlitePollIntervalMs)
      : outboxLimits.postgresSafetyPollIntervalMs;

  async function cycle(): Promise<CycleOutcome> {
    const excluded = publisher.pausedDestinations(clock.now());
    const outcome: CycleOutcome = { claimed: 0, sent: 0, retry: false, retryAfterMs: undefined };
    let marks: RowMarks | undefined;
    let claimedRows: OutboxRow[] = [];
    outcome.claimed = await driver.outboxClaimHeads(
      { limit: batchRowsMax, excludedDestinations: excluded, now: () => clock.now() },
      async (rows) => {
        claimedRows = rows;
        marks = await publisher.publish(rows, outcome);
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
      while (!base.isStopped()) {
        if (driver.listen && !listener) {
          listener = await driver
            .listen(
              () => base.wake(),
              (error) => onError(error, {}),
            )
            .catch((error) => {
              onError(error, {});
              return undefined;
            });
        }
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
          await clock.sleep(backoffDelayMs(failureAttempt, random, outcome.retryAfterMs), base.stopSignal);
          continue;
        }
        failureAttempt = 0;
        // A sent row may have uncovered the next row of its key, and a full claim may have left more.
        if (outcome.sent > 0 || outcome.claimed === batchRowsMax) continue;
        const now = clock.now();
        const waitMs = Math.min(
          idleWaitMs,
          (publisher.nextPauseEndMs(now) ?? Number.POSITIVE_INFINITY) - now,
        );
        await base.idle(waitMs);
      }
    } finally {
      await listener?.close().catch(() => {});
      await base.closeHopper();
    }
  }

  return base.relay("poll", loop(), async () => ({
    ...(await driver.outboxStats()),
    slotLagBytes: undefined,
  }));
}
