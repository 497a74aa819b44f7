/**
 * The SQLite store's queue rows (embedded/rows.ts): named statements over the `queues`, `messages`
 * and `dedup` tables, set-based where a call takes many rows. What the rows mean is in the engine
 * (embedded/queues.ts); this file only keeps them.
 */
import type { Database as Db, Statement } from "better-sqlite3";
import { invariant } from "../../errors.js";
import { bodyBytes, type MessageState, type StoredMessage } from "../../model/message.js";
import type {
  QueueAttributes,
  QueueCounters,
  QueueDepth,
  QueueKind,
  QueueRecord,
} from "../../model/queue.js";
import { zeroCounters } from "../../model/queue.js";
import type { LeaseWrite, MessageInsert, MessageSlot, QueueRows } from "../embedded/rows.js";
import {
  type DepthColumns,
  depthByState,
  type MessageRow,
  type QueueRow,
  toQueueCounters,
  toQueueRecord,
  toStoredMessage,
  withDepth,
} from "../rows.js";
import { bodyCrc } from "./integrity.js";
import * as sql from "./statements.js";

/** SQLite keeps attributes as JSON text. */
export type SqliteQueueRow = QueueRow<string>;

/** What the paths of every message need of their queue (sql.queueRefByName): 3-5 µs to read, against
 * 11 for the whole row. */
export interface QueueRef {
  readonly queue_id: number;
  readonly name: string;
  readonly kind: QueueKind;
}

/** A message row as SQLite keeps it, with the checksum of its body and whether it failed it, and the
 * names the engine reads (MessageSlot). */
export interface SqliteMessageRow extends MessageRow, MessageSlot {
  /** CRC-32 of the body as stored; null on a row stored before checksums were kept. */
  body_crc: number | null;
  /** 1 once its body failed the checksum and it stayed in its queue (no dead-letter target). */
  corrupt: number;
}

export function toSqliteQueueRecord(row: SqliteQueueRow): QueueRecord {
  return toQueueRecord({ ...row, attributes: JSON.parse(row.attributes) as QueueAttributes });
}

/** A message row read as an array of sql.messageColumns, in their order: one object with both the
 * columns' names and the engine's (MessageSlot), built in one literal (a lease reads thousands). */
function toMessageRow(values: unknown[]): SqliteMessageRow {
  const deliveryCount = values[9] as number;
  const firstDeliveredAt = values[10] as number | null;
  const visibleAt = values[8] as number;
  const leaseToken = values[11] as number | null;
  const groupKey = values[14] as string | null;
  return {
    seq: values[0] as number,
    queue_id: values[1] as number,
    id: values[2] as string,
    body: values[3] as Buffer | string,
    content_type: values[4] as string,
    headers: values[5] as string | null,
    key: values[6] as string | null,
    published_at: values[7] as number,
    visible_at: visibleAt,
    delivery_count: deliveryCount,
    first_delivered_at: firstDeliveredAt,
    lease_token: leaseToken,
    priority: values[12] as number,
    dedup_id: values[13] as string | null,
    group_key: groupKey,
    head: values[15] as number,
    body_crc: values[16] as number | null,
    corrupt: values[17] as number,
    deliveryCount,
    firstDeliveredAt,
    visibleAt,
    leaseToken,
    groupKey,
  };
}

/** Prepares each statement once and reuses it. */
export class Statements {
  private readonly statements = new Map<string, Statement>();
  private readonly rawStatements = new Map<string, Statement>();

  constructor(private readonly db: Db) {}

  get(text: string): Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  /** Runs a statement that selects sql.messageColumns, reading its rows as arrays. */
  messageRows(text: string, params: object): SqliteMessageRow[] {
    let statement = this.rawStatements.get(text);
    if (!statement) {
      statement = this.db.prepare(text).raw(true);
      this.rawStatements.set(text, statement);
    }
    return (statement.all(params) as unknown[][]).map(toMessageRow);
  }
}

export class SqliteQueueRows implements QueueRows<QueueRef, SqliteMessageRow> {
  constructor(private readonly stmt: Statements) {}

  private fullRow(queue: QueueRef): SqliteQueueRow {
    const row = this.stmt.get(sql.queueSelectByName).get({ name: queue.name }) as SqliteQueueRow | undefined;
    invariant(row !== undefined, `queue ${queue.name} read in this write is there`);
    return row;
  }

  queue(name: string): QueueRef | undefined {
    return this.stmt.get(sql.queueRefByName).get({ name }) as QueueRef | undefined;
  }

