/**
 * The PostgreSQL store's inbox append (InboxStore.inboxAppend): one transaction of four statements,
 * whatever the number of recipients, all prepared.
 *
 *   1. inboxRecipientsEnsure  namespace locked KEY SHARE; missing recipient rows created, byte order
 *   2. inboxRecipientsLock    every recipient row locked FOR NO KEY UPDATE, byte order
 *   3. inboxAppendLookup      remembered ids and device sightings, read after the locks are held
 *   4. inboxAppendWrite       body once, entries, ids, heads, overflow trims, skips, counters
 *   (5. inboxBodiesLock and inboxBodiesRelease, when maxDepth trimmed entries of earlier bodies)
 *
 * Sequences: a recipient's next seq is its locked head + 1, and its head is written in the same
 * commit as its entry, so appends to one recipient commit in seq order; inbox-store.ts says why no
 * reader can see a hole that later fills, and why two appends cannot deadlock.
 */
import { invariant } from "../../errors.js";
import type { AppendResult, InboxMessage } from "../../model/inbox.js";
import { bodyBytes } from "../../model/message.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { PostgresDatabase } from "./database.js";
import { type InboxWrites, recipientOrder } from "./inbox-writes.js";
import * as sql from "./statements/index.js";

/** What statement 3 finds for one recipient. */
interface Lookup {
  recipient: string;
  remembered_seq: number | null;
  last_seen_at: number | null;
}

export class InboxAppends {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly link: PostgresClusterLink,
    private readonly writes: InboxWrites,
  ) {}

  async inboxAppend(params: {
    name: string;
    recipients: readonly string[];
    message: InboxMessage;
    now: number;
  }): Promise<{ results: AppendResult[] }> {
    const { name, message, now } = params;
    const distinct = recipientOrder(params.recipients);
    return this.db.transaction(async (client) => {
      const inbox = await this.writes.hold(client, name, distinct);
      const { attributes } = inbox;
      const locked = await this.writes.lockRecipients(client, inbox.inboxId, distinct);
      const { rows } = await this.writes.query<Lookup>(client, sql.inboxAppendLookup, [
        inbox.inboxId,
        distinct,
        message.id,
        now,
      ]);
      const lookups = new Map(rows.map((row) => [row.recipient, row]));

      const answers = new Map<string, AppendResult>();
      const appended: { recipient: string; seq: number; trimmedThrough: number }[] = [];
      const skipped: string[] = [];
      for (const recipient of distinct) {
        const row = locked.get(recipient);
        const lookup = lookups.get(recipient);
        invariant(row && lookup, "every recipient of an append has a locked row");
        if (lookup.remembered_seq !== null) {
          answers.set(recipient, { recipient, seq: lookup.remembered_seq, duplicate: true });
        } else if (
          // A recipient with no device is never idle: its entries wait for its first device.
          attributes.stopFanoutAfterMs !== null &&
          lookup.last_seen_at !== null &&
          lookup.last_seen_at <= now - attributes.stopFanoutAfterMs
        ) {
          answers.set(recipient, { recipient, skipped: "idle" });
          skipped.push(recipient);
        } else {
          const seq = row.head + 1;
          answers.set(recipient, { recipient, seq, duplicate: false });
          appended.push({ recipient, seq, trimmedThrough: row.trimmedThrough });
        }
      }

      // In the order named; a recipient named again answers as a duplicate of its first answer.
      const seen = new Set<string>();
      const results = params.recipients.map((recipient): AppendResult => {
        const answer = answers.get(recipient);
        invariant(answer, "every recipient named was answered");
        const repeat = seen.has(recipient);
        seen.add(recipient);
        return repeat && "seq" in answer ? { recipient, seq: answer.seq, duplicate: true } : answer;
      });
      const duplicates = results.filter((result) => "seq" in result && result.duplicate).length;

      const written = await this.writes.query<{ body_ids: number[]; body_counts: number[] }>(
        client,
        sql.inboxAppendWrite,
        [
          inbox.inboxId,
          appended.map((entry) => entry.recipient),
          appended.map((entry) => entry.seq),
          appended.map((entry) => entry.trimmedThrough),
          skipped,
          message.id,
          bodyBytes(message.body),
          message.contentType,
          JSON.stringify(message.headers),
          now,
          attributes.dedupWindowMs > 0 ? now + attributes.dedupWindowMs : null,
          attributes.maxDepth,
          this.db.counterShard(),
          duplicates,
          inbox.created,
        ],
      );
      const overflowed = written.rows[0];
      await this.writes.releaseBodies(client, {
        bodyIds: overflowed?.body_ids ?? [],
        counts: overflowed?.body_counts ?? [],
      });
      if (appended.length > 0) {
        this.link.announceInboxOnCommit(
          client,
          name,
          appended.map((entry) => entry.recipient),
        );
      }
      return { results };
    });
  }
}
