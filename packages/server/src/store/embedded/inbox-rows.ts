/**
 * The row interface under the embedded stores' inbox engine (inboxes.ts): how SQLite and the log store
 * keep namespaces, per-recipient logs, bodies, device cursors and remembered message ids. What they
 * mean — sequences, duplicates, idle recipients, trimming — is the engine's. Calls run inside one
 * write (or read) of the store, as rows.ts's do.
 */
import type {
  DeviceCursor,
  InboxAttributes,
  InboxCounters,
  InboxEntry,
  InboxMessage,
  InboxRecord,
} from "../../model/inbox.js";

export interface InboxSlot {
  readonly name: string;
  readonly attributes: InboxAttributes;
  readonly epoch: string;
}

/** A recipient's log as kept: its head and the head it was last skipped after. */
export interface RecipientRow {
  head: number;
  skippedAfter: number | null;
}

/** One entry to store: `body` names a body stored by bodyInsert in the same call. */
export interface EntryInsert {
  recipient: string;
  seq: number;
  body: number;
  appendedAt: number;
}

/** What an append needs to know of one recipient, read for all of an append's recipients at once. */
export interface AppendTarget {
  row: RecipientRow | undefined;
  /** The seq the append's message id was appended at for the recipient, while it is remembered. */
  earlierSeq: number | undefined;
  /** The latest lastSeenAt of the recipient's devices (undefined with none); read only when asked. */
  lastSeenAt: number | undefined;
}

/**
 * One append's entries: one body (stored by bodyInsert in the same call), one time, a seq for each
 * recipient; with `remember`, the message id is remembered for each of them until `expiresAt`.
 */
export interface AppendedEntries {
  body: number;
  appendedAt: number;
  entries: ReadonlyArray<{ recipient: string; seq: number }>;
  remember: { messageId: string; expiresAt: number } | undefined;
}

export interface InboxRows<N extends InboxSlot> {
  inbox(name: string): N | undefined;
  inboxRecord(inbox: N): InboxRecord;
  /** Every namespace, in name order. */
  inboxRecords(): InboxRecord[];
  inboxCount(): number;
  inboxInsert(name: string, attributes: InboxAttributes, epoch: string, now: number): void;
  inboxSetAttributes(inbox: N, attributes: InboxAttributes): void;
  /** Removes the namespace with everything in it; answers the entries removed. */
  inboxRemove(inbox: N): number;
  countersAdd(inbox: N, deltas: Partial<InboxCounters>): void;

  recipient(inbox: N, recipient: string): RecipientRow | undefined;
  /**
   * What an append needs of each of `recipients` (distinct), in their order: the recipient's row, the
   * seq `messageId` is remembered at (expiresAt > now), and with `withDevices` its devices' latest
   * lastSeenAt. Batch-shaped so that SQLite reads it in one statement.
   */
  appendTargets(
    inbox: N,
    recipients: readonly string[],
    messageId: string,
    now: number,
    withDevices: boolean,
  ): AppendTarget[];
  /** Marks each recipient skipped after its head (skippedAfter = head), creating its row if need be. */
  recipientsSkip(inbox: N, skipped: ReadonlyArray<{ recipient: string; head: number }>): void;
  /** The lowest retained seq of the recipient's log, or undefined when it holds none. */
  oldestSeq(inbox: N, recipient: string): number | undefined;
  depth(inbox: N, recipient: string): number;

  /** Forgets up to `max` ids whose window ended at or before `now`; answers how many. */
  idsForget(inbox: N, now: number, max: number): number;

  /** Stores one append's message once; answers the reference entries give. */
  bodyInsert(inbox: N, message: InboxMessage): number;
  /**
   * Writes an append's entries (at least one): each recipient's head becomes its entry's seq (the row
   * created if need be, skippedAfter kept), and the message id is remembered for each recipient as
   * `remember` says — until its expiresAt, whether or not the entry is trimmed before then
   * (appendTargets answers it as earlierSeq).
   */
  entriesAppend(inbox: N, append: AppendedEntries): void;
  entriesRead(inbox: N, recipient: string, after: number, limit: number): InboxEntry[];
  /** Deletes the recipient's entries at or below `seq` (and bodies no entry names any more). */
  entriesTrimThrough(inbox: N, recipient: string, seq: number, now: number): number;
  /** Deletes up to `max` entries appended at or before `appendedBefore`, oldest first; answers how many. */
  entriesExpire(inbox: N, appendedBefore: number, max: number, now: number): number;

  devices(inbox: N, recipient: string): DeviceCursor[];
  devicePut(inbox: N, recipient: string, device: DeviceCursor): void;
  deviceRemove(inbox: N, recipient: string, device: string): boolean;
  /** Up to `max` devices unseen since `seenBefore` (lastSeenAt <= it), with their recipients. */
  devicesUnseen(inbox: N, seenBefore: number, max: number): Array<{ recipient: string; device: string }>;

  /** As QueueRows' capacityMark / capacityCheck: an append past the store's bound is refused whole. */
  capacityMark(): number;
  capacityCheck(mark: number): void;
}