  queueRecord(queue: QueueRef): QueueRecord {
    return toSqliteQueueRecord(this.fullRow(queue));
  }

  queueRecords(page: { after: string; limit: number | undefined }): QueueRecord[] {
    const rows = this.stmt.get(sql.queueSelectAll).all() as SqliteQueueRow[];
    const after = rows.filter((row) => row.name > page.after);
    return after.slice(0, page.limit ?? after.length).map(toSqliteQueueRecord);
  }

  queuesWithDepth(
    page: { after: string; limit: number | undefined },
    now: number,
  ): { queue: QueueRecord; depth: QueueDepth }[] {
    // Every name sorts after the empty one; SQLite takes a negative LIMIT as none.
    const args = { now, after: page.after, limit: page.limit ?? -1 };
    const rows = this.stmt.get(sql.queueSelectAllWithDepth).all(args) as (SqliteQueueRow & DepthColumns)[];
    return rows.map((row) => withDepth(row, toSqliteQueueRecord));
  }

  queueCounters(queue: QueueRef): QueueCounters {
    return toQueueCounters(this.fullRow(queue));
  }

  queueCount(): number {
    return (this.stmt.get(sql.queueCount).get() as { n: number }).n;
  }

  queueInsert(name: string, kind: QueueKind, attributes: QueueAttributes, now: number): void {
    this.stmt
      .get(sql.queueInsert)
      .run({ name, kind, attributes: JSON.stringify(attributes), createdAt: now });
  }

  queueSetAttributes(queue: QueueRef, attributes: QueueAttributes): void {
    this.stmt
      .get(sql.queueUpdateAttributes)
      .run({ queueId: queue.queue_id, attributes: JSON.stringify(attributes) });
  }

  queueRemove(queue: QueueRef): number {
    const queueId = queue.queue_id;
    const removed = this.stmt.get(sql.messageDeleteAllOfQueue).run({ queueId }).changes;
    this.stmt.get(sql.dedupDeleteAllOfQueue).run({ queueId });
    this.stmt.get(sql.queueDelete).run({ queueId });
    this.stmt.get(sql.bindingDeleteByDestination).run({ destinationKind: "queue", destination: queue.name });
    return removed;
  }

  deadLetterSources(name: string): string[] {
    return (this.stmt.get(sql.queueSelectDeadLetterSources).all({ name }) as { name: string }[])
      .map((row) => row.name)
      .filter((source) => source !== name);
  }

  exchangeExists(name: string): boolean {
    return this.stmt.get(sql.exchangeSelectByName).get({ name }) !== undefined;
  }

  countersAdd(queue: QueueRef, deltas: Partial<QueueCounters>): void {
    this.stmt.get(sql.queueAddCounters).run({ queueId: queue.queue_id, ...zeroCounters, ...deltas });
  }

  lastSeq(): number {
    return (this.stmt.get(sql.messageLastSeq).get() as { last: number | null }).last ?? 0;
  }

  dedupLookup(queue: QueueRef, dedupId: string, now: number): string | undefined {
    const row = this.stmt.get(sql.dedupSelect).get({ queueId: queue.queue_id, dedupId, now }) as
      | { message_id: string }
      | undefined;
    return row?.message_id;
  }

  dedupRemember(queue: QueueRef, dedupId: string, messageId: string, expiresAt: number): void {
    this.stmt.get(sql.dedupUpsert).run({ queueId: queue.queue_id, dedupId, messageId, expiresAt });
  }

  dedupForgetExpired(queue: QueueRef, now: number): void {
    this.stmt.get(sql.dedupDeleteExpired).run({ queueId: queue.queue_id, now });
  }

  /**
   * Inserts each message. In a FIFO queue it joins the group of its key ("" without one) and is the
   * group's head if the group holds no other message; FIFO queues have no priorities. A copy keeps its
   * original's checksum: a body damaged before it was copied stays detectably so.
   */
  insert(queue: QueueRef, inserts: readonly MessageInsert<SqliteMessageRow>[]): number[] {
    const fifo = queue.kind === "fifo";
    return inserts.map(({ message, lease, copyOf, corrupt }) => {
      const groupKey = fifo ? (message.key ?? "") : null;
      const head =
        fifo && !this.stmt.get(sql.groupHasMessage).get({ queueId: queue.queue_id, groupKey }) ? 1 : 0;
      // The column is a STRICT BLOB: a JSON body given as text is written as its bytes.
      const body = bodyBytes(message.body);
      return this.stmt.get(sql.messageInsert).run({
        queueId: queue.queue_id,
        id: message.id,
        body,
        bodyCrc: copyOf ? copyOf.body_crc : bodyCrc(body),
        corrupt: corrupt ? 1 : 0,
        contentType: message.contentType,
        headers: Object.keys(message.headers).length > 0 ? JSON.stringify(message.headers) : null,
        key: message.key,
        priority: fifo ? 0 : message.priority,
        dedupId: message.dedupId,
        groupKey,
        head,
        publishedAt: message.publishedAt,
        visibleAt: lease?.visibleAt ?? message.visibleAt,
        deliveryCount: lease ? 1 : 0,
        firstDeliveredAt: lease?.firstDeliveredAt ?? null,
        leaseToken: lease?.token ?? null,
      }).lastInsertRowid as number;
    });
  }

