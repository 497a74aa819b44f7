/**
 * The inbox namespaces and their per-recipient logs, as the broker stores them: one atomic transaction
 * per method, named inbox-first then verb, one params object each (model/inbox.ts has the model).
 * The broker validates names, sizes and limits and decides what a cursor means (gapOf); the store
 * keeps the logs, assigns sequences, remembers message ids, and applies retention.
 */
import type {
  AppendResult,
  InboxAttributes,
  InboxEntry,
  InboxMessage,
  InboxRecord,
  RecipientState,
} from "../model/inbox.js";

export interface InboxStore {
  /** Creates the namespace with `epoch`, or updates its attributes (keeping its epoch). Throws
   * too_many_inboxes. */
  inboxUpsert(params: {
    name: string;
    attributes: InboxAttributes;
    epoch: string;
    now: number;
  }): Promise<{ created: boolean; inbox: InboxRecord }>;
  inboxGet(params: { name: string }): Promise<InboxRecord | undefined>;
  inboxList(): Promise<InboxRecord[]>;
  /** Deletes the namespace with every entry, cursor and remembered id; answers the entries removed.
   * Throws inbox_not_found. */
  inboxDelete(params: { name: string }): Promise<{ removed: number }>;

  /**
   * Records `message` once for each recipient, all or nothing, in the order named: a recipient that
   * already has `message.id` (appended within the namespace's dedupWindowMs, trimmed since or not)
   * answers its original sequence with `duplicate: true` and gets nothing new; a recipient whose
   * devices have all been unseen for stopFanoutAfterMs is skipped (and remembers the head it was
   * skipped after); every other gets the next sequence of its log. The body is stored once per call.
   * A recipient over maxDepth loses its oldest entries (counted as overflowed). A recipient named twice
   * in one call is appended once; the repeat answers as a duplicate. Throws inbox_not_found.
   */
  inboxAppend(params: {
    name: string;
    recipients: readonly string[];
    message: InboxMessage;
    now: number;
  }): Promise<{ results: AppendResult[] }>;

  /** The recipient's retained entries after `after`, in order, at most `limit`, and where its log
   * stands (a recipient never appended to has head 0, oldest 1). Throws inbox_not_found. */
  inboxRead(params: {
    name: string;
    recipient: string;
    after: number;
    limit: number;
  }): Promise<{ entries: InboxEntry[]; state: RecipientState }>;

  /**
   * Moves the device's cursor to `seq` if that is forward (a cursor never moves back), marks the device
   * seen, and trims the entries every active device (seen within forgetDeviceAfterMs) has now acked,
   * counted as acked. Answers the cursor. Throws inbox_not_found, cursor_beyond_head (seq > head).
   */
  inboxAck(params: {
    name: string;
    recipient: string;
    device: string;
    seq: number;
    now: number;
  }): Promise<{ cursor: number }>;

  /** Marks the device seen now (a subscription, a read), creating it with cursor `cursor` when it is new.
   * Throws inbox_not_found, too_many_devices. */
  inboxDeviceSeen(params: {
    name: string;
    recipient: string;
    device: string;
    cursor: number;
    now: number;
  }): Promise<void>;

  /** Forgets the device; its cursor no longer holds entries back. Answers whether it was there. */
  inboxDeviceDelete(params: { name: string; recipient: string; device: string; now: number }): Promise<{
    deleted: boolean;
  }>;

  /** The recipient's log and devices. Throws inbox_not_found. */
  inboxRecipientGet(params: { name: string; recipient: string }): Promise<RecipientState>;

  /**
   * Housekeeping for one namespace, up to `max` entries and devices: trims entries older than
   * maxAgeMs (expired), forgets devices unseen for forgetDeviceAfterMs (devicesForgotten) and then the
   * entries only they held (acked), and forgets remembered ids past dedupWindowMs.
   */
  inboxSweep(params: { name: string; now: number; max: number }): Promise<{
    expired: number;
    devicesForgotten: number;
    acked: number;
  }>;
}
