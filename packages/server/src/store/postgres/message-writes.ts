/**
 * The writes that keep a queue's messages consistent, shared by the store's own transactions and by an
 * application's (sendInTransaction): storing messages with FIFO heads, deduplication and overflow,
 * removing messages (a FIFO group's next message becomes its head), and dead-lettering them. Every
 * method runs inside a transaction that the caller opened, on its client, and names its schema, since
 * an application's search_path is its own.
 *
 * Lock order. Transactions take their locks in this order, so that none waits for another in a cycle:
 *   1. queue rows: FOR KEY SHARE to write a queue's messages (these never block each other), FOR NO KEY
 *      UPDATE to send into a queue with a maxDepth (statements.queueLockForDepthIn), FOR UPDATE to
 *      upsert, delete or purge a queue. A send into several queues locks them in name order.
 *   2. dedup entries, in dedupId order (sends only; statements.dedupClaimIn).
 *   3. FIFO group advisory locks, those of one step in one statement, in key order (groupLockMany).
 *   4. message rows: without waiting (SKIP LOCKED) where any candidate will do, waiting where the row
 *      is named (a receipt, the oldest message, the group's next message).
 * Paths that lock message rows without taking group locks (the one-statement lease, extend, a nack
 * that retries) never wait for a group lock, so a transaction that holds group locks and waits for a
 * message row always gets it. A group lock is needed before a transaction adds to a group (it reads
 * whether the group is empty, in a later statement, whose snapshot then sees every committed message of
 * the group) or removes a head (it then makes the next message the head). Two steps may take group
 * locks after rows: a dead letter into a FIFO queue whose groups its caller did not lock up front, and
 * an overflow trim whose oldest messages changed after it looked. A cycle there is rare; PostgreSQL
 * detects it and aborts one transaction, which the store runs again (an application's transaction
 * that sendInTransaction wrote into is the application's to retry).
 */
import type pg from "pg";
import { invariant, queueFull } from "../../errors.js";
import { limits } from "../../limits.js";
import { bodyBytes, type NewMessage } from "../../model/message.js";
import { type DeadLetterReason, deadLetterHeaders, type SendPolicy } from "../../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type OverflowPolicy,
  type QueueCounters,
  type QueueKind,
  zeroCounters,
} from "../../model/queue.js";
import { type CounterColumns, type MessageRow, toQueueCounters, toStoredMessage } from "../rows.js";
import * as sql from "./statements/index.js";

/** A queue whose row the transaction has locked, with what its writes need to know. */
export interface LockedQueue {
  name: string;
  queueId: number;
  kind: QueueKind;
  /** Locked FOR NO KEY UPDATE, as a send under a maxDepth needs (statements.queueLockForDepthIn). */
  forDepth: boolean;
}

/** A FIFO group: the lock that guards its head. */
export interface GroupRef {
  queueId: number;
  groupKey: string;
}

type Client = pg.ClientBase;

/**
 * The row with its bigint columns as numbers. An application's client (sendInTransaction) may read
 * bigint as text; the store's own connections parse it already.
 */
function withNumbers(row: MessageRow): MessageRow {
  const orNull = (value: number | null) => (value === null ? null : Number(value));
  return {
    ...row,
    seq: Number(row.seq),
    queue_id: Number(row.queue_id),
    published_at: Number(row.published_at),
    visible_at: Number(row.visible_at),
    first_delivered_at: orNull(row.first_delivered_at),
    lease_token: orNull(row.lease_token),
  };
}

/**
 * A batch of messages as the column arrays that the inserts' `unnest(…)` takes, in one pass; headers
 * as JSON text, or NULL when there are none. The bodies go as one buffer, one after the other, with
 * their lengths: pg sends a Buffer parameter as it is (binary), where a bytea[] parameter goes as text
 * with each byte in hex, twice the bytes for Hopper to encode and PostgreSQL to parse
 * (statements/fragments.ts bodyOf cuts them apart again).
 */
export function messageColumns(messages: readonly NewMessage[]) {
  const bodies: Buffer[] = [];
  const columns = {
    ids: [] as string[],
    bodyLengths: [] as number[],
    contentTypes: [] as string[],
    headers: [] as (string | null)[],
    keys: [] as (string | null)[],
    priorities: [] as number[],
    dedupIds: [] as (string | null)[],
    publishedAts: [] as number[],
    visibleAts: [] as number[],
  };
  for (const m of messages) {
    columns.ids.push(m.id);
    const body = bodyBytes(m.body);
    bodies.push(body);
    columns.bodyLengths.push(body.length);
    columns.contentTypes.push(m.contentType);
    columns.headers.push(Object.keys(m.headers).length > 0 ? JSON.stringify(m.headers) : null);
    columns.keys.push(m.key);
    columns.priorities.push(m.priority);
    columns.dedupIds.push(m.dedupId);
    columns.publishedAts.push(m.publishedAt);
    columns.visibleAts.push(m.visibleAt);
  }
  return { ...columns, bodies: Buffer.concat(bodies) };
}

