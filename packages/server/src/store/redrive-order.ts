/**
 * Order per key during a redrive: a message of the source that is in flight (someone holds its
 * lease) holds back the later messages of its key — of its group, in a FIFO queue — so that none of
 * them reaches the target before it. Messages without a key in a standard queue have no order to keep.
 * Every store picks a redrive step's messages through this, and plans where they go (planMoves).
 */
import { HopperError, queueFull, queueNotFound } from "../errors.js";
import type { SendPolicy } from "../model/policies.js";
import type { MessageRow } from "./rows.js";

/** Where a redrive step sends a message: `to`, or the queue its `x-original-queue` names, or nowhere. */
export function redriveTargetOf(to: string | null, headers: Record<string, string>): string | null {
  return to ?? headers["x-original-queue"] ?? null;
}

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

/**
 * Where each message of a redrive step goes, in order, and where the step stops: before the first
 * message without a target (`to`, or its `x-original-queue`), with a target that does not exist
 * (`depthOf` answers undefined) or has no policy, or with a full target whose overflow policy is
 * reject. A message moved back into the queue it is in (the source) takes no room there: it leaves
 * before it arrives. The stores then take every planned message out of the source before they put
 * any into a target, so that a target's overflow trim sees the depths as they are and never takes a
 * message the step is moving. All three stores plan a step through this.
 */
export function planMoves<Item extends { id: string; headers: Record<string, string> }>(
  items: readonly Item[],
  params: { source: string; to: string | null; policies: ReadonlyMap<string, SendPolicy> },
  depthOf: (queue: string) => number | undefined,
): { moves: PlannedMove<Item>[]; stoppedBy: HopperError | null } {
  const depths = new Map<string, number>();
  const moves: PlannedMove<Item>[] = [];
  for (const item of items) {
    const name = redriveTargetOf(params.to, item.headers);
    if (name === null) return { moves, stoppedBy: noRedriveTarget(item.id) };
    const policy = params.policies.get(name);
    const depth = depths.get(name) ?? depthOf(name);
    if (!policy || depth === undefined) return { moves, stoppedBy: queueNotFound(name) };
    const after = depth + (name === params.source ? 0 : 1);
    const overflow = policy.overflow;
    if (overflow?.policy === "reject" && after > overflow.maxDepth) {
      return { moves, stoppedBy: queueFull(name, overflow.maxDepth, depth) };
    }
    depths.set(name, after);
    moves.push({ item, target: name, policy });
  }
  return { moves, stoppedBy: null };
}

export interface PlannedMove<Item> {
  item: Item;
  /** The queue it goes to, and that queue's send policy for the step. */
  target: string;
  policy: SendPolicy;
}

/** The planned moves by target queue, targets in the order they first appear, items in order. */
export function byTarget<Item>(
  moves: readonly PlannedMove<Item>[],
): Map<string, { policy: SendPolicy; items: Item[] }> {
  const targets = new Map<string, { policy: SendPolicy; items: Item[] }>();
  for (const { item, target, policy } of moves) {
    const entry = targets.get(target) ?? { policy, items: [] };
    entry.items.push(item);
    targets.set(target, entry);
  }
  return targets;
}
