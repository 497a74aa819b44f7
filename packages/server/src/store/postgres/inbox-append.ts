/**
 * The PostgreSQL store's inbox append (InboxStore.inboxAppend): one transaction of three prepared
 * statements, whatever the number of recipients.
 *
 *   1. inboxRecipientsEnsure  namespace locked KEY SHARE; missing recipient rows created, byte order
 *   2. inboxRecipientsLock    every recipient row locked FOR NO KEY UPDATE, byte order
 *   3. inboxAppendWrite       from a snapshot taken once the locks are held: duplicate, skipped or
 *                             appended at head + 1, per recipient; then the body once, the entries,
 *                             ids, heads, overflow trims, skips and counters
 *   (then inboxBodiesLock and inboxBodiesRelease, when maxDepth trimmed entries of earlier bodies)
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

/** A row of statements.inboxAppendWrite: one recipient's outcome, and the bodies maxDepth released. */
interface OutcomeRow {
  recipient: string;
  outcome: "duplicate" | "skipped" | "appended";
  seq: number | null;
  body_ids: number[];
  body_counts: number[];
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
    const repeats = new Map<string, number>();
    for (const recipient of params.recipients) repeats.set(recipient, (repeats.get(recipient) ?? -1) + 1);
    return this.db.transaction(async (client) => {
      const inbox = await this.writes.hold(client, name, distinct);
      const { attributes } = inbox;
      await this.writes.lockRecipients(client, inbox.inboxId, distinct);
      const { rows } = await this.writes.query<OutcomeRow>(client, sql.inboxAppendWrite, [
        inbox.inboxId,
        distinct,
        distinct.map((recipient) => repeats.get(recipient) ?? 0),
        message.id,
        bodyBytes(message.body),
        message.contentType,
        JSON.stringify(message.headers),
        now,
        attributes.dedupWindowMs > 0 ? now + attributes.dedupWindowMs : null,
        attributes.maxDepth,
        attributes.stopFanoutAfterMs,
        this.db.counterShard(),
        inbox.created,
      ]);
      const outcomes = new Map(rows.map((row) => [row.recipient, row]));
      const first = rows[0];
      await this.writes.releaseBodies(client, {
        bodyIds: first?.body_ids ?? [],
        counts: first?.body_counts ?? [],
      });

      // In the order named; a recipient named again answers as a duplicate of its first answer.
      const answered = new Set<string>();
      const results = params.recipients.map((recipient): AppendResult => {
        const row = outcomes.get(recipient);
        invariant(row, "every recipient named has an outcome");
        const repeat = answered.has(recipient);
        answered.add(recipient);
        if (row.outcome === "skipped") return { recipient, skipped: "idle" };
        invariant(row.seq !== null, "a recipient not skipped has a seq");
        return { recipient, seq: row.seq, duplicate: repeat || row.outcome === "duplicate" };
      });
      const appended = rows.filter((row) => row.outcome === "appended").map((row) => row.recipient);
      if (appended.length > 0) this.link.announceInboxOnCommit(client, name, appended);
      return { results };
    });
  }
}
