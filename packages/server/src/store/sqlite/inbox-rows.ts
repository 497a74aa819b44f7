/**
 * The SQLite store's inbox rows (embedded/inbox-rows.ts): named statements over the inbox tables
 * (inbox-statements.ts). What the rows mean is in the engine (embedded/inboxes.ts).
 */
import { HopperError } from "../../errors.js";
import {
  type DeviceCursor,
  type InboxAttributes,
  type InboxCounters,
  type InboxEntry,
  type InboxMessage,
  type InboxRecord,
  zeroInboxCounters,
} from "../../model/inbox.js";
import { bodyBytes } from "../../model/message.js";
import type { AppendedEntries, AppendTarget, InboxRows, RecipientRow } from "../embedded/inbox-rows.js";
import { toInboxCounters } from "../rows.js";
import * as sql from "./inbox-statements.js";
import { bodyCrc } from "./integrity.js";
import type { Statements } from "./queue-rows.js";

interface InboxRow {
  inbox_id: number;
  name: string;
  attributes: string;
  epoch: string;
  created_at: number;
  appended: number;
  duplicates: number;
  skipped: number;
  acked: number;
  expired: number;
  overflowed: number;
  devices_forgotten: number;
}

/** A namespace as the engine reads it: its attributes parsed. */
export interface SqliteInbox {
  readonly inboxId: number;
  readonly name: string;
  readonly attributes: InboxAttributes;
  readonly epoch: string;
  readonly row: InboxRow;
}

function toInbox(row: InboxRow): SqliteInbox {
  return {
    inboxId: row.inbox_id,
    name: row.name,
    attributes: JSON.parse(row.attributes) as InboxAttributes,
    epoch: row.epoch,
    row,
  };
}

/** An entry a trim or an expiry deleted. */
interface GoneEntry {
  recipient: string;
  seq: number;
  body_id: number;
}

interface EntryRow {
  seq: number;
  message_id: string;
  body: Buffer;
  body_crc: number;
  content_type: string;
  headers: string | null;
  appended_at: number;
}

export class SqliteInboxRows implements InboxRows<SqliteInbox> {
  constructor(private readonly stmt: Statements) {}

  inbox(name: string): SqliteInbox | undefined {
    const row = this.stmt.get(sql.inboxSelectByName).get({ name }) as InboxRow | undefined;
    return row && toInbox(row);
  }

  inboxRecord(inbox: SqliteInbox): InboxRecord {
    const { row } = inbox;
    const sizes = this.stmt.get(sql.inboxSizes).get({ inboxId: inbox.inboxId }) as {
      entries: number;
      recipients: number;
    };
    return {
      name: inbox.name,
      attributes: inbox.attributes,
      epoch: inbox.epoch,
      createdAt: row.created_at,
      counters: toInboxCounters(row),
      ...sizes,
    };
  }

  inboxRecords(): InboxRecord[] {
    return (this.stmt.get(sql.inboxSelectAll).all() as InboxRow[]).map((row) =>
      this.inboxRecord(toInbox(row)),
    );
  }

  inboxCount(): number {
    return (this.stmt.get(sql.inboxCount).get() as { n: number }).n;
  }

  inboxInsert(name: string, attributes: InboxAttributes, epoch: string, now: number): void {
    this.stmt
      .get(sql.inboxInsert)
      .run({ name, attributes: JSON.stringify(attributes), epoch, createdAt: now });
  }

  inboxSetAttributes(inbox: SqliteInbox, attributes: InboxAttributes): void {
    this.stmt
      .get(sql.inboxUpdateAttributes)
      .run({ inboxId: inbox.inboxId, attributes: JSON.stringify(attributes) });
  }

  inboxRemove(inbox: SqliteInbox): number {
    const { entries } = this.stmt.get(sql.inboxSizes).get({ inboxId: inbox.inboxId }) as { entries: number };
    this.stmt.get(sql.inboxDelete).run({ inboxId: inbox.inboxId });
    return entries;
  }

  countersAdd(inbox: SqliteInbox, deltas: Partial<InboxCounters>): void {
    this.stmt.get(sql.inboxAddCounters).run({ inboxId: inbox.inboxId, ...zeroInboxCounters, ...deltas });
  }

