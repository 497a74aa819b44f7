/**
 * One publish round of either relay: rows (at most one per key) go to Hopper, one request per
 * destination, and each row comes back sent, failed (refused for itself), or still to do, with the
 * waits that follow: a retryable failure asks for a back-off, a missing destination is paused alone
 * with its own back-off, an auth failure pauses every publish. The polling relay and the WAL relay
 * differ only in where rows come from and how a sent one is remembered.
 */
import type { HopperClient } from "@hopper/client";
import { backoffDelayMs } from "./backoff.js";
import type { OutboxClock, RandomFloat } from "./clock.js";
import type { RowMarks } from "./driver.js";
import { destinationLabel, type OutboxRow } from "./event.js";
import type { RecordedError } from "./publish-errors.js";
import { groupByDestination, publishDestinationRows, type RowOutcome } from "./publish-rows.js";

/** What a round asks of the relay's loop besides the marks. */
export interface RoundOutcome {
  /** A retryable failure (or an auth pause) happened: back off before the next round. */
  retry: boolean;
  retryAfterMs: number | undefined;
}

/** Test-only points where a test's child process pauses so that a kill -9 lands exactly there. */
export interface RelayHooks {
  /** After the rows were taken (claimed, or read from the slot), before the publish. */
  beforePublish?(rows: readonly OutboxRow[]): Promise<void>;
  /** After Hopper confirmed, before the rows are marked sent (or the slot acknowledged). */
  afterConfirm?(rows: readonly OutboxRow[]): Promise<void>;
}

export interface Publisher {
  /** Publishes `rows` and says which were sent and which failed; the others stay to do. */
  publish(rows: readonly OutboxRow[], round: RoundOutcome): Promise<RowMarks>;
  /** Destinations (`kind:name`) still paused at `now`. A pause that ended keeps its attempt count
   * until the destination takes a publish, so that its next pause is longer. */
  pausedDestinations(now: number): string[];
  /** When the first pause that is still on at `now` ends (ms), or undefined when none is. */
  nextPauseEndMs(now: number): number | undefined;
  /** Set while every publish is paused on an auth failure. */
  readonly pausedOn: RecordedError | undefined;
}

export function createPublisher(
  hopper: HopperClient,
  options: {
    clock: OutboxClock;
    random: RandomFloat;
    onError: (error: unknown, context: { rows?: readonly OutboxRow[] }) => void;
    hooks: RelayHooks;
  },
): Publisher {
  const { clock, random, onError, hooks } = options;
  /** Paused destinations: until when (ms), and how many pauses in a row (the back-off's attempt). */
  const pauses = new Map<string, { untilMs: number; attempt: number }>();
  let pausedOn: RecordedError | undefined;

  /** Applies one destination's outcomes to the marks and the round; answers whether it is paused. */
  function applyOutcomes(
    group: readonly OutboxRow[],
    outcomes: readonly RowOutcome[],
    marks: RowMarks,
    round: RoundOutcome,
  ): boolean {
    const label = destinationLabel((group[0] as OutboxRow).destination);
    let paused = false;
    for (const [index, row] of group.entries()) {
      const outcome = outcomes[index] as RowOutcome;
      if (outcome.kind === "sent") marks.sent.push(row.seq);
      else if (outcome.kind === "failed") marks.failed.push({ seq: row.seq, error: outcome.error });
      else if (outcome.kind === "retry") {
        round.retry = true;
        round.retryAfterMs = Math.max(round.retryAfterMs ?? 0, outcome.retryAfterMs ?? 0) || undefined;
      } else if (outcome.scope === "relay") {
        pausedOn = outcome.error;
        round.retry = true;
      } else paused = true;
      if (outcome.kind !== "sent" && outcome.kind !== "failed" && index === 0) {
        const error = new Error(`${label}: ${outcome.error.code}: ${outcome.error.message}`);
        onError(Object.assign(error, { outcome }), { rows: group });
      }
    }
    return paused;
  }

  return {
    async publish(rows, round) {
      await hooks.beforePublish?.(rows);
      const groups = groupByDestination(rows);
      const outcomes = await Promise.all(groups.map((group) => publishDestinationRows(hopper, group)));
      await hooks.afterConfirm?.(rows);
      const marks: RowMarks = { sent: [], failed: [] };
      const now = clock.now();
      for (const [groupIndex, group] of groups.entries()) {
        const label = destinationLabel((group[0] as OutboxRow).destination);
        if (applyOutcomes(group, outcomes[groupIndex] as RowOutcome[], marks, round)) {
          const attempt = (pauses.get(label)?.attempt ?? 0) + 1;
          pauses.set(label, { untilMs: now + backoffDelayMs(attempt, random, undefined), attempt });
        } else pauses.delete(label);
      }
      if (!round.retry) pausedOn = undefined;
      return marks;
    },
    pausedDestinations(now) {
      return [...pauses.entries()].filter(([, pause]) => pause.untilMs > now).map(([label]) => label);
    },
    nextPauseEndMs(now) {
      let first: number | undefined;
      for (const { untilMs } of pauses.values())
        if (untilMs > now) first = Math.min(first ?? untilMs, untilMs);
      return first;
    },
    get pausedOn() {
      return pausedOn;
    },
  };
}
