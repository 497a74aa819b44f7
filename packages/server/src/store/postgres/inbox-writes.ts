/**
 * What the PostgreSQL store's inbox writes share: taking a namespace and its recipients' locks in the
 * one order (inbox-store.ts, "Locks"), and trimming a prefix of recipients' logs with the bodies no
 * entry names any more.
 */
import { inboxNotFound } from "../../errors.js";
import type { InboxAttributes } from "../../model/inbox.js";
import type { Client, PostgresDatabase } from "./database.js";
import * as sql from "./statements/index.js";

/** A recipient's row as locked: its head, the seq its log is trimmed through, its last skip. */
export interface LockedRecipient {
  head: number;
  trimmedThrough: number;
  skippedAfter: number | null;
}

/** A namespace as a write holds it: locked against deletion until commit. */
export interface HeldInbox {
  inboxId: number;
  attributes: InboxAttributes;
  /** Recipient rows this transaction created. */
  created: number;
}

/** Recipients once each, in byte order: the order their rows are locked in, on every node. */
export function recipientOrder(recipients: readonly string[]): string[] {
  return [...new Set(recipients)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

export class InboxWrites {
  constructor(private readonly db: PostgresDatabase) {}

  /**
   * Locks the namespace against deletion and gives each recipient a row (statements.inboxRecipientsEnsure);
   * throws inbox_not_found.
   */
  async hold(client: Client, name: string, recipients: readonly string[]): Promise<HeldInbox> {
    const { rows } = await client.query<{ inbox_id: number; attributes: InboxAttributes; created: number }>(
      sql.inboxRecipientsEnsure,
      [name, recipients],
    );
    const row = rows[0];
    if (!row) throw inboxNotFound(name);
    return { inboxId: row.inbox_id, attributes: row.attributes, created: row.created };
  }

  /** Locks the namespace against deletion, without creating anything; throws inbox_not_found. */
  async holdInbox(client: Client, name: string): Promise<{ inboxId: number; attributes: InboxAttributes }> {
    const { rows } = await client.query<{ inbox_id: number; attributes: InboxAttributes }>(
      sql.inboxLockShared,
      [name],
    );
    const row = rows[0];
    if (!row) throw inboxNotFound(name);
    return { inboxId: row.inbox_id, attributes: row.attributes };
  }

  /** Locks the recipients' rows in byte order; answers those that exist, by recipient. */
  async lockRecipients(
    client: Client,
    inboxId: number,
    recipients: readonly string[],
  ): Promise<Map<string, LockedRecipient>> {
    const { rows } = await client.query<{
      recipient: string;
      head: number;
      trimmed_through: number;
      skipped_after: number | null;
    }>(sql.inboxRecipientsLock, [inboxId, recipients]);
    return new Map(
      rows.map((row) => [
        row.recipient,
        { head: row.head, trimmedThrough: row.trimmed_through, skippedAfter: row.skipped_after },
      ]),
    );
  }

  /**
   * Trims, counted as acked, what every active device of each (locked) recipient has acked
   * (statements.inboxTrimAcked). Answers how many entries went.
   */
  trimAcked(
    client: Client,
    inboxId: number,
    attributes: InboxAttributes,
    recipients: readonly string[],
    now: number,
  ): Promise<number> {
    return this.trim(client, sql.inboxTrimAcked, [
      inboxId,
      this.db.counterShard(),
      recipients,
      now - attributes.forgetDeviceAfterMs,
    ]);
  }

  /** Trims, counted as expired, each (locked) recipient's log through its seq. */
  trimExpired(client: Client, inboxId: number, throughs: ReadonlyMap<string, number>): Promise<number> {
    return this.trim(client, sql.inboxTrimExpired, [
      inboxId,
      this.db.counterShard(),
      [...throughs.keys()],
      [...throughs.values()],
    ]);
  }

  private async trim(client: Client, statement: string, params: unknown[]): Promise<number> {
    const { rows } = await client.query<{ trimmed: number; emptied: number[] }>(statement, params);
    await this.deleteEmptied(client, rows[0]?.emptied ?? []);
    return rows[0]?.trimmed ?? 0;
  }

  /** Deletes the bodies a trim counted down to no entry (a statement of their own: a row updated in a
   * statement cannot be deleted in it too). */
  async deleteEmptied(client: Client, bodyIds: readonly number[]): Promise<void> {
    if (bodyIds.length > 0) await client.query(sql.inboxBodiesDelete, [bodyIds]);
  }
}