  recipient(inbox: SqliteInbox, recipient: string): RecipientRow | undefined {
    const row = this.stmt.get(sql.recipientSelect).get({ inboxId: inbox.inboxId, recipient }) as
      | { head: number; skipped_after: number | null }
      | undefined;
    return row && { head: row.head, skippedAfter: row.skipped_after };
  }

  /**
   * The ids an append may have seen before come from two places (schema.ts, migration 6): the bodies
   * of the message whose window is open, for entries still held or trimmed since, and inbox_ids, for
   * entries trimmed before their window ended and for bodies stored before the migration.
   */
  appendTargets(
    inbox: SqliteInbox,
    recipients: readonly string[],
    messageId: string,
    now: number,
    withDevices: boolean,
  ): AppendTarget[] {
    const { inboxId } = inbox;
    const list = JSON.stringify(recipients);
    const found = this.stmt
      .get(sql.appendTargets)
      .all({ inboxId, recipients: list, messageId, now }) as Array<{
      idx: number;
      head: number | null;
      skipped_after: number | null;
      earlier_seq: number | null;
    }>;
    const rows = new Array<(typeof found)[number]>(recipients.length);
    for (const row of found) rows[row.idx] = row;
    const lastSeen = new Map<number, number>();
    if (withDevices) {
      const seen = this.stmt.get(sql.devicesLastSeen).all({ inboxId, recipients: list }) as Array<{
        idx: number;
        last_seen_at: number;
      }>;
      for (const { idx, last_seen_at } of seen) lastSeen.set(idx, last_seen_at);
    }
    const appended = new Map<string, number>();
    const bodies = this.stmt.get(sql.bodyRecipientsByMessage).all({ inboxId, messageId, now }) as Array<{
      recipients: string;
    }>;
    for (const body of bodies)
      for (const [recipient, seq] of JSON.parse(body.recipients) as Array<[string, number]>)
        appended.set(recipient, seq);
    return rows.map((row, index) => ({
      row: row.head === null ? undefined : { head: row.head, skippedAfter: row.skipped_after },
      earlierSeq: appended.get(recipients[index] as string) ?? row.earlier_seq ?? undefined,
      lastSeenAt: lastSeen.get(index),
    }));
  }

  recipientsSkip(inbox: SqliteInbox, skipped: ReadonlyArray<{ recipient: string; head: number }>): void {
    const rows = JSON.stringify(skipped.map(({ recipient, head }) => [recipient, head]));
    this.stmt.get(sql.recipientsSkip).run({ inboxId: inbox.inboxId, rows });
  }

  oldestSeq(inbox: SqliteInbox, recipient: string): number | undefined {
    const { oldest } = this.stmt.get(sql.entryOldestSeq).get({ inboxId: inbox.inboxId, recipient }) as {
      oldest: number | null;
    };
    return oldest ?? undefined;
  }

  depth(inbox: SqliteInbox, recipient: string): number {
    return (this.stmt.get(sql.entryCount).get({ inboxId: inbox.inboxId, recipient }) as { n: number }).n;
  }

  idsForget(inbox: SqliteInbox, now: number, max: number): number {
    return this.stmt.get(sql.idDeleteExpired).run({ inboxId: inbox.inboxId, now, limit: max }).changes;
  }

  bodyInsert(inbox: SqliteInbox, message: InboxMessage): number {
    const body = bodyBytes(message.body);
    return this.stmt.get(sql.bodyInsert).run({
      inboxId: inbox.inboxId,
      messageId: message.id,
      body,
      bodyCrc: bodyCrc(body),
      contentType: message.contentType,
      headers: Object.keys(message.headers).length > 0 ? JSON.stringify(message.headers) : null,
    }).lastInsertRowid as number;
  }

  entriesAppend(inbox: SqliteInbox, append: AppendedEntries): void {
    const { inboxId } = inbox;
    const entries = JSON.stringify(append.entries.map(({ recipient, seq }) => [recipient, seq]));
    const { body: bodyId, appendedAt, remember } = append;
    this.stmt.get(sql.entriesInsert).run({ inboxId, entries, bodyId, appendedAt });
    this.stmt.get(sql.recipientsAdvance).run({ inboxId, entries });
    this.stmt.get(sql.bodyAppended).run({
      bodyId,
      refs: append.entries.length,
      appendedAt,
      recipients: entries,
      idsExpireAt: remember?.expiresAt ?? null,
    });
  }