/** The group key of a message in a FIFO queue: its key, or "" for the keyless group. */
export function groupKeyOf(message: { key: string | null }): string {
  return message.key ?? "";
}

export class MessageWrites {
  private readonly statements: {
    queueLockShared: string;
    queueLockForDepth: string;
    queueCounters: string;
    queueAddCounters: string;
    messageInsertMany: string;
    messageInsertManyCounted: string;
    messageDeleteMany: string;
    messageSelectOldestGroups: string;
    messageSelectOldest: string;
    groupPromoteHeads: string;
    dedupClaim: string;
    dedupSelect: string;
  };

  constructor(
    schema: string,
    private readonly counterShard: () => number,
  ) {
    this.statements = {
      queueLockShared: sql.queueLockSharedIn(schema),
      queueLockForDepth: sql.queueLockForDepthIn(schema),
      queueCounters: sql.queueCountersIn(schema),
      queueAddCounters: sql.queueAddCountersIn(schema),
      messageInsertMany: sql.messageInsertManyIn(schema),
      messageInsertManyCounted: sql.messageInsertManyCountedIn(schema),
      messageDeleteMany: sql.messageDeleteManyIn(schema),
      messageSelectOldestGroups: sql.messageSelectOldestGroupsIn(schema),
      messageSelectOldest: sql.messageSelectOldestIn(schema),
      groupPromoteHeads: sql.groupPromoteHeadsIn(schema),
      dedupClaim: sql.dedupClaimIn(schema),
      dedupSelect: sql.dedupSelectIn(schema),
    };
  }

  /**
   * Locks the queue's row until commit: "share" to write its messages, "depth" to send into it under a
   * maxDepth (see statements.queueLockForDepthIn). Returns undefined when there is no such queue.
   */
  async lockQueue(client: Client, name: string, mode: "share" | "depth"): Promise<LockedQueue | undefined> {
    const statement = mode === "share" ? this.statements.queueLockShared : this.statements.queueLockForDepth;
    const row = (await client.query<{ queue_id: number; kind: QueueKind }>(statement, [name])).rows[0];
    return row && { name, queueId: Number(row.queue_id), kind: row.kind, forDepth: mode === "depth" };
  }

  /** Locks the existing queues among `names` for writing (dead-letter targets); absent ones are left out. */
  async lockTargets(client: Client, names: readonly string[]): Promise<LockedQueue[]> {
    const targets: LockedQueue[] = [];
    for (const name of names) {
      const target = await this.lockQueue(client, name, "share");
      if (target) targets.push(target);
    }
    return targets;
  }

  /** Takes the advisory locks of these FIFO groups, in one statement (statements.groupLockMany). */
  async lockGroups(client: Client, groups: readonly GroupRef[]): Promise<void> {
    if (groups.length === 0) return;
    await client.query(sql.groupLockMany, [groups.map((g) => g.queueId), groups.map((g) => g.groupKey)]);
  }

  /** The queue's counters, summed over their shards. */
  async counters(client: Client, queueId: number): Promise<QueueCounters> {
    const row = (await client.query<CounterColumns>(this.statements.queueCounters, [queueId])).rows[0];
    invariant(row, "an aggregate without GROUP BY returns one row");
    return toQueueCounters(row);
  }

  async addCounters(client: Client, queueId: number, deltas: Partial<QueueCounters>): Promise<void> {
    const counters = { ...zeroCounters, ...deltas };
    await client.query(this.statements.queueAddCounters, [
      queueId,
      this.counterShard(),
      counters.published,
      counters.delivered,
      counters.redelivered,
      counters.acked,
      counters.nacked,
      counters.expired,
      counters.deadLettered,
      counters.purged,
      counters.dropped,
      counters.redriven,
    ]);
  }

  /**
   * Inserts the messages in order, as new (delivery count 0). In a FIFO queue the caller holds the
   * locks of their groups (statements.messageInsertManyIn says why).
   */
  async insert(
    client: Client,
    queue: LockedQueue,
    messages: readonly NewMessage[],
    options: { counted?: boolean } = {},
  ): Promise<void> {
    if (messages.length === 0) return;
    // Counted: the same statement adds the messages to the queue's `published` counter.
    const statement = options.counted
      ? this.statements.messageInsertManyCounted
      : this.statements.messageInsertMany;
    const columns = messageColumns(messages);
    await client.query(statement, [
      queue.queueId,
      queue.kind === "fifo",
      columns.ids,
      columns.bodies,
      columns.contentTypes,
      columns.headers,
      columns.keys,
      columns.priorities,
      columns.dedupIds,
      columns.publishedAts,
      columns.visibleAts,
      columns.bodyLengths,
      ...(options.counted ? [this.counterShard()] : []),
    ]);
  }

