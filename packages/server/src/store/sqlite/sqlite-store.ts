/**
 * The embedded store: one SQLite file in WAL mode, written through group commit. Reads run at once
 * against the last committed state; writes are jobs of the next group commit.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database, { type Database as Db, type Statement } from "better-sqlite3";
import { HopperError, invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import type { Random } from "../../random.js";
import { decodeReceipt, encodeReceipt } from "../receipts.js";
import {
  type DeadLetterPolicy,
  deadLetterHeaders,
  type LeasedMessage,
  type MessageState,
  type NewMessage,
  type QueueAttributes,
  type QueueCounters,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
  type ReceiptResult,
  type Store,
  type StoredMessage,
  type StoreEvent,
} from "../store.js";
import { GroupCommit } from "./group-commit.js";
import { migrations } from "./schema.js";
import * as sql from "./statements.js";

export type Durability = "fsync" | "os";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:" for tests that need no file. */
  path: string;
  /** "fsync" (default): a commit survives power loss. "os": the OS flushes later; a process crash
   * loses nothing, a power loss may lose the last moments of writes. */
  durability?: Durability;
  random: Random;
}

interface QueueRow {
  queue_id: number;
  name: string;
  kind: QueueKind;
  attributes: string;
  created_at: number;
  published: number;
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  dead_lettered: number;
  purged: number;
}

interface MessageRow {
  seq: number;
  queue_id: number;
  id: string;
  body: Buffer;
  content_type: string;
  headers: string | null;
  key: string | null;
  published_at: number;
  visible_at: number;
  delivery_count: number;
  first_delivered_at: number | null;
  lease_token: number | null;
}

const noCounters: QueueCounters = {
  published: 0,
  delivered: 0,
  redelivered: 0,
  acked: 0,
  nacked: 0,
  expired: 0,
  deadLettered: 0,
  purged: 0,
};

function toQueueRecord(row: QueueRow): QueueRecord {
  return {
    name: row.name,
    kind: row.kind,
    attributes: JSON.parse(row.attributes) as QueueAttributes,
    createdAt: row.created_at,
    counters: {
      published: row.published,
      delivered: row.delivered,
      redelivered: row.redelivered,
      acked: row.acked,
      nacked: row.nacked,
      expired: row.expired,
      deadLettered: row.dead_lettered,
      purged: row.purged,
    },
  };
}

function toStoredMessage(row: MessageRow): StoredMessage {
  return {
    id: row.id,
    body: row.body,
    contentType: row.content_type,
    headers: row.headers ? (JSON.parse(row.headers) as Record<string, string>) : {},
    key: row.key,
    publishedAt: row.published_at,
    visibleAt: row.visible_at,
    deliveryCount: row.delivery_count,
    firstDeliveredAt: row.first_delivered_at,
  };
}

export class SqliteStore implements Store {
  private readonly db: Db;
  private readonly writes: GroupCommit;
  private readonly random: Random;
  private readonly statements = new Map<string, Statement>();

  constructor(options: SqliteStoreOptions) {
    if (options.path !== ":memory:") mkdirSync(dirname(options.path), { recursive: true });
    this.db = new Database(options.path);
    this.db.pragma("journal_mode = WAL");
    // FULL fsyncs the WAL on every commit; NORMAL leaves the flush to the OS (durability "os").
    this.db.pragma(`synchronous = ${options.durability === "os" ? "NORMAL" : "FULL"}`);
    this.db.pragma("busy_timeout = 5000");
    this.random = options.random;
    this.migrate();
    this.writes = new GroupCommit(this.db);
  }

  /** Jobs and commits so far: the group-commit ratio the benchmark reports. */
  get commitStats(): { commits: number; jobs: number } {
    return { ...this.writes.stats };
  }

  private migrate(): void {
    const applied = this.db.pragma("user_version", { simple: true }) as number;
    migrations.slice(applied).forEach((migration, i) => {
      this.db.transaction(() => {
        this.db.exec(migration);
        this.db.pragma(`user_version = ${applied + i + 1}`);
      })();
    });
  }

