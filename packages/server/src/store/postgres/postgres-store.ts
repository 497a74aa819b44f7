/**
 * The shared store: any number of broker nodes over one PostgreSQL database. Each call is one
 * transaction on a pooled connection; PostgreSQL itself shares one WAL flush among transactions that
 * commit together, so concurrency gives group commit. Leasing uses FOR UPDATE SKIP LOCKED, so nodes
 * never hand out the same message. One more connection per node LISTENs for other nodes' changes and
 * holds the housekeeping lock while this node leads.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  exchangeInUse,
  exchangeNotFound,
  exchangeTypeMismatch,
  HopperError,
  invariant,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import {
  bodyByteLength,
  bodyBytes,
  type LeasedMessage,
  type MessageState,
  type NewMessage,
  type ReceiptResult,
  type StoredMessage,
} from "../../model/message.js";
import { handoffRanks, type SendPolicy } from "../../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type QueueAttributes,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
} from "../../model/queue.js";
import { decodeReceipt, encodeReceipt } from "../../model/receipts.js";
import type { Random } from "../../random.js";
import { notHeldBack, planMoves, redriveScanMax, redriveTargetOf } from "../redrive-order.js";
import {
  type DepthColumns,
  type MessageRow,
  type QueueRow,
  toQueueRecord,
  toStoredMessage,
  withDepth,
} from "../rows.js";
import type { QueueListPage, QueueSend, SendOutcome, Store, StoreEvent } from "../store.js";
import { StoreEvents } from "./events.js";
import { groupKeyOf, type LockedQueue, MessageWrites, messageColumns } from "./message-writes.js";
import { checkSchemaName, counterShards, migrations } from "./schema.js";
import { StatementLines } from "./statement-lines.js";
import * as sql from "./statements.js";

export interface PostgresStoreOptions {
  /** A postgres:// connection string. */
  url: string;
  /** The schema that holds Hopper's tables; created if missing. */
  schema?: string;
  /** Connections for transactions per node. */
  poolSize?: number;
  random: Random;
  /** How often the node says it is present to the others (events.ts); tests shorten it. */
  presenceIntervalMs?: number;
  /** The time for presence; Date.now unless a test drives it. */
  now?: () => number;
}

type Client = pg.PoolClient;

/** A one-statement send waiting in its queue's line: with its hand-off's ranks, if it hands off. */
interface LineSend {
  send: QueueSend;
  ranks: number[] | undefined;
  now: number;
}

/**
 * The most FIFO groups one housekeeping step (expiry, the exhausted sweep) locks: each advisory lock
 * takes a slot of PostgreSQL's shared lock table (max_locks_per_transaction × connections, 6,400 by
 * default), so a step over many groups handles some of them and leaves the rest to the next step.
 */
const groupLocksMax = 1000;
/** Serializes migrations between nodes that start together: an arbitrary, fixed advisory lock key. */
const migrationLockClass = 0x686f7070; // "hopp"
/** Whoever holds this advisory lock leads housekeeping. */
const leaderLockClass = 0x686f7071;
/** A transaction aborted by a deadlock or serialization failure is tried this many times in all. */
const transactionAttemptsMax = 3;
/** Connection-level errors: the store is unreachable rather than the request wrong. */
const unavailableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "57P01",
  "57P02",
  "57P03",
]);

/** bigint columns hold milliseconds, sequences and 48-bit tokens: all exact as JavaScript numbers. */
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

interface ExchangeRow {
  exchange_id: number;
  name: string;
  type: ExchangeType;
  alternate: string | null;
  created_at: number;
  bindings: { kind: BindingDestination["kind"]; name: string; pattern: string }[];
}

function toExchangeRecord(row: ExchangeRow): ExchangeRecord {
  return {
    name: row.name,
    type: row.type,
    alternate: row.alternate,
    createdAt: row.created_at,
    bindings: row.bindings.map((binding) => ({
      destination: { kind: binding.kind, name: binding.name },
      pattern: binding.pattern,
    })),
  };
}

/** Queue names in one order on every node: the order in which a call locks several queue rows. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The (seq, token) pairs whose rows were deleted, as the set receiptResults consumes. */
function deletedPairs(deleted: readonly { seq: number; leaseToken: number }[]): Set<string> {
  return new Set(deleted.map((pair) => `${pair.seq}.${pair.leaseToken}`));
}

/**
 * Each receipt's outcome, given the pairs deleted and not yet counted (deletedPairs), which it takes
 * out of `left`: a receipt that appears twice counts once; its repeat is stale, as it would be in a
 * later call.
 */
function receiptResults(
  decoded: readonly ({ seq: number; leaseToken: number } | undefined)[],
  left: Set<string>,
): ReceiptResult[] {
  return decoded.map((receipt): ReceiptResult => {
    if (!receipt) return { error: "invalid_receipt" };
    if (!left.delete(`${receipt.seq}.${receipt.leaseToken}`)) return { error: "stale_receipt" };
    return { ok: true };
  });
}

