/**
 * The PostgreSQL store's queues (QueueStore): the queue records (create, update, list, delete, depth,
 * peek, purge, the next events) here, and each kind of message call in a file of its own (sends,
 * leases, receipts, sweeps, redrive), all over one QueueContext.
 */
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  HopperError,
  invariant,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import type { LeasedMessage, MessageState, ReceiptResult, StoredMessage } from "../../model/message.js";
import type { QueueAttributes, QueueDepth, QueueKind, QueueRecord } from "../../model/queue.js";
import type { QueueStore } from "../queue-store.js";
import {
  type DepthColumns,
  type MessageRow,
  type QueueRow,
  toQueueRecord,
  toStoredMessage,
  withDepth,
} from "../rows.js";
import type { QueueListPage, SendOutcome } from "../store.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import type { MessageWrites } from "./message-writes.js";
import type { QueueContext } from "./queue-context.js";
import { QueueLeases } from "./queue-lease.js";
import { QueueReceipts } from "./queue-receipts.js";
import { QueueRedrive } from "./queue-redrive.js";
import { QueueSends } from "./queue-send.js";
import { QueueSweeps } from "./queue-sweeps.js";
import * as sql from "./statements/index.js";

/** The params object of the QueueStore method `name`. */
type Params<Name extends keyof QueueStore> = Parameters<QueueStore[Name]>[0];

export class PostgresQueueStore implements QueueStore {
  private readonly db: PostgresDatabase;
  private readonly link: PostgresClusterLink;
  private readonly writes: MessageWrites;
  private readonly sends: QueueSends;
  private readonly leases: QueueLeases;
  private readonly receipts: QueueReceipts;
  private readonly sweeps: QueueSweeps;
  private readonly redrive: QueueRedrive;

  constructor(queues: QueueContext) {
    this.db = queues.db;
    this.link = queues.link;
    this.writes = queues.writes;
    this.sends = new QueueSends(queues);
    this.leases = new QueueLeases(queues);
    this.receipts = new QueueReceipts(queues);
    this.sweeps = new QueueSweeps(queues);
    this.redrive = new QueueRedrive(queues);
  }