  /**
   * Deletes the rows and makes the next message of each FIFO group that lost its head the new head;
   * the caller holds those groups' locks. Counts nothing. Returns how many rows were deleted and how
   * many heads were made (messages that may now be leased).
   */
  async remove(
    client: Client,
    queue: LockedQueue,
    seqs: readonly number[],
  ): Promise<{ removed: number; promoted: number }> {
    if (seqs.length === 0) return { removed: 0, promoted: 0 };
    const { rows } = await client.query<{ group_key: string | null; head: boolean }>(
      this.statements.messageDeleteMany,
      [seqs],
    );
    const promoted = await this.promoteHeads(
      client,
      queue,
      rows.filter((row) => row.head).map((row) => row.group_key),
    );
    return { removed: rows.length, promoted };
  }

  /** Makes each group's oldest message its head where a head left it (see groupPromoteHeadsIn). */
  async promoteHeads(
    client: Client,
    queue: LockedQueue,
    groupKeys: readonly (string | null)[],
  ): Promise<number> {
    const groups = [...new Set(groupKeys.filter((key) => key !== null))];
    if (groups.length === 0) return 0;
    return (await client.query(this.statements.groupPromoteHeads, [queue.queueId, groups])).rowCount ?? 0;
  }

  /**
   * One queue's part of a send: deduplication, the overflow check, the inserts, the overflow trim, the
   * counters. The queue is locked "depth" when the policy has an overflow, else "share". Throws
   * queue_full (the caller's transaction then writes nothing). Returns the id that stands for each
   * message and the queues whose messages may have become available (to announce after commit).
   */
  async send(
    client: Client,
    queue: LockedQueue,
    messages: readonly NewMessage[],
    policy: SendPolicy,
    now: number,
  ): Promise<{ ids: string[]; written: string[] }> {
    const overflow = policy.overflow;
    invariant(!overflow || queue.forDepth, "a send under a maxDepth holds the queue row FOR NO KEY UPDATE");
    const { ids, stored } = await this.deduplicate(client, queue, messages, policy.dedupWindowMs, now);
    let trim = 0;
    if (overflow) {
      const depth = depthOf(await this.counters(client, queue.queueId));
      const excess = depth + stored.length - overflow.maxDepth;
      // A send that stores nothing (only duplicates) adds nothing to refuse, even to a queue that dead
      // letters have grown past its maxDepth.
      if (excess > 0 && overflow.policy === "reject" && stored.length > 0) {
        throw queueFull(queue.name, overflow.maxDepth, depth);
      }
      if (overflow.policy !== "reject") trim = Math.min(Math.max(0, excess), limits.overflowTrimMax);
    }
    if (queue.kind === "fifo") {
      const groups = stored.map(groupKeyOf);
      // The groups of the messages the trim will remove, looked up before any row is locked: taking
      // their locks now, with the others, keeps to the lock order.
      if (trim > 0) {
        const { rows } = await client.query<{ group_key: string }>(
          this.statements.messageSelectOldestGroups,
          [queue.queueId, trim],
        );
        groups.push(...rows.map((row) => row.group_key));
      }
      await this.lockGroups(
        client,
        groups.map((groupKey) => ({ queueId: queue.queueId, groupKey })),
      );
    }
    await this.insert(client, queue, stored, { counted: true });
    const written = stored.length > 0 ? [queue.name] : [];
    if (overflow && trim > 0) {
      written.push(...(await this.trim(client, queue, trim, overflow.deadLetter, overflow.policy, now)));
    }
    return { ids, written };
  }

