/**
 * Order per key during a redrive: a message of the source that is in flight (someone holds its
 * lease) holds back the later messages of its key — of its group, in a FIFO queue — so that none of
 * them reaches the target before it. Messages without a key in a standard queue have no order to keep.
 * Both stores pick a redrive step's messages through this.
 */
import { HopperError } from "../errors.js";
import type { MessageRow } from "./rows.js";

/** A redrive step without `to` stops before a message that does not name the queue it came from. */
export function noRedriveTarget(id: string): HopperError {
  return new HopperError(
    "invalid_request",
    `Message ${id} has no x-original-queue header to return to; redrive it with "to".`,
    { id },
  );
}

/** What orders a row among its queue's messages for a redrive: its key, or in a FIFO queue its group. */
function orderKey(row: Pick<MessageRow, "key" | "group_key">): string | null {
  return row.group_key ?? row.key;
}

/**
 * Of `candidates` (not in flight, in arrival order), the first `max` that no earlier in-flight message
 * of the same key holds back, and how many were held back.
 */
export function notHeldBack<Row extends Pick<MessageRow, "seq" | "key" | "group_key">>(
  candidates: readonly Row[],
  inFlight: readonly Pick<MessageRow, "seq" | "key" | "group_key">[],
  max: number,
): { rows: Row[]; held: number } {
  const firstInFlight = new Map<string, number>();
  for (const row of inFlight) {
    const key = orderKey(row);
    if (key !== null) firstInFlight.set(key, Math.min(row.seq, firstInFlight.get(key) ?? row.seq));
  }
  const rows: Row[] = [];
  let held = 0;
  for (const row of candidates) {
    if (rows.length >= max) break;
    const key = orderKey(row);
    const blocker = key === null ? undefined : firstInFlight.get(key);
    if (blocker !== undefined && blocker < row.seq) held++;
    else rows.push(row);
  }
  return { rows, held };
}

/** How many messages a redrive step looks at to find its `max`: bounded work per step. */
export const redriveScanMax = 1000;