  /** Prepares each statement once and reuses it. */
  private stmt(text: string): Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  async ping(): Promise<void> {
    this.stmt("SELECT 1").get();
  }

  async close(): Promise<void> {
    this.writes.close();
    this.db.close();
  }

  /** One process owns the file, so no change ever comes from elsewhere. */
  watch(_listener: (event: StoreEvent) => void): void {}

  async housekeepingLeader(): Promise<boolean> {
    return true;
  }

  private queueRow(name: string): QueueRow | undefined {
    return this.stmt(sql.queueSelectByName).get({ name }) as QueueRow | undefined;
  }

  private requireQueue(name: string): QueueRow {
    const row = this.queueRow(name);
    if (!row) throw new HopperError("queue_not_found", `Queue "${name}" does not exist.`, { queue: name });
    return row;
  }

  private addCounters(queueId: number, deltas: Partial<QueueCounters>): void {
    this.stmt(sql.queueAddCounters).run({ queueId, ...noCounters, ...deltas });
  }

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.writes.run(() => {
      const target = params.attributes.deadLetter?.queue;
      if (target !== undefined && target !== params.name && !this.queueRow(target)) {
        throw new HopperError(
          "dead_letter_queue_not_found",
          `Dead-letter queue "${target}" does not exist.`,
          {
            queue: target,
          },
        );
      }
      const attributes = JSON.stringify(params.attributes);
      const existing = this.queueRow(params.name);
      if (existing) {
        if (existing.kind !== params.kind) {
          throw new HopperError("queue_kind_mismatch", `Queue "${params.name}" is ${existing.kind}.`, {
            kind: existing.kind,
          });
        }
        this.stmt(sql.queueUpdateAttributes).run({ queueId: existing.queue_id, attributes });
        return { created: false, queue: toQueueRecord(this.requireQueue(params.name)) };
      }
      const { n } = this.stmt(sql.queueCount).get() as { n: number };
      if (n >= limits.queuesMax) throw new HopperError("too_many_queues");
      this.stmt(sql.queueInsert).run({
        name: params.name,
        kind: params.kind,
        attributes,
        createdAt: params.now,
      });
      return { created: true, queue: toQueueRecord(this.requireQueue(params.name)) };
    });
  }

  async queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    const row = this.queueRow(params.name);
    return row && toQueueRecord(row);
  }

  async queueList(): Promise<QueueRecord[]> {
    return (this.stmt(sql.queueSelectAll).all() as QueueRow[]).map(toQueueRecord);
  }

  queueDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.name);
      const sources = (
        this.stmt(sql.queueSelectDeadLetterSources).all({ name: params.name }) as { name: string }[]
      )
        .map((row) => row.name)
        .filter((name) => name !== params.name);
      if (sources.length > 0) {
        throw new HopperError(
          "queue_in_use",
          `Queue "${params.name}" is the dead-letter queue of ${sources.join(", ")}.`,
          { deadLetterSources: sources },
        );
      }
      const removed = this.stmt(sql.messageDeleteAllOfQueue).run({ queueId: queue.queue_id }).changes;
      this.stmt(sql.queueDelete).run({ queueId: queue.queue_id });
      return { removed };
    });
  }

  async queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    const queueId = this.requireQueue(params.name).queue_id;
    const counts = this.stmt(sql.messageCountByState).get({ queueId, now: params.now }) as Omit<
      QueueDepth,
      "oldestPublishedAt"
    >;
    const { oldest } = this.stmt(sql.messageOldestPublishedAt).get({ queueId }) as { oldest: number | null };
    return { ...counts, oldestPublishedAt: oldest };
  }

  queueSend(params: { queue: string; messages: NewMessage[] }): Promise<void> {
    return this.writes.run(() => {
      const queueId = this.requireQueue(params.queue).queue_id;
      for (const message of params.messages) this.insertMessage(queueId, message, 0);
      this.addCounters(queueId, { published: params.messages.length });
    });
  }

  private insertMessage(queueId: number, message: NewMessage, deliveryCount: number): void {
    const hasHeaders = Object.keys(message.headers).length > 0;
    this.stmt(sql.messageInsert).run({
      queueId,
      id: message.id,
      body: message.body,
      contentType: message.contentType,
      headers: hasHeaders ? JSON.stringify(message.headers) : null,
      key: message.key,
      publishedAt: message.publishedAt,
      visibleAt: message.visibleAt,
      deliveryCount,
    });
  }

  /** Moves one message row to the dead-letter queue, as a new message there, with the headers that
   * say why. Both queues' counters move in the same transaction. */
  private deadLetterRow(row: MessageRow, source: QueueRow, policy: DeadLetterPolicy, now: number): void {
    const target = this.queueRow(policy.queue);
    invariant(target, `dead-letter queue ${policy.queue} exists while ${source.name} points at it`);
    const message = toStoredMessage(row);
    this.insertMessage(
      target.queue_id,
      {
        ...message,
        headers: deadLetterHeaders(message, source.name, "max_deliveries"),
        publishedAt: now,
        visibleAt: now,
      },
      0,
    );
    this.stmt(sql.messageDelete).run({ seq: row.seq });
    this.addCounters(source.queue_id, { deadLettered: 1 });
    this.addCounters(target.queue_id, { published: 1 });
  }

  queueLease(params: {
    queue: string;
    max: number;
    now: number;
    leaseExpiresAt: number;
    expiredBefore: number;
    inFlightMax: number;
    deadLetter: DeadLetterPolicy | null;
  }): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.queue);
      const queueId = queue.queue_id;
      const { n: inFlight } = this.stmt(sql.messageCountInFlight).get({ queueId, now: params.now }) as {
        n: number;
      };
      const wanted = Math.min(params.max, params.inFlightMax - inFlight);
      const messages: LeasedMessage[] = [];
      let deadLettered = 0;
      let redelivered = 0;
      // Each pass either leases or dead-letters every candidate it reads, so the loop ends; the bound
      // keeps a queue full of exhausted messages from holding one transaction for long.
      for (let pass = 0; pass < 10 && messages.length < wanted; pass++) {
        const candidates = this.stmt(sql.messageSelectAvailable).all({
          queueId,
          now: params.now,
          expiredBefore: params.expiredBefore,
          limit: wanted - messages.length,
        }) as MessageRow[];
        if (candidates.length === 0) break;
        for (const row of candidates) {
          if (params.deadLetter && row.delivery_count >= params.deadLetter.maxDeliveries) {
            this.deadLetterRow(row, queue, params.deadLetter, params.now);
            deadLettered++;
            continue;
          }
          const leaseToken = this.random.uint48();
          const leased = this.stmt(sql.messageLease).get({
            seq: row.seq,
            leaseExpiresAt: params.leaseExpiresAt,
            leaseToken,
            now: params.now,
          }) as { delivery_count: number; first_delivered_at: number };
          if (leased.delivery_count > 1) redelivered++;
          messages.push({
            ...toStoredMessage(row),
            visibleAt: params.leaseExpiresAt,
            deliveryCount: leased.delivery_count,
            firstDeliveredAt: leased.first_delivered_at,
            receipt: encodeReceipt(row.seq, leaseToken),
          });
        }
      }
      if (messages.length > 0) this.addCounters(queueId, { delivered: messages.length, redelivered });
      return { messages, deadLettered };
    });
  }

  /** Runs `apply` for each receipt that names the latest lease of a row of the queue. */
  private forEachReceipt(
    queue: QueueRow,
    receipts: string[],
    apply: (row: MessageRow) => void,
  ): ReceiptResult[] {
    return receipts.map((receipt): ReceiptResult => {
      const decoded = decodeReceipt(receipt);
      if (!decoded) return { error: "invalid_receipt" };
      const row = this.stmt(sql.messageSelectByReceipt).get({ ...decoded, queueId: queue.queue_id }) as
        | MessageRow
        | undefined;
      if (!row) return { error: "stale_receipt" };
      apply(row);
      return { ok: true };
    });
  }

  queueAck(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.queue);
      let acked = 0;
      const results = this.forEachReceipt(queue, params.receipts, (row) => {
        this.stmt(sql.messageDelete).run({ seq: row.seq });
        acked++;
      });
      if (acked > 0) this.addCounters(queue.queue_id, { acked });
      return results;
    });
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterPolicy | null;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.queue);
      let nacked = 0;
      let deadLettered = 0;
      const results = this.forEachReceipt(queue, params.receipts, (row) => {
        nacked++;
        if (params.deadLetter && row.delivery_count >= params.deadLetter.maxDeliveries) {
          this.deadLetterRow(row, queue, params.deadLetter, params.now);
          deadLettered++;
          return;
        }
        const visibleAt = params.now + params.retryDelayMs(row.delivery_count);
        this.stmt(sql.messageRelease).run({ seq: row.seq, visibleAt });
      });
      if (nacked > 0) this.addCounters(queue.queue_id, { nacked });
      return { results, deadLettered };
    });
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.queue);
      return this.forEachReceipt(queue, params.receipts, (row) => {
        this.stmt(sql.messageExtendByReceipt).run({
          seq: row.seq,
          queueId: queue.queue_id,
          leaseToken: row.lease_token,
          leaseExpiresAt: params.leaseExpiresAt,
        });
      });
    });
  }

  async queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    const queueId = this.requireQueue(params.queue).queue_id;
    const statement = {
      available: sql.messagePeekAvailable,
      delayed: sql.messagePeekDelayed,
      "in-flight": sql.messagePeekInFlight,
    }[params.state];
    const rows = this.stmt(statement).all({ queueId, now: params.now, limit: params.limit }) as MessageRow[];
    return rows.map(toStoredMessage);
  }

  queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    return this.writes.run(() => {
      const queueId = this.requireQueue(params.queue).queue_id;
      const purged = this.stmt(sql.messageDeleteAllOfQueue).run({ queueId }).changes;
      this.addCounters(queueId, { purged });
      return { purged };
    });
  }

  queueExpire(params: { queue: string; expiredBefore: number; max: number }): Promise<{ expired: number }> {
    return this.writes.run(() => {
      const queueId = this.requireQueue(params.queue).queue_id;
      const expired = this.stmt(sql.messageDeleteExpired).run({
        queueId,
        expiredBefore: params.expiredBefore,
        limit: params.max,
      }).changes;
      if (expired > 0) this.addCounters(queueId, { expired });
      return { expired };
    });
  }

  queueDeadLetterExhausted(params: {
    queue: string;
    visibleFrom: number;
    now: number;
    max: number;
    deadLetter: DeadLetterPolicy;
  }): Promise<{ deadLettered: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueue(params.queue);
      const rows = this.stmt(sql.messageSelectExhausted).all({
        queueId: queue.queue_id,
        visibleFrom: params.visibleFrom,
        now: params.now,
        maxDeliveries: params.deadLetter.maxDeliveries,
        limit: params.max,
      }) as MessageRow[];
      for (const row of rows) this.deadLetterRow(row, queue, params.deadLetter, params.now);
      return { deadLettered: rows.length };
    });
  }

  async queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }> {
    const queue = this.queueRow(params.queue);
    if (!queue) return { nextVisibleAt: null, oldestPublishedAt: null };
    const queueId = queue.queue_id;
    const { next } = this.stmt(sql.messageNextVisibleAt).get({ queueId, now: params.now }) as {
      next: number | null;
    };
    const { oldest } = this.stmt(sql.messageOldestPublishedAt).get({ queueId }) as { oldest: number | null };
    return { nextVisibleAt: next, oldestPublishedAt: oldest };
  }
}
