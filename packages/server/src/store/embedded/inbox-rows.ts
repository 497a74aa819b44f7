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
  recipientPut(inbox: N, recipient: string, row: RecipientRow): void;
  /** The lowest retained seq of the recipient's log, or undefined when it holds none. */
  oldestSeq(inbox: N, recipient: string): number | undefined;
  depth(inbox: N, recipient: string): number;

  /** The seq `messageId` was appended at for the recipient, while remembered (expiresAt > now). */
  idLookup(inbox: N, recipient: string, messageId: string, now: number): number | undefined;
  idRemember(inbox: N, recipient: string, messageId: string, seq: number, expiresAt: number): void;
  /** Forgets up to `max` ids whose window ended at or before `now`; answers how many. */
  idsForget(inbox: N, now: number, max: number): number;

  /** Stores one append's message once; answers the reference entries give. */
  bodyInsert(inbox: N, message: InboxMessage): number;
  entriesInsert(inbox: N, entries: readonly EntryInsert[]): void;
  entriesRead(inbox: N, recipient: string, after: number, limit: number): InboxEntry[];
  /** Deletes the recipient's entries at or below `seq` (and bodies no entry names any more). */
  entriesTrimThrough(inbox: N, recipient: string, seq: number): number;
  /** Deletes up to `max` entries appended at or before `appendedBefore`, oldest first; answers how many. */
  entriesExpire(inbox: N, appendedBefore: number, max: number): number;

  devices(inbox: N, recipient: string): DeviceCursor[];
  devicePut(inbox: N, recipient: string, device: DeviceCursor): void;
  deviceRemove(inbox: N, recipient: string, device: string): boolean;
  /** Up to `max` devices unseen since `seenBefore` (lastSeenAt <= it), with their recipients. */
  devicesUnseen(inbox: N, seenBefore: number, max: number): Array<{ recipient: string; device: string }>;

  /** As QueueRows' capacityMark / capacityCheck: an append past the store's bound is refused whole. */
  capacityMark(): number;
  capacityCheck(mark: number): void;
}