  /** Deletes each message; when one was a FIFO group's head, the next message of the group becomes it. */
  delete(queue: QueueRef, messages: readonly SqliteMessageRow[]): void {
    for (const message of messages) {
      const deleted = this.stmt.get(sql.messageDelete).get({ seq: message.seq }) as
        | { group_key: string | null }
        | undefined;
      if (deleted && deleted.group_key !== null) this.promoteHead(queue, deleted.group_key);
    }
  }

  private promoteHead(queue: QueueRef, groupKey: string): void {
    this.stmt.get(sql.groupPromoteHead).run({ queueId: queue.queue_id, groupKey });
  }

  /** Also gives each FIFO group whose older messages went its next message (one sent since, above
   * lastSeq) as head. */
  deleteStep(queue: QueueRef, lastSeq: number, limit: number): number {
    const queueId = queue.queue_id;
    const { changes } = this.stmt.get(sql.messageDeleteStep).run({ queueId, lastSeq, limit });
    if (queue.kind === "fifo") {
      const groups = this.stmt.get(sql.groupsAfterSeq).all({ queueId, afterSeq: lastSeq }) as {
        group_key: string;
      }[];
      for (const { group_key } of groups) this.promoteHead(queue, group_key);
    }
    return changes;
  }

  /** One statement per receipt: the delete checks the receipt itself, reading no body. */
  deleteByReceipt(queue: QueueRef, receipt: { seq: number; leaseToken: number }): boolean {
    const args = { ...receipt, queueId: queue.queue_id };
    if (queue.kind === "fifo") {
      const deleted = this.stmt.get(sql.messageDeleteByReceiptInGroup).get(args) as
        | { group_key: string }
        | undefined;
      if (!deleted) return false;
      this.promoteHead(queue, deleted.group_key);
      return true;
    }
    return this.stmt.get(sql.messageDeleteByReceipt).run(args).changes > 0;
  }

  deleteExpired(queue: QueueRef, expiredBefore: number, max: number): number {
    const deleted = this.stmt
      .get(sql.messageDeleteExpired)
      .all({ queueId: queue.queue_id, expiredBefore, limit: max }) as { group_key: string | null }[];
    const groups = new Set(deleted.map((row) => row.group_key).filter((key) => key !== null));
    for (const groupKey of groups) this.promoteHead(queue, groupKey);
    return deleted.length;
  }

  byReceipt(queue: QueueRef, receipt: { seq: number; leaseToken: number }): SqliteMessageRow | undefined {
    return this.stmt.messageRows(sql.messageSelectByReceipt, { ...receipt, queueId: queue.queue_id })[0];
  }

  oldest(queue: QueueRef, limit: number): SqliteMessageRow[] {
    return this.stmt.messageRows(sql.messageSelectOldest, { queueId: queue.queue_id, limit });
  }

  /** A FIFO queue's available group heads; a standard queue's available messages above priority 0,
   * highest first, then those of priority 0, each in visibility order. */
  candidates(queue: QueueRef, now: number, expiredBefore: number, limit: number): SqliteMessageRow[] {
    const args = { queueId: queue.queue_id, now, expiredBefore, limit };
    if (queue.kind === "fifo") return this.stmt.messageRows(sql.messageSelectAvailableHeads, args);
    const prioritized = this.stmt.messageRows(sql.messageSelectAvailablePrioritized, args);
    if (prioritized.length >= limit) return prioritized;
    const rest = this.stmt.messageRows(sql.messageSelectAvailable, {
      ...args,
      limit: limit - prioritized.length,
    });
    return prioritized.length === 0 ? rest : [...prioritized, ...rest];
  }

