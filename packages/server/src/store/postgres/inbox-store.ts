/**
 * The PostgreSQL store's inboxes (InboxStore): namespaces, reads, acks and devices here; the append in
 * inbox-append.ts, housekeeping in inbox-sweep.ts, what they share in inbox-writes.ts. Each call is one
 * transaction, or one statement for a read.
 *
 * Locks, always taken in this order (docs/invariants.md, "Inboxes"):
 *   1. the namespace row: KEY SHARE by every write to its logs, NO KEY UPDATE by an upsert (so
 *      attribute changes do not wait for appends), UPDATE by a delete (which waits for every write
 *      in flight, and makes every later one find the namespace gone);
 *   2. recipient rows, FOR NO KEY UPDATE, several always in one statement sorted by `recipient
 *      COLLATE "C"` (byte order, the same on every node); a row created by the transaction (statements
 *      .inboxRecipientsEnsure inserts the missing ones in that same order first) is its own until commit;
 *   3. then only rows that belong to those recipients (entries, devices, remembered ids);
 *   4. one counter shard, the same for the whole transaction;
 *   5. last, the bodies whose entry counts its trims lower, all in one statement in body_id order
 *      (inbox-writes.ts releaseBodies).
 * Two transactions that share recipients or bodies therefore wait for each other in one order and
 * never in a cycle.
 *
 * Invariant (no hole that later fills): every write to a recipient's log holds its row lock, and an
 * append gives seq = head + 1 and writes that head in the same commit as the entry. So the appends
 * to one recipient commit one after another in seq order, and any snapshot that holds seq n holds
 * every seq below it that was ever appended: a reader sees its retained entries as the contiguous
 * range [trimmed_through + 1, head], and every trim removes a prefix of it (acked up to the lowest
 * active cursor, past maxDepth, past maxAgeMs). Reads run as one statement, from one snapshot.
 */

