/**
 * What the PostgreSQL store's inbox writes share: prepared statements in a transaction, taking a
 * namespace and its recipients' locks in the one order (inbox-store.ts, "Locks"), trimming a prefix
 * of recipients' logs, and releasing the bodies whose entries went.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { inboxNotFound, invariant } from "../../errors.js";
import type { InboxAttributes } from "../../model/inbox.js";
import type { Client } from "./database.js";
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

/** Bodies whose entries a trim deleted: how many of each went, in body_id order. */
export interface ReleasedBodies {
  bodyIds: number[];
  counts: number[];
}

/** What a trim statement answers: how many entries went, and from which bodies. */
interface TrimRow {
  trimmed: number;
  body_ids: number[];
  body_counts: number[];
}

export class InboxWrites {
  /** The prepared-statement name of each statement text (prepared). */
  private readonly preparedNames = new Map<string, string>();

  /**
   * Runs an inbox statement in the transaction on `client`, prepared: each pooled connection parses
   * and plans it once rather than at every call (the append's write statement took 3 ms unprepared
   * and 1.6 ms prepared, measured on the same machine). Names are taken from the text as database.ts
   * names its one-statement calls, under a prefix of their own.
   */
  query<R extends pg.QueryResultRow>(
    client: Client,
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    let name = this.preparedNames.get(text);
    if (!name) {
      name = `hopper_inbox_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
      this.preparedNames.set(text, name);
    }
    return client.query<R>({ name, text, values });
  }

  /**
   * Locks the namespace against deletion and gives each recipient a row (statements.inboxRecipientsEnsure);
   * throws inbox_not_found.
   */
  async hold(client: Client, name: string, recipients: readonly string[]): Promise<HeldInbox> {
    const { rows } = await this.query<{ inbox_id: number; attributes: InboxAttributes; created: number }>(
      client,
      sql.inboxRecipientsEnsure,
      [name, recipients],
    );
    const row = rows[0];
    if (!row) throw inboxNotFound(name);
    return { inboxId: row.inbox_id, attributes: row.attributes, created: row.created };
  }

  /** Locks the namespace against deletion, without creating anything; throws inbox_not_found. */
  async holdInbox(client: Client, name: string): Promise<{ inboxId: number; attributes: InboxAttributes }> {
    const { rows } = await this.query<{ inbox_id: number; attributes: InboxAttributes }>(
      client,
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
    const { rows } = await this.query<{
      recipient: string;
      head: number;
      trimmed_through: number;
      skipped_after: number | null;
    }>(client, sql.inboxRecipientsLock, [inboxId, recipients]);
    return new Map(
      rows.map((row) => [
        row.recipient,
        { head: row.head, trimmedThrough: row.trimmed_through, skippedAfter: row.skipped_after },
      ]),
    );
  }

  /**
   * Trims, counted as acked on counter `shard`, what every active device of each (locked) recipient
   * has acked (statements.inboxTrimAcked). Answers how many entries went and their bodies, which the
   * caller releases (releaseBodies) once all its trims are done.
   */
  async trimAcked(
    client: Client,
    inboxId: number,
    shard: number,
    attributes: InboxAttributes,
    recipients: readonly string[],
    now: number,
  ): Promise<{ trimmed: number; released: ReleasedBodies }> {
    const { rows } = await this.query<TrimRow>(client, sql.inboxTrimAcked, [
      inboxId,
      shard,
      recipients,
      now - attributes.forgetDeviceAfterMs,
    ]);
    return trimmedOf(rows[0]);
  }

  /** Trims, counted as expired on counter `shard`, each (locked) recipient's log through its seq. */
  async trimExpired(
    client: Client,
    inboxId: number,
    shard: number,
    throughs: ReadonlyMap<string, number>,
  ): Promise<{ trimmed: number; released: ReleasedBodies }> {
    const { rows } = await this.query<TrimRow>(client, sql.inboxTrimExpired, [
      inboxId,
      shard,
      [...throughs.keys()],
      [...throughs.values()],
    ]);
    return trimmedOf(rows[0]);
  }

  /**
   * Lowers the bodies' counts of entries by what went, deleting those that no entry names any more.
   * The bodies are locked first, in body_id order, in one statement: a transaction releases bodies
   * once, after all its trims, so two transactions that share bodies never wait in a cycle.
   */
  async releaseBodies(client: Client, ...releases: readonly ReleasedBodies[]): Promise<void> {
    const went = new Map<number, number>();
    for (const { bodyIds, counts } of releases) {
      bodyIds.forEach((bodyId, i) => {
        went.set(bodyId, (went.get(bodyId) ?? 0) + (counts[i] ?? 0));
      });
    }
    if (went.size === 0) return;
    const { rows } = await this.query<{ body_id: number; entries: number }>(client, sql.inboxBodiesLock, [
      [...went.keys()].sort((a, b) => a - b),
    ]);
    const gone: number[] = [];
    const kept: number[] = [];
    const left: number[] = [];
    for (const row of rows) {
      const entries = row.entries - (went.get(row.body_id) ?? 0);
      invariant(entries >= 0, "a body never loses more entries than name it");
      if (entries === 0) gone.push(row.body_id);
      else {
        kept.push(row.body_id);
        left.push(entries);
      }
    }
    await this.query(client, sql.inboxBodiesRelease, [gone, kept, left]);
  }
}

function trimmedOf(row: TrimRow | undefined): { trimmed: number; released: ReleasedBodies } {
  return {
    trimmed: row?.trimmed ?? 0,
    released: { bodyIds: row?.body_ids ?? [], counts: row?.body_counts ?? [] },
  };
}