type LeaseParams = Parameters<Store["queueLease"]>[0];
type MoveParams = Parameters<Store["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<Store["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<Store["queueDeadLetterExhausted"]>[0];

/** A target of a redrive step, locked, with its policy and its depth as the step fills it. */
interface MoveTarget {
  queue: LockedQueue;
  policy: SendPolicy;
  depth: number;
}

interface PlannedMove {
  seq: number;
  message: NewMessage;
  target: MoveTarget;
}

/** The most messages, or receipts, that the calls waiting in a queue's line put into one statement. */
const lineBatchMax = 1_000;
/**
 * The most body bytes that the sends waiting in a queue's line put into one statement: its bodies go as
 * one bytea parameter (statements.ts bodyOf), and PostgreSQL takes at most 1 GB in a field, where a
 * thousand bodies of 1 MiB would pass it. One send (a request, at most 10 MiB) always fits.
 */
const lineBatchBodyBytesMax = 64 * 1024 * 1024;

export class PostgresStore implements Store {
  /** Writes run side by side on pooled connections; each commits when it is done. */
  readonly commitsInCallOrder = false;
  private readonly pool: pg.Pool;
  private readonly random: Random;
  readonly schema: string;
  private readonly events: StoreEvents;
  private readonly pendingAnnouncements = new Set<string>();
  /** Announcements of the transaction running on each client, sent only if it commits. */
  private readonly announcementsOf = new WeakMap<Client, string[]>();
  private announcing = false;
  /** The prepared-statement name of each one-statement call's text (preparedName). */
  private readonly preparedNames = new Map<string, string>();
  private readonly writes: MessageWrites;
  /**
   * The kind last seen of each queue name: which one-statement lease to try first, and whether a send
   * or an ack can be one statement. Only a hint: those statements check the kind themselves, since a
   * queue may have been deleted and created again as the other kind (on another node, too).
   */
  private readonly kindHints = new Map<string, QueueKind>();
  /**
   * One-statement sends and acks go one statement at a time per queue; those that arrive meanwhile
   * share the next (statement-lines.ts). A batch that finds a FIFO queue answers undefined for each
   * call, which then takes the transactional path.
   */
  private readonly sendLines = new StatementLines<LineSend, SendOutcome | undefined>(
    (_queue, sends) => this.queueSendBatch(sends),
    [
      { sizeOf: (line) => line.send.messages.length, max: lineBatchMax },
      {
        sizeOf: (line) =>
          line.send.messages.reduce((bytes, message) => bytes + bodyByteLength(message.body), 0),
        max: lineBatchBodyBytesMax,
      },
    ],
  );
  private readonly ackLines = new StatementLines<string[], ReceiptResult[] | undefined>(
    (queue, receipts) => this.queueAckBatch(queue, receipts),
    [{ sizeOf: (receipts) => receipts.length, max: lineBatchMax }],
  );

  private constructor(options: PostgresStoreOptions, schema: string) {
    this.schema = schema;
    this.random = options.random;
    this.writes = new MessageWrites(schema, () => this.counterShard());
    // Every statement is an indexed lookup or an ordered index walk that stops at its LIMIT. Without
    // fresh statistics (autovacuum off, or a queue that grew fast) the planner prefers a bitmap scan
    // and a sort of every available row for the lease query, whose cost then grows with the queue's
    // depth; turning bitmap scans off for Hopper's own sessions keeps the plans it was written for.
    // Generic plans: a prepared statement is planned once per connection, not again for each set of
    // values (PostgreSQL's default re-plans a statement whose custom plans look cheaper, which the
    // lease statement's do). W2 on one node: p99 7.95-8.86 ms against 11.4-11.8 (docs/benchmarks.md).
    const connection = {
      connectionString: options.url,
      options: `-c search_path=${schema} -c enable_bitmapscan=off -c plan_cache_mode=force_generic_plan`,
      types,
    };
    this.pool = new pg.Pool({ ...connection, max: options.poolSize ?? 10 });
    // An idle pooled connection that the server drops must not crash the process; the next query
    // reconnects.
    this.pool.on("error", () => {});
    this.events = new StoreEvents({
      ...connection,
      schema,
      leaderLockClass,
      ...(options.presenceIntervalMs === undefined ? {} : { presenceIntervalMs: options.presenceIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
  }

  /** Connects, creates the schema and applies migrations, then starts listening. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const schema = options.schema ?? "hopper";
    checkSchemaName(schema);
    const store = new PostgresStore(options, schema);
    try {
      await store.migrate();
      await store.events.start();
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query(sql.migrationLock, [migrationLockClass, this.schema]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`);
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, applied_at timestamptz DEFAULT now())",
      );
      const { rows } = await client.query<{ version: number | null }>(
        "SELECT max(version) AS version FROM schema_migrations",
      );
      const applied = rows[0]?.version ?? 0;
      for (const [index, migration] of migrations.entries()) {
        if (index < applied) continue;
        await client.query(migration);
        await client.query("INSERT INTO schema_migrations (version) VALUES ($1)", [index + 1]);
      }
    });
  }

  /**
   * Runs `work` in one transaction on a pooled connection; connection failures become `unavailable`.
   * A transaction that PostgreSQL aborted for a deadlock or a serialization failure is run again: it
   * changed nothing, and the retry usually meets no conflict.
   */
  private async transaction<T>(work: (client: Client) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce(work);
      } catch (error) {
        const code = (error as { code?: string }).code;
        const retryable = code === "40P01" || code === "40001";
        if (!retryable || attempt >= transactionAttemptsMax) throw error;
      }
    }
  }

  private async transactionOnce<T>(work: (client: Client) => Promise<T>): Promise<T> {
    let client: Client;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
    }
    let broken: Error | undefined;
    // The pool listens for errors on idle connections only. A checked-out connection that the server
    // ends (a restart, a terminated session) emits "error" here, and an unheard error would end the
    // process; it marks the connection broken, so it is discarded and the call answers unavailable.
    const onError = (error: Error) => {
      broken ??= error;
    };
    client.on("error", onError);
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      for (const queue of this.announcementsOf.get(client) ?? []) this.announceCommitted(queue);
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: Error) => {
        broken = rollbackError;
      });
      if (error instanceof HopperError) throw error;
      const code = (error as { code?: string }).code;
      if (broken || (code !== undefined && unavailableCodes.has(code))) {
        broken ??= error as Error;
        throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
      }
      throw error;
    } finally {
      this.announcementsOf.delete(client);
      client.off("error", onError);
      client.release(broken);
    }
  }

  /** Runs one statement in its own implicit transaction: one round trip. Failures map as transaction's. */
  private async statement<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const name = this.preparedName(text);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.pool.query<R>({ name, text, values });
      } catch (error) {
        const code = (error as { code?: string }).code;
        if ((code === "40P01" || code === "40001") && attempt < transactionAttemptsMax) continue;
        if (code === undefined || unavailableCodes.has(code) || code.startsWith("08")) {
          throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
        }
        throw error;
      }
    }
  }

  /**
   * The name a one-statement call is prepared under. Each pooled connection then parses and plans it
   * once (PostgreSQL switches to a cached generic plan once it costs no more than the custom ones)
   * instead of at every call: the lease statement alone takes 0.35 ms to plan.
   */
  private preparedName(text: string): string {
    let name = this.preparedNames.get(text);
    if (!name) {
      name = `hopper_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
      this.preparedNames.set(text, name);
    }
    return name;
  }

  private counterShard(): number {
    return Math.floor(this.random.float() * counterShards);
  }

  async ping(): Promise<void> {
    await this.transaction((client) => client.query("SELECT 1"));
  }

  async close(): Promise<void> {
    await this.events.stop();
    await this.pool.end();
  }

  watch(listener: (event: StoreEvent) => void): void {
    this.events.listen(listener);
  }

  housekeepingLeader(): Promise<boolean> {
    return this.events.leader();
  }

  /** A NOTIFY outside any transaction: delivered to the other nodes at once, stored nowhere. */
  async signalBroadcast(params: { channel: string; dataJson: string }): Promise<void> {
    const payload = this.events.encode({ kind: "signal", ...params });
    try {
      await this.pool.query(sql.notify, [this.events.channel, payload]);
    } catch (error) {
      throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
    }
  }

  /**
   * Tells the other nodes, once the current call has committed, that messages may be available in
   * `queue`. The NOTIFY is sent by itself after the commit, not inside the writing transaction:
   * PostgreSQL serializes the commits of transactions that NOTIFY, which would make every send wait
   * for the previous one's flush. Announcements of one event-loop turn are sent once per queue. If the
   * node dies between the commit and the NOTIFY, other nodes' long polls wake at their deadline
   * instead: a delay, never a loss. (A call that fails after announcing sends a harmless extra wake.)
   * Nothing is sent while no other node listens (events.ts, presence): it is decided here, after the
   * commit, so a commit that a node joining could miss was made before this node welcomed it.
   */
  private announceCommitted(queue: string): void {
    if (!this.events.othersListening()) return;
    this.pendingAnnouncements.add(queue);
    if (this.announcing) return;
    this.announcing = true;
    setImmediate(() => {
      this.announcing = false;
      const queues = [...this.pendingAnnouncements];
      this.pendingAnnouncements.clear();
      for (const name of queues) {
        const payload = this.events.encode({ kind: "messages", queue: name });
        // Prepared, as the other per-message statements: at low rates there is one NOTIFY per send.
        this.statement(sql.notify, [this.events.channel, payload]).catch(() => {
          // Unreachable database: the other nodes' long polls end at their deadline and look again.
        });
      }
    });
  }

  /** Announces the queues (announceCommitted) once the transaction on `client` has committed. */
  private announceOnCommit(client: Client, ...queues: readonly string[]): void {
    const announced = this.announcementsOf.get(client) ?? [];
    announced.push(...queues);
    this.announcementsOf.set(client, announced);
  }

  /** Queues a notification that other nodes receive when (and only if) the transaction commits. */
  private async announce(
    client: Client,
    event: Exclude<StoreEvent, { kind: "resync" } | { kind: "signal" }>,
  ): Promise<void> {
    await client.query(sql.notify, [this.events.channel, this.events.encode(event)]);
  }

  private async lockQueueShared(client: Client, name: string): Promise<LockedQueue> {
    const queue = await this.writes.lockQueue(client, name, "share");
    if (!queue) throw queueNotFound(name);
    this.hintKind(name, queue.kind);
    return queue;
  }

  private hintKind(queue: string, kind: QueueKind): void {
    // Bounded as the queues are; a full map is dropped whole, since it only saves a retry.
    if (this.kindHints.size >= limits.queuesMax && !this.kindHints.has(queue)) this.kindHints.clear();
    this.kindHints.set(queue, kind);
  }

  private async queueRow(client: Client | pg.Pool, name: string): Promise<QueueRow | undefined> {
    const { rows } = await client.query<QueueRow>(sql.queueSelectByName, [name]);
    return rows[0];
  }

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.transaction(async (client) => {
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
      await this.announce(client, { kind: "queue", queue: params.name });
      const row = await this.queueRow(client, params.name);
      invariant(row, "an upserted queue exists in its own transaction");
      return { created, queue: toQueueRecord(row) };
    });
  }

  async queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    const row = (await this.statement<QueueRow>(sql.queueSelectByName, [params.name])).rows[0];
    return row && toQueueRecord(row);
  }

  async queueList(): Promise<QueueRecord[]> {
    const { rows } = await this.statement<QueueRow>(sql.queueSelectAll, []);
    return rows.map(toQueueRecord);
  }

  queueDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.transaction(async (client) => {
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
      await this.announce(client, { kind: "queue", queue: params.name });
      return { removed };
    });
  }

  /** A read in one statement, with no lock: stats and /metrics never write. */
  async queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    const { rows } = await this.statement<{
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
    const { rows } = await this.statement<QueueRow & DepthColumns>(sql.queueSelectAllWithDepth, [
      params.now,
      params.after ?? "",
      params.limit ?? null,
    ]);
    return rows.map((row) => withDepth(row, toQueueRecord));
  }

  /**
   * A send into one standard queue, without overflow or deduplication, is one statement
   * (statements.queueSendStatement); everything else, and a queue that turns out to be FIFO, is one
   * transaction.
   */
  async queueSendMany(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]> {
    const [only] = params.sends;
    if (only && params.sends.length === 1 && this.sendFitsOneStatement(only)) {
      const ranks = handoffRanks(only, params.now);
      const sent = await this.sendLines.run(only.queue, { send: only, ranks, now: params.now });
      if (sent) return [sent];
    }
    return this.queueSendInTransaction(params);
  }

  /**
   * Sends of one queue as one statement, each answered with its own ids (sendLines), and with what it
   * handed off when any of them hands off.
   */
  private async queueSendBatch(lines: LineSend[]): Promise<(SendOutcome | undefined)[]> {
    if (lines.some((line) => line.ranks)) return this.queueSendHandingOff(lines);
    const sends = lines.map((line) => line.send);
    const [first] = sends;
    invariant(first, "a batch holds at least one send");
    const messages = sends.length === 1 ? first.messages : sends.flatMap((send) => send.messages);
    const sent = await this.queueSendInOneStatement({ ...first, messages });
    let offset = 0;
    return sends.map((send) => {
      const ids = sent?.ids.slice(offset, offset + send.messages.length);
      offset += send.messages.length;
      return ids && { ids, leased: [] };
    });
  }

  private sendFitsOneStatement(send: QueueSend): boolean {
    return (
      this.kindHints.get(send.queue) !== "fifo" &&
      send.policy.overflow === null &&
      send.messages.every((message) => message.dedupId === null)
    );
  }

  /**
   * The one-statement send whose hand-offs lease the messages ranked up to the queue's in-flight room
   * (statements.queueSendHandingOffStatement). The sends of a batch rank their messages one after the
   * other, each leased to its own claim. Announces the queue after the commit only if a message was
   * left available. Answers undefined for each, having written nothing, when the queue is FIFO.
   */
  private async queueSendHandingOff(lines: LineSend[]): Promise<(SendOutcome | undefined)[]> {
    const [first] = lines;
    invariant(first, "a batch holds at least one send");
    const ranks: number[] = [];
    const leaseExpiries: number[] = [];
    /** By rank in the batch: the line and the message it leases. */
    const byRank = new Map<number, { line: number; message: NewMessage; leaseExpiresAt: number }>();
    let rankBase = 0;
    let visibleNow = 0;
    lines.forEach(({ send, ranks: own, now }, line) => {
      const leaseExpiresAt = send.handoff?.leaseExpiresAt ?? 0;
      let top = 0;
      send.messages.forEach((message, index) => {
        const rank = own?.[index] ?? 0;
        if (message.visibleAt <= now) visibleNow++;
        ranks.push(rank === 0 ? 0 : rankBase + rank);
        leaseExpiries.push(rank === 0 ? 0 : leaseExpiresAt);
        if (rank > 0) byRank.set(rankBase + rank, { line, message, leaseExpiresAt });
        top = Math.max(top, rank);
      });
      rankBase += top;
    });
    const now = Math.max(...lines.map((line) => line.now));
    const inFlightMax = Math.min(...lines.map((line) => line.send.handoff?.inFlightMax ?? Infinity));
    const messages = lines.length === 1 ? first.send.messages : lines.flatMap((line) => line.send.messages);
    const tokenBase = this.random.uint48();
    const { rows } = await this.statement<{ kind: QueueKind; seqs: number[]; tokens: number[] }>(
      sql.queueSendHandingOffStatement,
      [
        ...this.sendParams({ ...first.send, messages }),
        ranks,
        rankBase,
        inFlightMax,
        now,
        leaseExpiries,
        tokenBase,
      ],
    );
    const row = rows[0];
    if (!row) throw queueNotFound(first.send.queue);
    this.hintKind(first.send.queue, row.kind);
    if (row.kind !== "standard") return lines.map(() => undefined);
    const leased: LeasedMessage[][] = lines.map(() => []);
    row.seqs.forEach((seq, i) => {
      const token = row.tokens[i] as number;
      const owner = byRank.get(token - tokenBase);
      invariant(owner, "a leased message has a rank of the batch");
      leased[owner.line]?.push({
        ...owner.message,
        visibleAt: owner.leaseExpiresAt,
        deliveryCount: 1,
        firstDeliveredAt: now,
        receipt: encodeReceipt(seq, token),
      });
    });
    if (row.seqs.length < visibleNow) this.announceCommitted(first.send.queue);
    return lines.map((line, index) => ({
      ids: line.send.messages.map((message) => message.id),
      leased: leased[index] ?? [],
    }));
  }

  /** $1–$11 of the one-statement sends (statements.ts queueSend): the queue, the message columns, a shard, the body lengths. */
  private sendParams(send: QueueSend): unknown[] {
    const columns = messageColumns(send.messages);
    return [
      send.queue,
      columns.ids,
      columns.bodies,
      columns.contentTypes,
      columns.headers,
      columns.keys,
      columns.priorities,
      columns.publishedAts,
      columns.visibleAts,
      this.counterShard(),
      columns.bodyLengths,
    ];
  }

  /** Returns undefined, having written nothing, when the queue is FIFO. */
  private async queueSendInOneStatement(send: QueueSend): Promise<SendOutcome | undefined> {
    // Alone on this node (no other call holds or awaits a connection), the send NOTIFYs in its own
    // commit: one round trip instead of two. Otherwise the NOTIFY goes after the commit, shared by the
    // sends of one turn, since PostgreSQL serializes the commits of transactions that NOTIFY. Neither
    // while no other node listens.
    const alone = this.pool.waitingCount === 0 && this.pool.idleCount === this.pool.totalCount;
    const notifying = alone && this.events.othersListening();
    const notify = notifying
      ? [this.events.channel, this.events.encode({ kind: "messages", queue: send.queue })]
      : [];
    const { rows } = await this.statement<{ queue_id: number; kind: QueueKind }>(
      notifying ? sql.queueSendNotifyingStatement : sql.queueSendStatement,
      [...this.sendParams(send), ...notify],
    );
    const row = rows[0];
    if (!row) throw queueNotFound(send.queue);
    this.hintKind(send.queue, row.kind);
    if (row.kind !== "standard") return undefined;
    if (!notifying) this.announceCommitted(send.queue);
    return { ids: send.messages.map((message) => message.id), leased: [] };
  }

  private queueSendInTransaction(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]> {
    return this.transaction(async (client) => {
      const results: SendOutcome[] = [];
      // Queues are locked in name order (message-writes.ts), so that two sends into the same queues
      // with a maxDepth never wait for each other in a cycle; results keep the order of the sends.
      const order = params.sends.map((_, index) => index);
      order.sort((a, b) => compareNames(params.sends[a]?.queue ?? "", params.sends[b]?.queue ?? ""));
      for (const index of order) {
        const send = params.sends[index];
        invariant(send, "the order holds indexes of the sends");
        const queue = await this.writes.lockQueue(
          client,
          send.queue,
          send.policy.overflow ? "depth" : "share",
        );
        if (!queue) throw queueNotFound(send.queue);
        this.hintKind(send.queue, queue.kind);
        const { ids, written } = await this.writes.send(
          client,
          queue,
          send.messages,
          send.policy,
          params.now,
        );
        results[index] = { ids, leased: [] };
        this.announceOnCommit(client, ...written);
      }
      return results;
    });
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

  /**
   * Leases in one statement (statements.queueLeaseStatement, or queueLeaseFifoStatement for a FIFO
   * queue); only when candidates used their last delivery, or with autoAck, does it take the
   * transactional path, which also moves those to the dead-letter queue.
   */
  async queueLease(params: LeaseParams): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    if (params.autoAck) return this.queueLeaseInTransaction(params);
    // One random base per call; the n-th message leased gets base + n (see leaseAround).
    const tokenBase = this.random.uint48();
    let kind = this.kindHints.get(params.queue) ?? "standard";
    let leased = await this.queueLeaseInOneStatement(kind, params, tokenBase);
    // The hint was wrong (or the queue was created again as the other kind): nothing was leased.
    if (leased.kind !== kind) {
      kind = leased.kind;
      leased = await this.queueLeaseInOneStatement(kind, params, tokenBase);
    }
    if (leased.kind !== kind) return this.queueLeaseInTransaction(params);
    const { messages, exhausted } = leased;
    if (exhausted === 0 || !params.deadLetter) return { messages, deadLettered: 0 };
    const rest = await this.queueLeaseInTransaction({ ...params, max: params.max - messages.length });
    return { messages: [...messages, ...rest.messages], deadLettered: rest.deadLettered };
  }

  /** Runs the one-statement lease of `kind`; it leases nothing if the queue is of the other kind. */
  private async queueLeaseInOneStatement(
    kind: QueueKind,
    params: LeaseParams,
    tokenBase: number,
  ): Promise<{ kind: QueueKind; messages: LeasedMessage[]; exhausted: number }> {
    const { rows } = await this.statement<
      MessageRow & { kind: QueueKind; exhausted: number; lease_index: number | null }
    >(kind === "fifo" ? sql.queueLeaseFifoStatement : sql.queueLeaseStatement, [
      params.queue,
      params.now,
      params.expiredBefore,
      params.max,
      params.inFlightMax,
      params.deadLetter?.maxDeliveries ?? 2_147_483_647,
      params.leaseExpiresAt,
      tokenBase,
      this.counterShard(),
    ]);
    const first = rows[0];
    if (!first) throw queueNotFound(params.queue);
    this.hintKind(params.queue, first.kind);
    const messages = rows
      .filter((row) => row.lease_index !== null)
      .sort((a, b) => (a.lease_index as number) - (b.lease_index as number))
      .map(
        (row): LeasedMessage => ({
          ...toStoredMessage(row),
          receipt: encodeReceipt(row.seq, tokenBase + (row.lease_index as number)),
        }),
      );
    return { kind: first.kind, messages, exhausted: first.exhausted };
  }

  /**
   * The general lease, in one transaction: leases, dead-letters exhausted candidates, and with autoAck
   * deletes what it leased. In a FIFO queue it first locks the groups of the heads it may take (and
   * those groups in FIFO dead-letter queues), since dead-lettering or deleting a head hands its group
   * to the next message; later passes look only in those groups, for the heads that this made.
   */
  private queueLeaseInTransaction(
    params: LeaseParams,
  ): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    return this.transaction(async (client) => {
      const queue = await this.lockQueueShared(client, params.queue);
      const inFlight =
        (
          await client.query<{ n: number }>(sql.messageCountInFlight, [
            queue.queueId,
            params.now,
            params.max,
            params.inFlightMax,
          ])
        ).rows[0]?.n ?? 0;
      const wanted = Math.min(params.max, params.inFlightMax - inFlight);
      const messages: LeasedMessage[] = [];
      let deadLettered = 0;
      const locked = queue.kind === "fifo" ? await this.lockHeadGroups(client, queue, params, wanted) : null;
      // Each pass leases or dead-letters every row it locks, so the loop ends; the bound keeps a queue
      // full of exhausted messages from holding one transaction for long.
      // A lease that ends at once (a visibility timeout of 0) leaves its messages available: a second
      // pass would hand them out again, so it gets one pass.
      const passes = params.leaseExpiresAt > params.now ? limits.leasePassesMax : 1;
      for (let pass = 0; pass < passes && messages.length < wanted; pass++) {
        const limit = wanted - messages.length;
        const { rows } = locked
          ? await client.query<MessageRow>(sql.messageSelectHeadsForLease, [
              queue.queueId,
              params.now,
              params.expiredBefore,
              limit,
              locked.groups,
            ])
          : await client.query<MessageRow>(sql.messageSelectAvailableForLease, [
              queue.queueId,
              params.now,
              params.expiredBefore,
              limit,
            ]);
        if (rows.length === 0) break;
        const policy = params.deadLetter;
        const exhausted = policy ? rows.filter((row) => row.delivery_count >= policy.maxDeliveries) : [];
        if (policy && exhausted.length > 0) {
          const written = await this.writes.deadLetter(
            client,
            exhausted,
            queue,
            policy,
            "max_deliveries",
            params.now,
            locked?.targets,
          );
          this.announceOnCommit(client, ...written);
          deadLettered += exhausted.length;
        }
        messages.push(
          ...(await this.leaseRows(
            client,
            rows.filter((row) => !exhausted.includes(row)),
            params,
          )),
        );
      }
      if (messages.length === 0) return { messages, deadLettered };
      let acked = 0;
      if (params.autoAck) {
        const seqs = messages.map((message) => decodeReceipt(message.receipt)?.seq ?? -1);
        const { removed, promoted } = await this.writes.remove(client, queue, seqs);
        acked = removed;
        if (promoted > 0) this.announceOnCommit(client, queue.name);
      }
      await this.writes.addCounters(client, queue.queueId, {
        delivered: messages.length,
        redelivered: messages.filter((message) => message.deliveryCount > 1).length,
        acked,
      });
      return { messages, deadLettered };
    });
  }

  /** Takes a lease on each of the locked rows, each with a token of its own. */
  private async leaseRows(
    client: Client,
    rows: readonly MessageRow[],
    params: LeaseParams,
  ): Promise<LeasedMessage[]> {
    if (rows.length === 0) return [];
    const tokens = rows.map(() => this.random.uint48());
    const updated = await client.query<{
      seq: number;
      delivery_count: number;
      first_delivered_at: number;
    }>(sql.messageLeaseMany, [rows.map((row) => row.seq), tokens, params.leaseExpiresAt, params.now]);
    const bySeq = new Map(updated.rows.map((row) => [row.seq, row]));
    return rows.map((row, index) => {
      const leased = bySeq.get(row.seq);
      invariant(leased, "a locked row is updated");
      return {
        ...toStoredMessage(row),
        visibleAt: params.leaseExpiresAt,
        deliveryCount: leased.delivery_count,
        firstDeliveredAt: leased.first_delivered_at,
        receipt: encodeReceipt(row.seq, tokens[index] as number),
      };
    });
  }

  /**
   * Locks the groups of the FIFO queue's next `wanted` available heads, with, for those heads that
   * used their last delivery, the same groups in the FIFO dead-letter queues they go to: all in one
   * statement, before any message row is locked (the lock order of message-writes.ts).
   */
  private async lockHeadGroups(
    client: Client,
    queue: LockedQueue,
    params: LeaseParams,
    wanted: number,
  ): Promise<{ groups: string[]; targets: LockedQueue[] | undefined }> {
    const { rows } = await client.query<{ group_key: string; delivery_count: number }>(
      sql.messageSelectHeadGroups,
      [queue.queueId, params.now, params.expiredBefore, Math.max(0, wanted)],
    );
    const groups = rows.map((row) => row.group_key);
    const policy = params.deadLetter;
    const exhaustedGroups = policy
      ? rows.filter((row) => row.delivery_count >= policy.maxDeliveries).map((row) => row.group_key)
      : [];
    const targets =
      policy && exhaustedGroups.length > 0 ? await this.writes.lockTargets(client, policy.queues) : undefined;
    await this.writes.lockGroups(client, [
      ...groups.map((groupKey) => ({ queueId: queue.queueId, groupKey })),
      ...(targets ?? [])
        .filter((target) => target.kind === "fifo")
        .flatMap((target) => exhaustedGroups.map((groupKey) => ({ queueId: target.queueId, groupKey }))),
    ]);
    return { groups, targets };
  }

  /**
   * In a FIFO queue, locks the groups of the rows these seqs name (a removal may hand a group on), before
   * the rows are locked. A standard queue has no groups.
   */
  private async lockGroupsOfSeqs(client: Client, queue: LockedQueue, seqs: readonly number[]): Promise<void> {
    if (queue.kind !== "fifo" || seqs.length === 0) return;
    const { rows } = await client.query<{ group_key: string }>(sql.messageSelectGroupsOfSeqs, [
      queue.queueId,
      seqs,
    ]);
    await this.writes.lockGroups(
      client,
      rows.map((row) => ({ queueId: queue.queueId, groupKey: row.group_key })),
    );
  }

  /**
   * Finds, locked, the rows whose latest lease each receipt names. A receipt that appears twice in one
   * batch counts once; its repeat is stale, as it would be in a later call.
   */
  private async rowsByReceipt(
    client: Client,
    queueId: number,
    receipts: string[],
  ): Promise<{ results: ReceiptResult[]; rows: (MessageRow | undefined)[] }> {
    const decoded = receipts.map(decodeReceipt);
    const valid = decoded.filter((receipt) => receipt !== undefined);
    const { rows } = await client.query<MessageRow>(sql.messageSelectByReceipts, [
      queueId,
      valid.map((receipt) => receipt.seq),
      valid.map((receipt) => receipt.leaseToken),
    ]);
    const bySeq = new Map(rows.map((row) => [row.seq, row]));
    const matched: (MessageRow | undefined)[] = [];
    const results = decoded.map((receipt): ReceiptResult => {
      if (!receipt) {
        matched.push(undefined);
        return { error: "invalid_receipt" };
      }
      const row = bySeq.get(receipt.seq);
      if (!row || row.lease_token !== receipt.leaseToken) {
        matched.push(undefined);
        return { error: "stale_receipt" };
      }
      bySeq.delete(receipt.seq);
      matched.push(row);
      return { ok: true };
    });
    return { results, rows: matched };
  }

  /**
   * In a standard queue one statement, one round trip (statements.queueAckStatement). In a FIFO queue
   * an ack hands the group to its next message, under the group's lock: a transaction.
   */
  async queueAck(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    if (this.kindHints.get(params.queue) === "fifo") return this.queueAckInTransaction(params);
    return (await this.ackLines.run(params.queue, params.receipts)) ?? this.queueAckInTransaction(params);
  }

  /**
   * Ack batches of one standard queue as one statement (ackLines). The results are read off the
   * deleted pairs call by call, in order, each pair counting once: a receipt in two of the calls is
   * ok in the first and stale in the second, as if they had run one after the other. Undefined for
   * each call when the queue is FIFO.
   */
  private async queueAckBatch(queue: string, batches: string[][]): Promise<(ReceiptResult[] | undefined)[]> {
    const decoded = batches.map((receipts) => receipts.map(decodeReceipt));
    const valid = decoded.flat().filter((receipt) => receipt !== undefined);
    const { rows } = await this.statement<{
      queue_id: number | null;
      kind: QueueKind | null;
      seqs: number[];
      tokens: number[];
    }>(sql.queueAckStatement, [
      queue,
      valid.map((r) => r.seq),
      valid.map((r) => r.leaseToken),
      this.counterShard(),
    ]);
    const row = rows[0];
    if (!row || row.queue_id === null || row.kind === null) throw queueNotFound(queue);
    this.hintKind(queue, row.kind);
    if (row.kind !== "standard") return batches.map(() => undefined);
    const left = deletedPairs(row.seqs.map((seq, i) => ({ seq, leaseToken: row.tokens[i] as number })));
    return decoded.map((receipts) => receiptResults(receipts, left));
  }

  /**
   * An ack in a FIFO queue: a transaction of two statements between BEGIN and COMMIT. The first locks
   * the queue row and names the groups of the acked messages, whose advisory locks are taken next; the
   * second deletes, promotes each group's next head and counts (statements.fifoAckStatement).
   */
  private queueAckInTransaction(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    return this.transaction(async (client) => {
      const decoded = params.receipts.map(decodeReceipt);
      const valid = decoded.filter((receipt) => receipt !== undefined);
      const seqs = valid.map((r) => r.seq);
      const queue = (
        await client.query<{ queue_id: number; kind: QueueKind; groups: string[] }>(sql.fifoAckGroups, [
          params.queue,
          seqs,
        ])
      ).rows[0];
      if (!queue) throw queueNotFound(params.queue);
      this.hintKind(params.queue, queue.kind);
      await this.writes.lockGroups(
        client,
        queue.groups.map((groupKey) => ({ queueId: queue.queue_id, groupKey })),
      );
      const row = (
        await client.query<{ seqs: number[]; tokens: number[]; promoted: number }>(sql.fifoAckStatement, [
          queue.queue_id,
          seqs,
          valid.map((r) => r.leaseToken),
          this.counterShard(),
        ])
      ).rows[0];
      invariant(row, "an aggregate-only select answers one row");
      if (row.promoted > 0) this.announceOnCommit(client, params.queue);
      return receiptResults(
        decoded,
        deletedPairs(row.seqs.map((seq, i) => ({ seq, leaseToken: row.tokens[i] as number }))),
      );
    });
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.transaction(async (client) => {
      const queue = await this.lockQueueShared(client, params.queue);
      // Only a dead letter removes a head; a retried head stays the head of its group.
      if (params.deadLetter) {
        const seqs = params.receipts.map((receipt) => decodeReceipt(receipt)?.seq);
        await this.lockGroupsOfSeqs(
          client,
          queue,
          seqs.filter((seq) => seq !== undefined),
        );
      }
      const { results, rows } = await this.rowsByReceipt(client, queue.queueId, params.receipts);
      const found = rows.filter((row) => row !== undefined);
      const policy = params.deadLetter;
      const exhausted = policy ? found.filter((row) => row.delivery_count >= policy.maxDeliveries) : [];
      const retried = found.filter((row) => !exhausted.includes(row));
      if (policy) {
        const written = await this.writes.deadLetter(
          client,
          exhausted,
          queue,
          policy,
          "max_deliveries",
          params.now,
        );
        this.announceOnCommit(client, ...written);
      }
      if (retried.length > 0) {
        await client.query(sql.messageReleaseMany, [
          retried.map((row) => row.seq),
          retried.map((row) => params.now + params.retryDelayMs(row.delivery_count)),
        ]);
        this.announceOnCommit(client, params.queue);
      }
      if (found.length > 0) await this.writes.addCounters(client, queue.queueId, { nacked: found.length });
      return { results, deadLettered: exhausted.length };
    });
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.transaction(async (client) => {
      const queue = await this.lockQueueShared(client, params.queue);
      const { results, rows } = await this.rowsByReceipt(client, queue.queueId, params.receipts);
      const seqs = rows.filter((row) => row !== undefined).map((row) => row.seq);
      if (seqs.length > 0) {
        await client.query(sql.messageExtendMany, [seqs, params.leaseExpiresAt]);
        // A lease cut short (extend to now) hands the message back; other nodes' long polls may want it.
        this.announceOnCommit(client, params.queue);
      }
      return results;
    });
  }

  /** Reads without a lock or a transaction: a peek leases nothing and writes nothing. */
  async queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    const queueId = (await this.statement<{ queue_id: number }>(sql.queueSelectId, [params.queue])).rows[0]
      ?.queue_id;
    if (queueId === undefined) throw queueNotFound(params.queue);
    const statement = {
      available: sql.messagePeekAvailable,
      delayed: sql.messagePeekDelayed,
      "in-flight": sql.messagePeekInFlight,
    }[params.state];
    const { rows } = await this.statement<MessageRow>(statement, [queueId, params.now, params.limit]);
    return rows.map(toStoredMessage);
  }

  /**
   * Deletes every message under the queue row's exclusive lock: no send, lease or ack of the queue runs
   * meanwhile, so no FIFO group can gain a message that the purge's snapshot misses (it would be left
   * without a head), and the purge needs no group lock, however many groups there are.
   */
  queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    return this.transaction(async (client) => {
      const queue = (await client.query<{ queue_id: number }>(sql.queueLockExclusive, [params.queue]))
        .rows[0];
      if (!queue) throw queueNotFound(params.queue);
      const purged = (await client.query(sql.messageDeleteAllOfQueue, [queue.queue_id])).rowCount ?? 0;
      await this.writes.addCounters(client, queue.queue_id, { purged });
      return { purged };
    });
  }

  /**
   * Deletes what is past retention; in a FIFO queue only in the groups it could lock (at most
   * groupLocksMax), handing each group whose head went to its next message. Then forgets dedupIds whose
   * window ended.
   */
  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }> {
    return this.transaction(async (client) => {
      const queue = await this.lockQueueShared(client, params.queue);
      let groups: string[] | null = null;
      if (queue.kind === "fifo") {
        const { rows } = await client.query<{ group_key: string }>(sql.messageSelectExpiredGroups, [
          queue.queueId,
          params.expiredBefore,
          params.max,
        ]);
        groups = [...new Set(rows.map((row) => row.group_key))].slice(0, groupLocksMax);
        await this.writes.lockGroups(
          client,
          groups.map((groupKey) => ({ queueId: queue.queueId, groupKey })),
        );
      }
      const { rows } = await client.query<{ group_key: string | null; head: boolean }>(
        sql.messageDeleteExpired,
        [queue.queueId, params.expiredBefore, params.max, groups],
      );
      if (rows.length > 0) await this.writes.addCounters(client, queue.queueId, { expired: rows.length });
      const heads = rows.filter((row) => row.head).map((row) => row.group_key);
      if ((await this.writes.promoteHeads(client, queue, heads)) > 0)
        this.announceOnCommit(client, queue.name);
      await client.query(sql.dedupDeleteExpired, [queue.queueId, params.now, params.max]);
      return { expired: rows.length };
    });
  }

  /**
   * A redrive step in one transaction (Store.queueMove). The source's candidates and their targets are
   * read first, so that the target queues (in name order), then every FIFO group involved (in one
   * statement), then the message rows are locked, as message-writes.ts orders locks.
   */
  queueMove(params: MoveParams): Promise<MoveResult> {
    return this.transaction(async (client) => {
      const source = await this.lockQueueShared(client, params.queue);
      const { rows: scanned } = await client.query<MessageRow>(sql.messageSelectMovable, [
        source.queueId,
        params.now,
        redriveScanMax,
      ]);
      const { rows: inFlight } = await client.query<MessageRow>(sql.messageSelectInFlightKeys, [
        source.queueId,
        params.now,
      ]);
      const { rows: candidates, held } = notHeldBack(scanned, inFlight, params.max);
      const { moves, stoppedBy } = await this.planMoves(client, candidates, { ...params, source });
      if (moves.length === 0) return { moved: 0, held, targets: [], stoppedBy };
      await this.writes.lockGroups(client, [
        ...(source.kind === "fifo"
          ? moves.map(({ message }) => ({ queueId: source.queueId, groupKey: groupKeyOf(message) }))
          : []),
        ...moves
          .filter(({ target }) => target.queue.kind === "fifo")
          .map(({ message, target }) => ({ queueId: target.queue.queueId, groupKey: groupKeyOf(message) })),
      ]);
      const { rows: lockedRows } = await client.query<MessageRow>(sql.messageSelectMovableBySeqs, [
        source.queueId,
        moves.map(({ seq }) => seq),
        params.now,
      ]);
      // A candidate leased or removed since it was read ends the step there, so order per key holds.
      const still = new Set(lockedRows.map((row) => row.seq));
      const missing = moves.findIndex(({ seq }) => !still.has(seq));
      const moved = missing === -1 ? moves : moves.slice(0, missing);
      if (moved.length === 0) return { moved: 0, held, targets: [], stoppedBy: null };
      // Out of the source first, counted there, so that a target's overflow trim sees the depths as
      // they are (a message moved back into the queue it is in leaves before it arrives).
      const { promoted } = await this.writes.remove(
        client,
        source,
        moved.map(({ seq }) => seq),
      );
      if (promoted > 0) this.announceOnCommit(client, source.name);
      await this.writes.addCounters(client, source.queueId, { redriven: moved.length });
      const targets = [...new Set(moved.map(({ target }) => target))];
      for (const target of targets) {
        const messages = moved.filter((move) => move.target === target).map(({ message }) => message);
        const policy = { dedupWindowMs: 0, overflow: target.policy.overflow };
        const { written } = await this.writes.send(client, target.queue, messages, policy, params.now);
        this.announceOnCommit(client, ...written);
      }
      return {
        moved: moved.length,
        held,
        targets: targets.map((target) => target.queue.name),
        stoppedBy: missing === -1 ? stoppedBy : null,
      };
    });
  }

  /**
   * Decides where each candidate of a redrive step goes, in order, and where the step stops: before
   * the first candidate without a target, with a target that does not exist or has no policy, or with
   * a full target that refuses. Locks the targets, in name order, for writing (a target with a maxDepth
   * for its depth, read once it is locked).
   */
  private async planMoves(
    client: Client,
    candidates: readonly MessageRow[],
    params: {
      to: string | null;
      now: number;
      policies: ReadonlyMap<string, SendPolicy>;
      source: LockedQueue;
    },
  ): Promise<{ moves: PlannedMove[]; stoppedBy: HopperError | null }> {
    const named = candidates.map((row) => {
      const message = toStoredMessage(row);
      const name = redriveTargetOf(params.to, message.headers);
      const moved = {
        ...message,
        body: bodyBytes(message.body),
        publishedAt: params.now,
        visibleAt: params.now,
      };
      return { seq: row.seq, message: moved, name };
    });
    const firstUnnamed = named.findIndex(({ name }) => name === null);
    const names = new Set(named.slice(0, firstUnnamed === -1 ? undefined : firstUnnamed).map((n) => n.name));
    const targets = new Map<string, MoveTarget>();
    for (const name of [...names].filter((n) => n !== null).sort(compareNames)) {
      const policy = params.policies.get(name);
      if (!policy) continue;
      const queue = await this.writes.lockQueue(client, name, policy.overflow ? "depth" : "share");
      if (!queue) continue;
      const depth = policy.overflow ? depthOf(await this.writes.counters(client, queue.queueId)) : 0;
      targets.set(name, { queue, policy, depth });
    }
    const planned = planMoves(
      named.map(({ seq, message }) => ({ ...message, seq })),
      { source: params.source.name, to: params.to, policies: params.policies },
      (name) => targets.get(name)?.depth,
    );
    const moves = planned.moves.map(({ item: { seq, ...message }, target }) => ({
      seq,
      message,
      target: targets.get(target) as MoveTarget,
    }));
    return { moves, stoppedBy: planned.stoppedBy };
  }

  /**
   * Dead-letters the leases that ended in the window having used their last delivery; in a FIFO queue
   * only in the groups it could lock (at most groupLocksMax), locked with the same groups of FIFO
   * dead-letter queues before any row.
   */
  queueDeadLetterExhausted(params: DeadLetterExhaustedParams): Promise<{ deadLettered: number }> {
    return this.transaction(async (client) => {
      const queue = await this.lockQueueShared(client, params.queue);
      const window = [
        queue.queueId,
        params.visibleFrom,
        params.now,
        params.deadLetter.maxDeliveries,
        params.max,
      ];
      let groups: string[] | null = null;
      let targets: LockedQueue[] | undefined;
      if (queue.kind === "fifo") {
        const { rows } = await client.query<{ group_key: string }>(sql.messageSelectExhaustedGroups, window);
        groups = [...new Set(rows.map((row) => row.group_key))].slice(0, groupLocksMax);
        targets = await this.writes.lockTargets(client, params.deadLetter.queues);
        const keys = groups;
        await this.writes.lockGroups(
          client,
          [queue, ...targets.filter((target) => target.kind === "fifo")].flatMap((locked) =>
            keys.map((groupKey) => ({ queueId: locked.queueId, groupKey })),
          ),
        );
      }
      const { rows } = await client.query<MessageRow>(sql.messageSelectExhausted, [...window, groups]);
      const written = await this.writes.deadLetter(
        client,
        rows,
        queue,
        params.deadLetter,
        "max_deliveries",
        params.now,
        targets,
      );
      this.announceOnCommit(client, ...written);
      return { deadLettered: rows.length };
    });
  }

  /** A read in one statement, with no lock: a long poll asks it before it waits. */
  async queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }> {
    const { rows } = await this.statement<{ next: number | null; oldest: number | null }>(
      sql.queueNextEventsByName,
      [params.queue, params.now],
    );
    return { nextVisibleAt: rows[0]?.next ?? null, oldestPublishedAt: rows[0]?.oldest ?? null };
  }

  private async exchangeRow(client: Client, name: string): Promise<ExchangeRow | undefined> {
    return (await client.query<ExchangeRow>(sql.exchangeSelectByName, [name])).rows[0];
  }

  private async lockExchangeShared(client: Client, name: string): Promise<number> {
    const row = (await client.query<{ exchange_id: number }>(sql.exchangeLockShared, [name])).rows[0];
    if (!row) throw exchangeNotFound(name);
    return row.exchange_id;
  }

  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    return this.transaction(async (client) => {
      let existing = (
        await client.query<{ exchange_id: number; type: ExchangeType }>(sql.exchangeLockExclusive, [
          params.name,
        ])
      ).rows[0];
      let created = false;
      if (!existing) {
        const inserted = await client.query(sql.exchangeInsert, [
          params.name,
          params.type,
          params.alternate,
          params.now,
        ]);
        created = inserted.rows.length > 0;
        // A concurrent create won the name: this call becomes an update of that exchange.
        if (!created) existing = (await client.query(sql.exchangeLockExclusive, [params.name])).rows[0];
      }
      if (existing) {
        if (existing.type !== params.type) {
          throw exchangeTypeMismatch(params.name, existing.type);
        }
        await client.query(sql.exchangeUpdateAlternate, [existing.exchange_id, params.alternate]);
      }
      await this.announce(client, { kind: "exchange", exchange: params.name });
      const row = await this.exchangeRow(client, params.name);
      invariant(row, "an upserted exchange exists in its own transaction");
      return { created, exchange: toExchangeRecord(row) };
    });
  }

  async exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    const row = (await this.statement<ExchangeRow>(sql.exchangeSelectByName, [params.name])).rows[0];
    return row && toExchangeRecord(row);
  }

  async exchangeList(): Promise<ExchangeRecord[]> {
    const { rows } = await this.statement<ExchangeRow>(sql.exchangeSelectAll, []);
    return rows.map(toExchangeRecord);
  }

  exchangeDelete(params: { name: string }): Promise<void> {
    return this.transaction(async (client) => {
      const exchange = (await client.query<{ exchange_id: number }>(sql.exchangeLockExclusive, [params.name]))
        .rows[0];
      if (!exchange) {
        throw exchangeNotFound(params.name);
      }
      const sources = (
        await client.query<{ name: string }>(sql.queueSelectDeadLetterExchangeSources, [params.name])
      ).rows.map((row) => row.name);
      if (sources.length > 0) {
        throw exchangeInUse(params.name, sources);
      }
      await client.query(sql.exchangeDelete, [exchange.exchange_id]);
      await client.query(sql.bindingDeleteByDestination, ["exchange", params.name]);
      await this.announce(client, { kind: "exchange", exchange: params.name });
    });
  }

  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }> {
    return this.transaction(async (client) => {
      const exchangeId = await this.lockExchangeShared(client, params.exchange);
      if (params.destination.kind === "queue") await this.lockQueueShared(client, params.destination.name);
      else await this.lockExchangeShared(client, params.destination.name);
      const { rowCount } = await client.query(sql.bindingInsert, [
        exchangeId,
        params.destination.kind,
        params.destination.name,
        params.pattern,
      ]);
      await this.announce(client, { kind: "exchange", exchange: params.exchange });
      return { created: (rowCount ?? 0) > 0 };
    });
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.transaction(async (client) => {
      const exchangeId = await this.lockExchangeShared(client, params.exchange);
      const { rowCount } = await client.query(sql.bindingDelete, [
        exchangeId,
        params.destination.kind,
        params.destination.name,
        params.pattern,
      ]);
      await this.announce(client, { kind: "exchange", exchange: params.exchange });
      return { deleted: (rowCount ?? 0) > 0 };
    });
  }
}