  /**
   * Decides which messages are duplicates: a dedupId claimed in the queue within its window, or by an
   * earlier message of the batch. Claims the dedupIds of the others. Returns the id standing for each
   * message and the messages to store.
   */
  private async deduplicate(
    client: Client,
    queue: LockedQueue,
    messages: readonly NewMessage[],
    dedupWindowMs: number,
    now: number,
  ): Promise<{ ids: string[]; stored: NewMessage[] }> {
    const firstByDedupId = new Map<string, NewMessage>();
    if (dedupWindowMs > 0) {
      for (const message of messages) {
        if (message.dedupId !== null && !firstByDedupId.has(message.dedupId)) {
          firstByDedupId.set(message.dedupId, message);
        }
      }
    }
    if (firstByDedupId.size === 0) return { ids: messages.map((m) => m.id), stored: [...messages] };
    const firsts = [...firstByDedupId.values()];
    const { rows: claimed } = await client.query<{ dedup_id: string }>(this.statements.dedupClaim, [
      queue.queueId,
      firsts.map((m) => m.dedupId),
      firsts.map((m) => m.id),
      now,
      now + dedupWindowMs,
    ]);
    const claimedIds = new Set(claimed.map((row) => row.dedup_id));
    const taken = firsts.filter((m) => !claimedIds.has(m.dedupId as string)).map((m) => m.dedupId);
    const original = new Map<string, string>();
    if (taken.length > 0) {
      const { rows } = await client.query<{ dedup_id: string; message_id: string }>(
        this.statements.dedupSelect,
        [queue.queueId, taken],
      );
      for (const row of rows) original.set(row.dedup_id, row.message_id);
    }
    const stored: NewMessage[] = [];
    const ids = messages.map((message) => {
      const first = message.dedupId === null ? undefined : firstByDedupId.get(message.dedupId);
      if (!first) {
        stored.push(message);
        return message.id;
      }
      const dedupId = first.dedupId as string;
      if (!claimedIds.has(dedupId)) {
        const id = original.get(dedupId);
        invariant(id !== undefined, "a dedup entry that a claim found taken is locked, so still there");
        return id;
      }
      if (first !== message) return first.id;
      stored.push(message);
      return message.id;
    });
    return { ids, stored };
  }

  /**
   * Removes the `count` oldest messages of the queue (in any state): dropped, or moved to `deadLetter`
   * (reason max_depth) with dead-letter-oldest. Returns the queues to announce.
   */
  async trim(
    client: Client,
    queue: LockedQueue,
    count: number,
    deadLetter: DeadLetterRoute | null,
    policy: OverflowPolicy,
    now: number,
  ): Promise<string[]> {
    const { rows: read } = await client.query<MessageRow>(this.statements.messageSelectOldest, [
      queue.queueId,
      count,
      null,
    ]);
    const rows = read.map(withNumbers);
    if (rows.length === 0) return [];
    if (queue.kind === "fifo") {
      // Locks already held are taken again at no cost; new ones mean the oldest changed since the look.
      await this.lockGroups(
        client,
        rows.map((row) => ({ queueId: queue.queueId, groupKey: row.group_key as string })),
      );
    }
    if (policy === "dead-letter-oldest" && deadLetter) {
      return this.deadLetter(client, rows, queue, deadLetter, "max_depth", now);
    }
    const { promoted } = await this.remove(
      client,
      queue,
      rows.map((row) => row.seq),
    );
    await this.addCounters(client, queue.queueId, { dropped: rows.length });
    return promoted > 0 ? [queue.name] : [];
  }

  /**
   * Moves rows to their dead-letter queues as new messages in each, with the headers that say why, and
   * removes them from the source (whose FIFO groups the caller has locked). A target queue deleted
   * since the route was resolved is skipped; with no target left the messages are dropped, and counted
   * as dead-lettered either way. Dead letters are never refused by a full target. `targets`, when the
   * caller locked them already (and their groups), saves looking them up again. Returns the queues
   * whose messages may have become available.
   */
  async deadLetter(
    client: Client,
    rows: readonly MessageRow[],
    source: LockedQueue,
    route: DeadLetterRoute,
    reason: DeadLetterReason,
    now: number,
    targets?: readonly LockedQueue[],
  ): Promise<string[]> {
    if (rows.length === 0) return [];
    const messages = rows.map((row): NewMessage => {
      const message = toStoredMessage(row);
      const headers = deadLetterHeaders(message, source.name, reason);
      return { ...message, body: bodyBytes(message.body), headers, publishedAt: now, visibleAt: now };
    });
    const written: string[] = [];
    for (const target of targets ?? (await this.lockTargets(client, route.queues))) {
      if (target.kind === "fifo") {
        await this.lockGroups(
          client,
          messages.map((m) => ({ queueId: target.queueId, groupKey: groupKeyOf(m) })),
        );
      }
      await this.insert(client, target, messages);
      await this.addCounters(client, target.queueId, { published: messages.length });
      written.push(target.name);
    }
    const { promoted } = await this.remove(
      client,
      source,
      rows.map((row) => row.seq),
    );
    await this.addCounters(client, source.queueId, { deadLettered: rows.length });
    if (promoted > 0) written.push(source.name);
    return written;
  }
}