  private async queueRow(client: Client, name: string): Promise<QueueRow | undefined> {
    const { rows } = await client.query<QueueRow>(sql.queueSelectByName, [name]);
    return rows[0];
  }

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.db.transaction(async (client) => {
      await this.checkDeadLetterTarget(client, params.name, params.attributes);
      const attributes = JSON.stringify(params.attributes);
      let created = false;
      let existing = (
        await client.query<{ queue_id: number; kind: QueueKind }>(sql.queueLockExclusive, [params.name])
      ).rows[0];
      if (!existing) {
        const { rows } = await client.query<{ n: number }>(sql.queueCount);
        if ((rows[0]?.n ?? 0) >= limits.queuesMax) throw new HopperError("too_many_queues");
        const inserted = await client.query(sql.queueInsert, [
          params.name,
          params.kind,
          attributes,
          params.now,
        ]);
        created = inserted.rows.length > 0;
        // A concurrent create won the name: this call becomes an update of that queue.
        if (!created) existing = (await client.query(sql.queueLockExclusive, [params.name])).rows[0];
      }
      if (existing) {
        if (existing.kind !== params.kind) {
          throw queueKindMismatch(params.name, existing.kind);
        }
        await client.query(sql.queueUpdateAttributes, [existing.queue_id, attributes]);
      }
      await this.link.announce(client, { kind: "queue", queue: params.name });
      const row = await this.queueRow(client, params.name);
      invariant(row, "an upserted queue exists in its own transaction");
      return { created, queue: toQueueRecord(row) };
    });
  }

  async queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    const row = (await this.db.statement<QueueRow>(sql.queueSelectByName, [params.name])).rows[0];
    return row && toQueueRecord(row);
  }

  async queueList(): Promise<QueueRecord[]> {
    const { rows } = await this.db.statement<QueueRow>(sql.queueSelectAll, []);
    return rows.map(toQueueRecord);
  }

  queueDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.db.transaction(async (client) => {
      const queue = (await client.query<{ queue_id: number }>(sql.queueLockExclusive, [params.name])).rows[0];
      if (!queue) throw queueNotFound(params.name);
      const sources = (
        await client.query<{ name: string }>(sql.queueSelectDeadLetterSources, [params.name])
      ).rows.map((row) => row.name);
      if (sources.length > 0) {
        throw queueInUse(params.name, sources);
      }
      const removed = (await client.query(sql.messageDeleteAllOfQueue, [queue.queue_id])).rowCount ?? 0;
      await client.query(sql.queueDelete, [queue.queue_id]);
      await client.query(sql.bindingDeleteByDestination, ["queue", params.name]);
      await this.link.announce(client, { kind: "queue", queue: params.name });
      return { removed };
    });
  }

  /** A read in one statement, with no lock: stats and /metrics never write. */
  async queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    const { rows } = await this.db.statement<{
      available: number;
      delayed: number;
      in_flight: number;
      oldest: number | null;
    }>(sql.queueDepthByName, [params.name, params.now]);
    const row = rows[0];
    if (!row) throw queueNotFound(params.name);
    return {
      available: row.available,
      delayed: row.delayed,
      inFlight: row.in_flight,
      // PostgreSQL keeps no message marked corrupt: its pages carry checksums where the cluster enables them.
      corrupt: 0,
      oldestPublishedAt: row.oldest,
    };
  }

  async queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]> {
    // Every name sorts after the empty one; LIMIT NULL is no limit.
    const { rows } = await this.db.statement<QueueRow & DepthColumns>(sql.queueSelectAllWithDepth, [
      params.now,
      params.after ?? "",
      params.limit ?? null,
    ]);
    return rows.map((row) => withDepth(row, toQueueRecord));
  }

  /** A queue's dead-letter target must exist when it is set: a queue, or an exchange. */
  private async checkDeadLetterTarget(
    client: Client,
    queueName: string,
    attributes: QueueAttributes,
  ): Promise<void> {
    const target = attributes.deadLetter;
    if (!target) return;
    if ("queue" in target) {
      if (target.queue === queueName) return;
      if (!(await this.writes.lockQueue(client, target.queue, "share"))) {
        throw deadLetterQueueNotFound(target.queue);
      }
    } else {
      const { rows } = await client.query(sql.exchangeLockShared, [target.exchange]);
      if (rows.length === 0) {
        throw deadLetterExchangeNotFound(target.exchange);
      }
    }
  }

  /** Reads without a lock or a transaction: a peek leases nothing and writes nothing. */
  async queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    const queueId = (await this.db.statement<{ queue_id: number }>(sql.queueSelectId, [params.queue])).rows[0]
      ?.queue_id;
    if (queueId === undefined) throw queueNotFound(params.queue);
    const statement = {
      available: sql.messagePeekAvailable,
      delayed: sql.messagePeekDelayed,
      "in-flight": sql.messagePeekInFlight,
    }[params.state];
    const { rows } = await this.db.statement<MessageRow>(statement, [queueId, params.now, params.limit]);
    return rows.map(toStoredMessage);
  }

  /**
   * Deletes every message under the queue row's exclusive lock: no send, lease or ack of the queue runs
   * meanwhile, so no FIFO group can gain a message that the purge's snapshot misses (it would be left
   * without a head), and the purge needs no group lock, however many groups there are.
   */
  queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    return this.db.transaction(async (client) => {
      const queue = (await client.query<{ queue_id: number }>(sql.queueLockExclusive, [params.queue]))
        .rows[0];
      if (!queue) throw queueNotFound(params.queue);
      const purged = (await client.query(sql.messageDeleteAllOfQueue, [queue.queue_id])).rowCount ?? 0;
      await this.writes.addCounters(client, queue.queue_id, { purged });
      return { purged };
    });
  }

  /** A read in one statement, with no lock: a long poll asks it before it waits. */
  async queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }> {
    const { rows } = await this.db.statement<{ next: number | null; oldest: number | null }>(
      sql.queueNextEventsByName,
      [params.queue, params.now],
    );
    return { nextVisibleAt: rows[0]?.next ?? null, oldestPublishedAt: rows[0]?.oldest ?? null };
  }

  queueSendMany(params: Params<"queueSendMany">): Promise<SendOutcome[]> {
    return this.sends.queueSendMany(params);
  }

  queueLease(params: Params<"queueLease">): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    return this.leases.queueLease(params);
  }

  queueAck(params: Params<"queueAck">): Promise<ReceiptResult[]> {
    return this.receipts.queueAck(params);
  }

  queueNack(params: Params<"queueNack">): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.receipts.queueNack(params);
  }

  queueExtend(params: Params<"queueExtend">): Promise<ReceiptResult[]> {
    return this.receipts.queueExtend(params);
  }

  queueExpire(params: Params<"queueExpire">): Promise<{ expired: number }> {
    return this.sweeps.queueExpire(params);
  }

  queueDeadLetterExhausted(params: Params<"queueDeadLetterExhausted">): Promise<{ deadLettered: number }> {
    return this.sweeps.queueDeadLetterExhausted(params);
  }

  queueMove(params: Params<"queueMove">): ReturnType<QueueStore["queueMove"]> {
    return this.redrive.queueMove(params);
  }
}