  countInFlight(queue: QueueRef, now: number): number {
    return (this.stmt.get(sql.messageCountInFlight).get({ queueId: queue.queue_id, now }) as { n: number }).n;
  }

  lease(_queue: QueueRef, messages: readonly SqliteMessageRow[], lease: LeaseWrite): void {
    const { changes } = this.stmt.get(sql.messageLeaseMany).run({
      seqs: JSON.stringify(messages.map((message) => message.seq)),
      ...lease,
    });
    // The rows were read in this transaction, which no other write can enter.
    invariant(changes === messages.length, `a lease changed ${changes} of ${messages.length} rows`);
  }

  release(_queue: QueueRef, message: SqliteMessageRow, visibleAt: number): void {
    this.stmt.get(sql.messageRelease).run({ seq: message.seq, visibleAt });
  }

  extendLease(queue: QueueRef, message: SqliteMessageRow, leaseExpiresAt: number): void {
    this.stmt.get(sql.messageExtendByReceipt).run({
      seq: message.seq,
      queueId: queue.queue_id,
      leaseToken: message.lease_token,
      leaseExpiresAt,
    });
  }

  markCorrupt(_queue: QueueRef, message: SqliteMessageRow, now: number): void {
    this.stmt.get(sql.messageMarkCorrupt).run({ seq: message.seq, now });
  }

  /** Whether the row's body is still what was stored: its checksum matches, or it has none to check. */
  bodyIntact(message: SqliteMessageRow): boolean {
    return message.body_crc === null || bodyCrc(message.body) === message.body_crc;
  }

  markedCorrupt(message: SqliteMessageRow): boolean {
    return message.corrupt === 1;
  }

  stored(message: SqliteMessageRow): StoredMessage {
    return toStoredMessage(message);
  }

  peek(queue: QueueRef, state: MessageState, now: number, limit: number): SqliteMessageRow[] {
    const statement = {
      available: sql.messagePeekAvailable,
      delayed: sql.messagePeekDelayed,
      "in-flight": sql.messagePeekInFlight,
    }[state];
    return this.stmt.messageRows(statement, { queueId: queue.queue_id, now, limit });
  }

  movable(queue: QueueRef, now: number, limit: number): SqliteMessageRow[] {
    return this.stmt.messageRows(sql.messageSelectMovable, { queueId: queue.queue_id, now, limit });
  }

  inFlight(queue: QueueRef, now: number): MessageSlot[] {
    const rows = this.stmt.get(sql.messageSelectInFlightKeys).all({ queueId: queue.queue_id, now }) as {
      seq: number;
      key: string | null;
      group_key: string | null;
    }[];
    return rows.map((row) => ({
      seq: row.seq,
      key: row.key,
      groupKey: row.group_key,
      deliveryCount: 0,
      firstDeliveredAt: null,
      visibleAt: now,
      leaseToken: null,
    }));
  }

  exhausted(
    queue: QueueRef,
    window: { visibleFrom: number; now: number; maxDeliveries: number; limit: number },
  ): SqliteMessageRow[] {
    return this.stmt.messageRows(sql.messageSelectExhausted, { queueId: queue.queue_id, ...window });
  }

  /** Counts only what is not visible now; the rest of the counters' depth is available (depthByState). */
  depth(queue: QueueRef, now: number): QueueDepth {
    const queueId = queue.queue_id;
    const { delayed, inFlight } = this.stmt.get(sql.messageCountNotVisible).get({ queueId, now }) as {
      delayed: number;
      inFlight: number;
    };
    const { n: corrupt } = this.stmt.get(sql.messageCountCorrupt).get({ queueId }) as { n: number };
    return depthByState(
      this.queueCounters(queue),
      { delayed, inFlight, corrupt },
      this.oldestPublishedAt(queue),
    );
  }

  private oldestPublishedAt(queue: QueueRef): number | null {
    return (
      this.stmt.get(sql.messageOldestPublishedAt).get({ queueId: queue.queue_id }) as {
        oldest: number | null;
      }
    ).oldest;
  }

  nextEvents(
    queue: QueueRef,
    now: number,
  ): { nextVisibleAt: number | null; oldestPublishedAt: number | null } {
    const { next } = this.stmt.get(sql.messageNextVisibleAt).get({ queueId: queue.queue_id, now }) as {
      next: number | null;
    };
    return { nextVisibleAt: next, oldestPublishedAt: this.oldestPublishedAt(queue) };
  }

  /** A SQLite file has no bound of its own on what it holds. */
  capacityMark(): number {
    return 0;
  }

  capacityCheck(_mark: number): void {}
}
