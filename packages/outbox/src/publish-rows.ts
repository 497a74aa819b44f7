/**
 * Publishes claimed rows to Hopper and says, per row, what became of it. Rows for one destination go
 * in one request (a queue send, or an exchange publish with `mandatory: true`, so that a message that
 * reaches no queue is refused rather than dropped); the relay claims at most one row per key, so the
 * rows of one request never depend on each other's order.
 */
import { type HopperClient, isItemError, type PublishResult, type SendResult } from "@hopper/client";
import { destinationLabel, type OutboxRow, rowMessage, rowPublishMessage } from "./event.js";
import {
  classifyItemError,
  classifyRequestError,
  type RecordedError,
  recordError,
} from "./publish-errors.js";

export type RowOutcome =
  | { kind: "sent" }
  | { kind: "failed"; error: RecordedError }
  | { kind: "retry"; error: RecordedError; retryAfterMs: number | undefined }
  /** `relay`: every destination would fail (auth); `destination`: this one is missing. */
  | { kind: "pause"; error: RecordedError; scope: "relay" | "destination" };

/** Rows grouped by destination, in seq order within each group. */
export function groupByDestination(rows: readonly OutboxRow[]): OutboxRow[][] {
  const groups = new Map<string, OutboxRow[]>();
  for (const row of rows) {
    const label = destinationLabel(row.destination);
    const group = groups.get(label);
    if (group) group.push(row);
    else groups.set(label, [row]);
  }
  return [...groups.values()];
}

async function sendOnce(
  hopper: HopperClient,
  rows: readonly OutboxRow[],
): Promise<(SendResult | PublishResult)[]> {
  const first = rows[0] as OutboxRow;
  if ("queue" in first.destination) return hopper.send(first.destination.queue, rows.map(rowMessage));
  const exchange = first.destination.exchange;
  const messages = rows.map((row) =>
    rowPublishMessage(row as OutboxRow & { destination: { routingKey: string } }),
  );
  return hopper.publishTo(exchange, messages, { mandatory: true });
}

/** Publishes the rows of one destination; one outcome per row, in order. */
export async function publishDestinationRows(
  hopper: HopperClient,
  rows: readonly OutboxRow[],
): Promise<RowOutcome[]> {
  let results: (SendResult | PublishResult)[];
  try {
    results = await sendOnce(hopper, rows);
  } catch (error) {
    const kind = classifyRequestError(error);
    const recorded = recordError(error);
    if (kind === "reject" && rows.length > 1) {
      // A malformed item fails the whole request, and the answer does not say which: each row alone
      // finds it, so the others are not failed with it.
      const outcomes: RowOutcome[] = [];
      for (const row of rows) outcomes.push(...(await publishDestinationRows(hopper, [row])));
      return outcomes;
    }
    if (kind === "reject") return [{ kind: "failed", error: recorded }];
    if (kind === "pause") {
      const scope = recorded.status === 401 || recorded.status === 403 ? "relay" : "destination";
      return rows.map(() => ({ kind: "pause", error: recorded, scope }));
    }
    const retryAfterMs = (error as { retryAfterMs?: number }).retryAfterMs;
    return rows.map(() => ({ kind: "retry", error: recorded, retryAfterMs }));
  }
  return rows.map((_, index): RowOutcome => {
    const result = results[index];
    if (result === undefined) {
      return {
        kind: "retry",
        error: { code: "invalid_response", message: "no result for the row" },
        retryAfterMs: undefined,
      };
    }
    if (!isItemError(result)) return { kind: "sent" };
    const error: RecordedError = { ...result.error, status: 200 };
    return classifyItemError(result.error.code) === "pause"
      ? { kind: "pause", error, scope: "destination" }
      : { kind: "failed", error };
  });
}
