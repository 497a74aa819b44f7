/**
 * An inbox namespace as the domain knows it (DESIGN.md §6, docs/inboxes.md): one ordered log per
 * recipient, a cursor per device, and the retention that bounds what waits for absent devices.
 *
 * Positions: a recipient's entries have sequence numbers from 1, each the previous plus one, assigned
 * in append order. `head` is the highest given (0: none yet); `oldest` the lowest still retained
 * (head + 1 when none is). A cursor is the highest sequence a device has processed (0: nothing).
 * `epoch` names one life of the namespace: it changes when the namespace is created again, so a
 * cursor from an earlier life is never read as a position in this one.
 */

/** A namespace's attributes with every default applied. */
export interface InboxAttributes {
  /** Entries older than this are trimmed, read or not (counted as `expired`). */
  maxAgeMs: number;
  /** A recipient holds at most this many entries; older ones are trimmed (counted as `overflowed`). */
  maxDepth: number;
  /** A device not seen for this long is forgotten: its cursor no longer holds entries back. */
  forgetDeviceAfterMs: number;
  /** A recipient whose devices have all been unseen this long is skipped at append (`skipped: "idle"`)
   * until one of them subscribes again; null: never skipped. */
  stopFanoutAfterMs: number | null;
  /** How long (recipient, message id) is remembered after its append: a repeat within it is a duplicate,
   * also once the entry itself was trimmed. */
  dedupWindowMs: number;
}

/** What a namespace counts since it was created: every way an entry arrives or leaves. */
export interface InboxCounters {
  /** Entries appended (one per recipient of an append). */
  appended: number;
  /** Appends that named a (recipient, message id) already appended: nothing written. */
  duplicates: number;
  /** Recipients an append skipped as idle. */
  skipped: number;
  /** Entries trimmed because every active device had acked them. */
  acked: number;
  /** Entries trimmed by maxAgeMs. */
  expired: number;
  /** Entries trimmed by maxDepth. */
  overflowed: number;
  /** Devices forgotten by forgetDeviceAfterMs. */
  devicesForgotten: number;
}

export const zeroInboxCounters: InboxCounters = {
  appended: 0,
  duplicates: 0,
  skipped: 0,
  acked: 0,
  expired: 0,
  overflowed: 0,
  devicesForgotten: 0,
};

export interface InboxRecord {
  name: string;
  attributes: InboxAttributes;
  epoch: string;
  createdAt: number;
  counters: InboxCounters;
  /** Entries held now, over every recipient. */
  entries: number;
  recipients: number;
}

/** The message of an append, stored once whatever the number of recipients. */
export interface InboxMessage {
  id: string;
  /** Bytes, or a JSON body's text (as NewMessage.body). */
  body: Buffer | string;
  contentType: string;
  headers: Record<string, string>;
}

export interface InboxEntry {
  seq: number;
  id: string;
  body: Buffer | string;
  contentType: string;
  headers: Record<string, string>;
  appendedAt: number;
}

/** Per recipient of an append, in the order named. */
export type AppendResult =
  | { recipient: string; seq: number; duplicate: boolean }
  | { recipient: string; skipped: "idle" };

export interface DeviceCursor {
  device: string;
  cursor: number;
  lastSeenAt: number;
}

/** Where a recipient's log stands. */
export interface RecipientPosition {
  head: number;
  oldest: number;
  epoch: string;
}

export interface RecipientState extends RecipientPosition {
  depth: number;
  devices: DeviceCursor[];
  /** The head when an append last skipped this recipient as idle (null: never). A device whose cursor
   * is at or below it missed entries that were never written, and is told `gap`. */
  skippedAfter: number | null;
}

/** Why a read or a subscription cannot continue from a cursor without a hole. */
export type GapReason = "trimmed" | "epoch" | "skipped";

/**
 * Whether a device at `cursor` (in `epoch`) would miss entries if it read on from there: the entries
 * after it were trimmed, it comes from another life of the namespace, or appends skipped the
 * recipient since. Undefined: it reads on without a hole.
 */
export function gapOf(
  position: RecipientPosition & { skippedAfter: number | null },
  cursor: number,
  epoch: string | undefined,
): GapReason | undefined {
  if (cursor > 0 && epoch !== position.epoch) return "epoch";
  if (cursor + 1 < position.oldest) return "trimmed";
  if (position.skippedAfter !== null && cursor <= position.skippedAfter) return "skipped";
  return undefined;
}