  /** A body whose checksum fails is never served: the read is refused, naming the entry. */
  entriesRead(inbox: SqliteInbox, recipient: string, after: number, limit: number): InboxEntry[] {
    const rows = this.stmt
      .get(sql.entrySelectAfter)
      .all({ inboxId: inbox.inboxId, recipient, after, limit }) as EntryRow[];
    return rows.map((row) => {
      if (bodyCrc(row.body) !== row.body_crc)
        throw new HopperError(
          "store_damaged",
          `Inbox ${inbox.name}, ${recipient}, entry ${row.seq}: its body fails its checksum.`,
          {
            inbox: inbox.name,
            recipient,
            seq: row.seq,
          },
        );
      return {
        seq: row.seq,
        id: row.message_id,
        body: row.body,
        contentType: row.content_type,
        headers: row.headers === null ? {} : (JSON.parse(row.headers) as Record<string, string>),
        appendedAt: row.appended_at,
      };
    });
  }

  entriesTrimThrough(inbox: SqliteInbox, recipient: string, seq: number, now: number): number {
    const gone = this.stmt
      .get(sql.entryDeleteThrough)
      .all({ inboxId: inbox.inboxId, recipient, seq }) as GoneEntry[];
    this.forget(inbox, gone, now);
    return gone.length;
  }

  /** Walks the oldest bodies, not the entries: an entry has no index by age (schema.ts, migration 6). */
  entriesExpire(inbox: SqliteInbox, appendedBefore: number, max: number, now: number): number {
    const { inboxId } = inbox;
    const bodies = this.stmt
      .get(sql.bodySelectExpired)
      .all({ inboxId, appendedBefore, limit: max }) as Array<{
      recipients: string;
    }>;
    if (bodies.length === 0) return 0;
    const pairs = bodies.flatMap((body) => JSON.parse(body.recipients) as Array<[string, number]>);
    const gone = this.stmt
      .get(sql.entryDeletePairs)
      .all({ inboxId, pairs: JSON.stringify(pairs), limit: max }) as GoneEntry[];
    this.forget(inbox, gone, now);
    return gone.length;
  }

  /**
   * After entries went: their ids are kept while their bodies' windows are open (the append's
   * promise), their bodies' refs drop, and a body no entry names goes.
   */
  private forget(inbox: SqliteInbox, gone: readonly GoneEntry[], now: number): void {
    if (gone.length === 0) return;
    this.stmt.get(sql.idsKeepTrimmed).run({
      inboxId: inbox.inboxId,
      gone: JSON.stringify(gone.map((entry) => [entry.recipient, entry.seq, entry.body_id])),
      now,
    });
    const perBody = new Map<number, number>();
    for (const { body_id } of gone) perBody.set(body_id, (perBody.get(body_id) ?? 0) + 1);
    const counts = JSON.stringify([...perBody]);
    this.stmt.get(sql.bodyRefsTake).run({ counts });
    this.stmt.get(sql.bodyDeleteUnused).run({ counts });
  }

  devices(inbox: SqliteInbox, recipient: string): DeviceCursor[] {
    const rows = this.stmt.get(sql.deviceSelect).all({ inboxId: inbox.inboxId, recipient }) as {
      device: string;
      cursor: number;
      last_seen_at: number;
    }[];
    return rows.map((row) => ({ device: row.device, cursor: row.cursor, lastSeenAt: row.last_seen_at }));
  }

  devicePut(inbox: SqliteInbox, recipient: string, device: DeviceCursor): void {
    this.stmt.get(sql.deviceUpsert).run({ inboxId: inbox.inboxId, recipient, ...device });
  }

  deviceRemove(inbox: SqliteInbox, recipient: string, device: string): boolean {
    return this.stmt.get(sql.deviceDelete).run({ inboxId: inbox.inboxId, recipient, device }).changes > 0;
  }

  devicesUnseen(
    inbox: SqliteInbox,
    seenBefore: number,
    max: number,
  ): Array<{ recipient: string; device: string }> {
    return this.stmt.get(sql.deviceSelectUnseen).all({ inboxId: inbox.inboxId, seenBefore, limit: max }) as {
      recipient: string;
      device: string;
    }[];
  }

  /** A SQLite file has no bound of its own on what it holds. */
  capacityMark(): number {
    return 0;
  }

  capacityCheck(_mark: number): void {}
}