import { cursorBeyondHead, HopperError, inboxNotFound, invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import type {
  DeviceCursor,
  InboxAttributes,
  InboxEntry,
  InboxRecord,
  RecipientState,
} from "../../model/inbox.js";
import type { InboxStore } from "../inbox-store.js";
import { toInboxCounters } from "../rows.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import { InboxAppends } from "./inbox-append.js";
import { InboxSweeps } from "./inbox-sweep.js";
import { InboxWrites } from "./inbox-writes.js";
import * as sql from "./statements/index.js";

interface InboxRow {
  inbox_id: number;
  name: string;
  epoch: string;
  attributes: InboxAttributes;
  created_at: number;
  appended: number;
  duplicates: number;
  skipped: number;
  acked: number;
  expired: number;
  overflowed: number;
  devices_forgotten: number;
  recipients: number;
}

function toInboxRecord(row: InboxRow): InboxRecord {
  return {
    name: row.name,
    attributes: row.attributes,
    epoch: row.epoch,
    createdAt: row.created_at,
    counters: toInboxCounters(row),
    // Every entry leaves by exactly one of acked, expired or overflowed (DESIGN.md §1).
    entries: row.appended - row.acked - row.expired - row.overflowed,
    recipients: row.recipients,
  };
}

/** A row of statements.inboxReadStatement: the state (seq 0) or an entry. */
interface ReadRow {
  seq: number;
  epoch: string | null;
  head: number | null;
  trimmed_through: number | null;
  skipped_after: number | null;
  devices: DeviceCursor[] | null;
  message_id: string | null;
  body: Buffer | null;
  content_type: string | null;
  /** JSON text, as the append gave it: the headers come back in their order. */
  headers: string | null;
  appended_at: number | null;
}

export class PostgresInboxStore implements InboxStore {
  private readonly writes: InboxWrites;
  private readonly appends: InboxAppends;
  private readonly sweeps: InboxSweeps;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly link: PostgresClusterLink,
  ) {
    this.writes = new InboxWrites();
    this.appends = new InboxAppends(db, link, this.writes);
    this.sweeps = new InboxSweeps(db, this.writes);
  }

  inboxUpsert(params: { name: string; attributes: InboxAttributes; epoch: string; now: number }): Promise<{
    created: boolean;
    inbox: InboxRecord;
  }> {
    return this.db.transaction(async (client) => {
      const attributes = JSON.stringify(params.attributes);
      let existing = (await client.query<{ inbox_id: number }>(sql.inboxLockForUpdate, [params.name]))
        .rows[0];
      let created = false;
      if (!existing) {
        const { rows } = await client.query<{ n: number }>(sql.inboxCount);
        if ((rows[0]?.n ?? 0) >= limits.inboxesMax) throw new HopperError("too_many_inboxes");
        const inserted = await client.query(sql.inboxInsert, [
          params.name,
          params.epoch,
          attributes,
          params.now,
        ]);
        created = inserted.rows.length > 0;
        // A concurrent create won the name: this call becomes an update of that namespace.
        if (!created) existing = (await client.query(sql.inboxLockForUpdate, [params.name])).rows[0];
      }
      if (existing) await client.query(sql.inboxUpdateAttributes, [existing.inbox_id, attributes]);
      // A new life of the namespace: every node's subscribers look again (and find a new epoch).
      if (created) await this.link.announce(client, { kind: "inbox", inbox: params.name, recipients: null });
      const row = (await client.query<InboxRow>(sql.inboxSelectByName, [params.name])).rows[0];
      invariant(row, "an upserted namespace exists in its own transaction");
      return { created, inbox: toInboxRecord(row) };
    });
  }

  async inboxGet(params: { name: string }): Promise<InboxRecord | undefined> {
    const row = (await this.db.statement<InboxRow>(sql.inboxSelectByName, [params.name])).rows[0];
    return row && toInboxRecord(row);
  }

  async inboxList(): Promise<InboxRecord[]> {
    return (await this.db.statement<InboxRow>(sql.inboxSelectAll, [])).rows.map(toInboxRecord);
  }

  inboxDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.db.transaction(async (client) => {
      const inbox = (await client.query<{ inbox_id: number }>(sql.inboxLockForDelete, [params.name])).rows[0];
      if (!inbox) throw inboxNotFound(params.name);
      const { rows } = await client.query<{ removed: number }>(sql.inboxDeleteAll, [inbox.inbox_id]);
      await this.link.announce(client, { kind: "inbox", inbox: params.name, recipients: null });
      return { removed: rows[0]?.removed ?? 0 };
    });
  }

  inboxAppend(params: Parameters<InboxStore["inboxAppend"]>[0]) {
    return this.appends.inboxAppend(params);
  }

  async inboxRead(params: { name: string; recipient: string; after: number; limit: number }): Promise<{
    entries: InboxEntry[];
    state: RecipientState;
  }> {
    const { rows } = await this.db.statement<ReadRow>(sql.inboxReadStatement, [
      params.name,
      params.recipient,
      params.after,
      params.limit,
    ]);
    const stateRow = rows.find((row) => row.seq === 0);
    if (!stateRow) throw inboxNotFound(params.name);
    const head = stateRow.head ?? 0;
    const trimmedThrough = stateRow.trimmed_through ?? 0;
    const state: RecipientState = {
      head,
      oldest: trimmedThrough + 1,
      epoch: stateRow.epoch ?? "",
      depth: head - trimmedThrough,
      devices: stateRow.devices ?? [],
      skippedAfter: stateRow.skipped_after,
    };
    const entries = rows
      .filter((row) => row.seq > 0)
      .sort((a, b) => a.seq - b.seq)
      .map(
        (row): InboxEntry => ({
          seq: row.seq,
          id: row.message_id ?? "",
          body: row.body ?? Buffer.alloc(0),
          contentType: row.content_type ?? "",
          headers: row.headers === null ? {} : (JSON.parse(row.headers) as Record<string, string>),
          appendedAt: row.appended_at ?? 0,
        }),
      );
    return { entries, state };
  }

  async inboxRecipientGet(params: { name: string; recipient: string }): Promise<RecipientState> {
    return (await this.inboxRead({ ...params, after: 0, limit: 0 })).state;
  }

  inboxAck(params: { name: string; recipient: string; device: string; seq: number; now: number }): Promise<{
    cursor: number;
  }> {
    return this.db.transaction(async (client) => {
      const shard = this.db.counterShard();
      const { inboxId, attributes, recipient } = await this.holdRecipient(
        client,
        params.name,
        params.recipient,
        shard,
      );
      if (params.seq > recipient.head) throw cursorBeyondHead(params.seq, recipient.head);
      const cursor = await this.deviceUpsert(client, inboxId, params, params.seq, true);
      await this.trimAcked(client, inboxId, shard, attributes, params.recipient, params.now);
      return { cursor };
    });
  }

  inboxDeviceSeen(params: {
    name: string;
    recipient: string;
    device: string;
    cursor: number;
    now: number;
  }): Promise<void> {
    return this.db.transaction(async (client) => {
      const shard = this.db.counterShard();
      const { inboxId } = await this.holdRecipient(client, params.name, params.recipient, shard);
      await this.deviceUpsert(client, inboxId, params, params.cursor, false);
    });
  }

  inboxDeviceDelete(params: { name: string; recipient: string; device: string; now: number }): Promise<{
    deleted: boolean;
  }> {
    return this.db.transaction(async (client) => {
      const { inboxId, attributes } = await this.writes.holdInbox(client, params.name);
      const locked = await this.writes.lockRecipients(client, inboxId, [params.recipient]);
      if (!locked.has(params.recipient)) return { deleted: false };
      const { rowCount } = await this.writes.query(client, sql.inboxDeviceDelete, [
        inboxId,
        params.recipient,
        params.device,
      ]);
      const deleted = (rowCount ?? 0) > 0;
      // Its cursor no longer holds entries back: what the remaining active devices acked goes now.
      if (deleted) {
        await this.trimAcked(
          client,
          inboxId,
          this.db.counterShard(),
          attributes,
          params.recipient,
          params.now,
        );
      }
      return { deleted };
    });
  }

  inboxSweep(params: { name: string; now: number; max: number }) {
    return this.sweeps.inboxSweep(params);
  }

  /** Trims what the recipient's active devices acked, and releases the bodies of what went. */
  private async trimAcked(
    client: Client,
    inboxId: number,
    shard: number,
    attributes: InboxAttributes,
    recipient: string,
    now: number,
  ): Promise<void> {
    const { released } = await this.writes.trimAcked(client, inboxId, shard, attributes, [recipient], now);
    await this.writes.releaseBodies(client, released);
  }

  /**
   * Locks the namespace and the recipient's row, creating the row if the recipient has none yet
   * (counted on counter `shard`, the transaction's one).
   */
  private async holdRecipient(client: Client, name: string, recipient: string, shard: number) {
    const inbox = await this.writes.hold(client, name, [recipient]);
    const locked = (await this.writes.lockRecipients(client, inbox.inboxId, [recipient])).get(recipient);
    invariant(locked, "a held recipient has a row");
    if (inbox.created > 0) {
      await this.writes.query(client, sql.inboxCountRecipients, [inbox.inboxId, shard, inbox.created]);
    }
    return { ...inbox, recipient: locked };
  }

  /**
   * Records the device as seen (statements.inboxDeviceUpsert), moving its cursor to `cursor` if
   * `advance` and forward; throws too_many_devices for a new device past the limit. Answers its cursor.
   */
  private async deviceUpsert(
    client: Client,
    inboxId: number,
    params: { recipient: string; device: string; now: number },
    cursor: number,
    advance: boolean,
  ): Promise<number> {
    const { rows } = await this.writes.query<{ cursor: number }>(client, sql.inboxDeviceUpsert, [
      inboxId,
      params.recipient,
      params.device,
      cursor,
      params.now,
      limits.inboxDevicesPerRecipientMax,
      advance,
    ]);
    const row = rows[0];
    if (!row) {
      throw new HopperError("too_many_devices", undefined, {
        devicesMax: limits.inboxDevicesPerRecipientMax,
      });
    }
    return row.cursor;
  }
}
