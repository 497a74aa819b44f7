/**
 * The embedded store: one SQLite file in WAL mode, written through group commit. Reads run at once
 * against the last committed state; writes are jobs of the next group commit.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database, { type Database as Db, type Statement } from "better-sqlite3";
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  exchangeInUse,
  exchangeNotFound,
  exchangeTypeMismatch,
  HopperError,
  invariant,
  queueFull,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import type {
  BindingDestination,
  BindingRecord,
  ExchangeRecord,
  ExchangeType,
} from "../../model/exchange.js";
import {
  bodyBytes,
  type LeasedMessage,
  type MessageState,
  type NewMessage,
  type ReceiptResult,
  type StoredMessage,
} from "../../model/message.js";
import {
  type DeadLetterReason,
  deadLetterHeaders,
  type Handoff,
  handoffRanks,
  type SendPolicy,
} from "../../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type QueueAttributes,
  type QueueCounters,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
  zeroCounters,
} from "../../model/queue.js";
import { decodeReceipt, encodeReceipt } from "../../model/receipts.js";
import type { Random } from "../../random.js";
import { byTarget, notHeldBack, planMoves, redriveScanMax } from "../redrive-order.js";
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
import type { Durability, QueueListPage, QueueSend, SendOutcome, Store, StoreEvent } from "../store.js";
import { Checkpointer, type CheckpointerStats } from "./checkpointer.js";
import { CommitCounter, commitCountPath } from "./commit-count.js";
import { GroupCommit } from "./group-commit.js";
import { bodyCrc, checkDatabaseFiles } from "./integrity.js";
import { migrations } from "./schema.js";
import * as sql from "./statements.js";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:" for tests that need no file. */
  path: string;
  /** "fsync" (default): a commit survives power loss. "os": the OS flushes later; a process crash
   * loses nothing, a power loss may lose the last moments of writes. */
  durability?: Durability;
  random: Random;
  /** PRAGMA quick_check of the file before it is served (default true); false skips it, for a file so
   * large that the check would hold the start for long (docs/reliability.md). */
  integrityCheck?: boolean;
}

interface ExchangeRow {
  exchange_id: number;
  name: string;
  type: ExchangeType;
  alternate: string | null;
  created_at: number;
}

type MoveParams = Parameters<Store["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<Store["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<Store["queueDeadLetterExhausted"]>[0];

/** SQLite keeps attributes as JSON text. */
type SqliteQueueRow = QueueRow<string>;

/** What the paths of every message need of their queue (sql.queueRefByName): 3-5 µs to read, against 11 for the whole row. */
type QueueRef = Pick<SqliteQueueRow, "queue_id" | "name" | "kind">;

/** A message row as SQLite keeps it: with the checksum of its body, and whether it failed it. */
interface SqliteMessageRow extends MessageRow {
  /** CRC-32 of the body as stored; null on a row stored before checksums were kept. */
  body_crc: number | null;
  /** 1 once its body failed the checksum and it stayed in its queue (no dead-letter target). */
  corrupt: number;
}

/** Whether the row's body is still what was stored: its checksum matches, or it has none to check. */
function bodyIntact(row: SqliteMessageRow): boolean {
  return row.body_crc === null || bodyCrc(row.body) === row.body_crc;
}

/** The checksum a copy of the row (a dead letter) keeps, and whether it is marked corrupt. */
interface BodyIntegrity {
  bodyCrc: number | null;
  corrupt: boolean;
}

/** The queue read by name, or queue_not_found. */
function found<Row>(row: Row | undefined, name: string): Row {
  if (!row) throw queueNotFound(name);
  return row;
}

function toSqliteQueueRecord(row: SqliteQueueRow): QueueRecord {
  return toQueueRecord({ ...row, attributes: JSON.parse(row.attributes) as QueueAttributes });
}

/** A message row read as an array of sql.messageColumns, in their order. */
function toMessageRow(values: unknown[]): SqliteMessageRow {
  return {
    seq: values[0] as number,
    queue_id: values[1] as number,
    id: values[2] as string,
    body: values[3] as Buffer | string,
    content_type: values[4] as string,
    headers: values[5] as string | null,
    key: values[6] as string | null,
    published_at: values[7] as number,
    visible_at: values[8] as number,
    delivery_count: values[9] as number,
    first_delivered_at: values[10] as number | null,
    lease_token: values[11] as number | null,
    priority: values[12] as number,
    dedup_id: values[13] as string | null,
    group_key: values[14] as string | null,
    head: values[15] as number,
    body_crc: values[16] as number | null,
    corrupt: values[17] as number,
  };
}

export class SqliteStore implements Store {
  /** One connection, one group commit: writes run and commit in the order they were called. */
  readonly commitsInCallOrder = true;
  private readonly db: Db;
  private readonly writes: GroupCommit;
  private readonly random: Random;
  private readonly statements = new Map<string, Statement>();
  private readonly rawStatements = new Map<string, Statement>();
  /** Per queue id, at least the messages in flight (see inFlightAtMost). */
  private readonly inFlightBounds = new Map<number, number>();
  private readonly checkpointer: Checkpointer | undefined;
  private readonly commitCounter: CommitCounter | undefined;

  constructor(options: SqliteStoreOptions) {
    const onFile = options.path !== ":memory:";
    // Durability "os" leaves the WAL unsynced, so after a power loss its last commits may be lost by
    // design: a commit count behind its side file could not be told from damage (commit-count.ts).
    const countCommits = onFile && options.durability !== "os";
    if (onFile) {
      mkdirSync(dirname(options.path), { recursive: true });
      checkDatabaseFiles(options.path, {
        integrityCheck: options.integrityCheck ?? true,
        commitCount: countCommits,
      });
    }
    this.db = new Database(options.path);
    this.db.pragma("journal_mode = WAL");
    // FULL fsyncs the WAL on every commit; NORMAL leaves the flush to the OS (durability "os").
    this.db.pragma(`synchronous = ${options.durability === "os" ? "NORMAL" : "FULL"}`);
    this.db.pragma("busy_timeout = 5000");
    // Each group-commit job runs in a savepoint, so SQLite copies every page a job first changes into a
    // sub-journal; in memory that is a memcpy, in the default temporary file a write per page. (W3 drain:
    // 35 against 39-42 µs of server CPU per message, docs/benchmarks.md.)
    this.db.pragma("temp_store = MEMORY");
    this.random = options.random;
    this.migrate();
    this.commitCounter = countCommits ? new CommitCounter(this.db, commitCountPath(options.path)) : undefined;
    this.writes = new GroupCommit(this.db, limits.commitMessagesMax, this.commitCounter);
    if (onFile) {
      // Checkpoints run on their own thread (checkpointer.ts); this connection's own is a backstop.
      this.db.pragma(`wal_autocheckpoint = ${limits.walBackstopPages}`);
      this.checkpointer = new Checkpointer(options.path, limits.checkpointIntervalMs);
    }
  }

  /** Checkpoints made off the event loop (undefined for a store in memory, which has no WAL). */
  get checkpointStats(): CheckpointerStats | undefined {
    return this.checkpointer && { ...this.checkpointer.stats };
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

  /** Runs a statement that selects sql.messageColumns, reading its rows as arrays. */
  private messageRows(text: string, params: object): SqliteMessageRow[] {
    let statement = this.rawStatements.get(text);
    if (!statement) {
      statement = this.db.prepare(text).raw(true);
      this.rawStatements.set(text, statement);
    }
    return (statement.all(params) as unknown[][]).map(toMessageRow);
  }

  async ping(): Promise<void> {
    this.stmt("SELECT 1").get();
  }

  async close(): Promise<void> {
    this.writes.close();
    await this.checkpointer?.close();
    this.db.close();
    this.commitCounter?.close();
  }

  /** One process owns the file, so no change ever comes from elsewhere. */
  watch(_listener: (event: StoreEvent) => void): void {}

  async housekeepingLeader(): Promise<boolean> {
    return true;
  }

  /** One process owns the file: its own subscribers already have the signal. */
  async signalBroadcast(_params: { channel: string; dataJson: string }): Promise<void> {}

  private queueRow(name: string): SqliteQueueRow | undefined {
    return this.stmt(sql.queueSelectByName).get({ name }) as SqliteQueueRow | undefined;
  }

  private requireQueue(name: string): SqliteQueueRow {
    return found(this.queueRow(name), name);
  }

  private queueRef(name: string): QueueRef | undefined {
    return this.stmt(sql.queueRefByName).get({ name }) as QueueRef | undefined;
  }

  private requireQueueRef(name: string): QueueRef {
    return found(this.queueRef(name), name);
  }

  private addCounters(queueId: number, deltas: Partial<QueueCounters>): void {
    this.stmt(sql.queueAddCounters).run({ queueId, ...zeroCounters, ...deltas });
  }

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.writes.run(() => {
      this.checkDeadLetterTarget(params.name, params.attributes);
      const attributes = JSON.stringify(params.attributes);
      const existing = this.queueRow(params.name);
      if (existing) {
        if (existing.kind !== params.kind) {
          throw queueKindMismatch(params.name, existing.kind);
        }
        this.stmt(sql.queueUpdateAttributes).run({ queueId: existing.queue_id, attributes });
        return { created: false, queue: toSqliteQueueRecord(this.requireQueue(params.name)) };
      }
      const { n } = this.stmt(sql.queueCount).get() as { n: number };
      if (n >= limits.queuesMax) throw new HopperError("too_many_queues");
      this.stmt(sql.queueInsert).run({
        name: params.name,
        kind: params.kind,
        attributes,
        createdAt: params.now,
      });
      return { created: true, queue: toSqliteQueueRecord(this.requireQueue(params.name)) };
    });
  }

  async queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    const row = this.queueRow(params.name);
    return row && toSqliteQueueRecord(row);
  }

  async queueList(): Promise<QueueRecord[]> {
    return (this.stmt(sql.queueSelectAll).all() as SqliteQueueRow[]).map(toSqliteQueueRecord);
  }

  /**
   * Deletes the queue with its messages, dedupIds and the bindings to it. The messages stored before
   * it began go in steps of limits.purgeStepMax, each its own commit and counted as purged (so the
   * counters stay exact if the delete is refused midway: rule 21); the last step takes the rest and
   * the queue. Refused, changing nothing, while another queue dead-letters into it. If a concurrent
   * delete took the queue meanwhile, this one ends with what it removed until then.
   */
  async queueDelete(params: { name: string }): Promise<{ removed: number }> {
    const removed = await this.inSteps(params.name, (queue, lastSeq) => {
      this.refuseDeadLetterTarget(params.name);
      const queueId = queue.queue_id;
      const deleted = this.deleteStep(queue, lastSeq);
      if (deleted === limits.purgeStepMax) {
        this.addCounters(queueId, { purged: deleted });
        return { removed: deleted, done: false };
      }
      const rest = this.stmt(sql.messageDeleteAllOfQueue).run({ queueId }).changes;
      this.stmt(sql.dedupDeleteAllOfQueue).run({ queueId });
      this.stmt(sql.queueDelete).run({ queueId });
      this.stmt(sql.bindingDeleteByDestination).run({ destinationKind: "queue", destination: params.name });
      return { removed: deleted + rest, done: true };
    });
    return { removed };
  }

  /**
   * Runs `step` in commits of its own, one after another, until it says it is done, and answers the
   * messages the steps removed: a purge or a queue delete (rule 20a). The first step finds the queue
   * or throws queue_not_found and fixes the bound every step deletes up to; a later step that finds
   * the queue gone (a concurrent delete took it) ends the run with what was removed until then.
   */
  private async inSteps(
    name: string,
    step: (queue: SqliteQueueRow, lastSeq: number) => { removed: number; done: boolean },
  ): Promise<number> {
    let lastSeq: number | undefined;
    let removed = 0;
    for (;;) {
      const outcome = await this.writes.run(() => {
        const queue = lastSeq === undefined ? this.requireQueue(name) : this.queueRow(name);
        if (!queue) return { removed: 0, done: true };
        lastSeq ??= this.lastSeq();
        return step(queue, lastSeq);
      });
      removed += outcome.removed;
      if (outcome.done) return removed;
    }
  }

  private refuseDeadLetterTarget(name: string): void {
    const sources = (this.stmt(sql.queueSelectDeadLetterSources).all({ name }) as { name: string }[])
      .map((row) => row.name)
      .filter((source) => source !== name);
    if (sources.length > 0) {
      throw queueInUse(name, sources);
    }
  }

  /** The highest seq of any queue: every message stored before now is at or below it. */
  private lastSeq(): number {
    return (this.stmt(sql.messageLastSeq).get() as { last: number | null }).last ?? 0;
  }

  /**
   * One step of a purge or a delete: deletes up to limits.purgeStepMax of the queue's messages at or
   * below lastSeq, and gives each FIFO group whose older messages went its next message (one sent
   * since, above lastSeq) as head. Counts nothing; answers how many it deleted.
   */
  private deleteStep(queue: SqliteQueueRow, lastSeq: number): number {
    const queueId = queue.queue_id;
    const { changes } = this.stmt(sql.messageDeleteStep).run({
      queueId,
      lastSeq,
      limit: limits.purgeStepMax,
    });
    if (queue.kind === "fifo") {
      const groups = this.stmt(sql.groupsAfterSeq).all({ queueId, afterSeq: lastSeq }) as {
        group_key: string;
      }[];
      for (const { group_key } of groups) this.promoteHead(queueId, group_key);
    }
    return changes;
  }

  /**
   * Counts only what is not visible now; the rest of the counters' depth is available (depthByState).
   */
  async queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    const queue = this.requireQueue(params.name);
    const queueId = queue.queue_id;
    const { delayed, inFlight } = this.stmt(sql.messageCountNotVisible).get({ queueId, now: params.now }) as {
      delayed: number;
      inFlight: number;
    };
    const { oldest } = this.stmt(sql.messageOldestPublishedAt).get({ queueId }) as { oldest: number | null };
    const { n: corrupt } = this.stmt(sql.messageCountCorrupt).get({ queueId }) as { n: number };
    return depthByState(toQueueCounters(queue), { delayed, inFlight, corrupt }, oldest);
  }

  async queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]> {
    // Every name sorts after the empty one; SQLite takes a negative LIMIT as none.
    const page = { now: params.now, after: params.after ?? "", limit: params.limit ?? -1 };
    const rows = this.stmt(sql.queueSelectAllWithDepth).all(page) as (SqliteQueueRow & DepthColumns)[];
    return rows.map((row) => withDepth(row, toSqliteQueueRecord));
  }

  queueSendMany(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]> {
    const messages = params.sends.reduce((total, send) => total + send.messages.length, 0);
    return this.writes.run(() => params.sends.map((send) => this.sendOne(send, params.now)), messages);
  }

  /** One queue's part of a send: deduplication, then the overflow check, the inserts, the trim. */
  private sendOne(send: QueueSend, now: number): SendOutcome {
    const queue = this.requireQueueRef(send.queue);
    const ranks = queue.kind === "standard" ? handoffRanks(send, now) : undefined;
    if (ranks && send.handoff) return this.sendHandingOff(queue, send.messages, ranks, send.handoff, now);
    const { dedupWindowMs, overflow } = send.policy;
    // Decide duplicates before writing anything, so that a refused send writes nothing.
    const seen = new Map<string, string>();
    const ids = send.messages.map((message) => {
      if (message.dedupId === null || dedupWindowMs === 0) return message.id;
      const earlier =
        seen.get(message.dedupId) ??
        (
          this.stmt(sql.dedupSelect).get({ queueId: queue.queue_id, dedupId: message.dedupId, now }) as
            | { message_id: string }
            | undefined
        )?.message_id;
      if (earlier !== undefined) return earlier;
      seen.set(message.dedupId, message.id);
      return message.id;
    });
    const stored = send.messages.filter((message, i) => ids[i] === message.id);
    if (overflow?.policy === "reject" && stored.length > 0) {
      const depth = depthOf(toQueueCounters(this.requireQueue(send.queue)));
      if (depth + stored.length > overflow.maxDepth) {
        throw queueFull(send.queue, overflow.maxDepth, depth);
      }
    }
    for (const message of stored) {
      this.insertMessage(queue, message);
      if (message.dedupId !== null && dedupWindowMs > 0) {
        this.stmt(sql.dedupUpsert).run({
          queueId: queue.queue_id,
          dedupId: message.dedupId,
          messageId: message.id,
          expiresAt: now + dedupWindowMs,
        });
      }
    }
    if (stored.length > 0) this.addCounters(queue.queue_id, { published: stored.length });
    this.trimOverflow(send.queue, send.policy, now);
    return { ids, leased: [] };
  }

  /**
   * A send into a standard queue with neither deduplication nor overflow, whose hand-off takes the
   * messages ranked 1 to its in-flight room, inserted already leased.
   */
  private sendHandingOff(
    queue: QueueRef,
    messages: NewMessage[],
    ranks: number[],
    handoff: Handoff,
    now: number,
  ): SendOutcome {
    const queueId = queue.queue_id;
    const inFlight = this.inFlightAtMost(queueId, now, handoff.max, handoff.inFlightMax);
    const room = Math.max(0, Math.min(handoff.max, handoff.inFlightMax - inFlight));
    // As a lease's (queueLease): 40 random bits, and the rank added, so the tokens of one call differ.
    const tokenBase = Math.floor(this.random.uint48() / 2 ** 8);
    const leased: LeasedMessage[] = [];
    messages.forEach((message, index) => {
      const rank = ranks[index] ?? 0;
      if (rank === 0 || rank > room) {
        this.insertMessage(queue, message);
        return;
      }
      const lease = { visibleAt: handoff.leaseExpiresAt, firstDeliveredAt: now, token: tokenBase + rank };
      const seq = this.insertMessage(queue, message, lease);
      leased[rank - 1] = {
        ...message,
        visibleAt: lease.visibleAt,
        deliveryCount: 1,
        firstDeliveredAt: now,
        receipt: encodeReceipt(seq, lease.token),
      };
    });
    this.addCounters(queueId, { published: messages.length, delivered: leased.length });
    this.inFlightBounds.set(queueId, inFlight + leased.length);
    return { ids: messages.map((message) => message.id), leased };
  }

  /**
   * Applies drop-oldest or dead-letter-oldest: removes the oldest messages (by arrival, in any state)
   * until the queue holds at most maxDepth, at most limits.overflowTrimMax of them.
   */
  private trimOverflow(name: string, policy: SendPolicy, now: number): void {
    const overflow = policy.overflow;
    if (!overflow || overflow.policy === "reject") return;
    const queue = this.requireQueue(name);
    const excess = depthOf(toQueueCounters(queue)) - overflow.maxDepth;
    if (excess <= 0) return;
    // Bounded, as every loop: a maxDepth lowered far below the depth is reached over several sends.
    const limit = Math.min(excess, limits.overflowTrimMax);
    const rows = this.messageRows(sql.messageSelectOldest, { queueId: queue.queue_id, limit });
    if (overflow.policy === "dead-letter-oldest" && overflow.deadLetter) {
      for (const row of rows) this.deadLetterRow(row, queue, overflow.deadLetter, now, "max_depth");
      return;
    }
    for (const row of rows) this.deleteRow(queue, row.seq);
    this.addCounters(queue.queue_id, { dropped: rows.length });
  }

  /**
   * Inserts one message. In a FIFO queue it joins the group of its key ("" without one) and is the
   * group's head if the group holds no other message; FIFO queues have no priorities.
   */
  private insertMessage(
    queue: QueueRef,
    message: NewMessage,
    lease?: { visibleAt: number; firstDeliveredAt: number; token: number },
    integrity?: BodyIntegrity,
  ): number {
    const hasHeaders = Object.keys(message.headers).length > 0;
    const fifo = queue.kind === "fifo";
    const groupKey = fifo ? (message.key ?? "") : null;
    const head = fifo && !this.stmt(sql.groupHasMessage).get({ queueId: queue.queue_id, groupKey }) ? 1 : 0;
    // The column is a STRICT BLOB: a JSON body given as text is written as its bytes.
    const body = bodyBytes(message.body);
    return this.stmt(sql.messageInsert).run({
      queueId: queue.queue_id,
      id: message.id,
      body,
      // A copy keeps its original's checksum: a body damaged before it was copied stays detectably so.
      bodyCrc: integrity ? integrity.bodyCrc : bodyCrc(body),
      corrupt: integrity?.corrupt ? 1 : 0,
      contentType: message.contentType,
      headers: hasHeaders ? JSON.stringify(message.headers) : null,
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
  }

  /** Deletes one message; if it was a FIFO group's head, the next message of the group becomes it. */
  private deleteRow(queue: QueueRef, seq: number): void {
    const deleted = this.stmt(sql.messageDelete).get({ seq }) as { group_key: string | null } | undefined;
    if (deleted && deleted.group_key !== null) this.promoteHead(queue.queue_id, deleted.group_key);
  }

  private promoteHead(queueId: number, groupKey: string): void {
    this.stmt(sql.groupPromoteHead).run({ queueId, groupKey });
  }

  /**
   * Moves one message row to its dead-letter queues, as a new message in each, with the headers that
   * say why. A target queue deleted since the route was resolved is skipped; with no target left the
   * message is dropped, and counted as dead-lettered either way. Dead letters are never refused by a
   * full target.
   */
  private deadLetterRow(
    row: SqliteMessageRow,
    source: QueueRef,
    route: DeadLetterRoute,
    now: number,
    reason: DeadLetterReason = "max_deliveries",
  ): void {
    const message = toStoredMessage(row);
    const headers = deadLetterHeaders(message, source.name, reason);
    const copy = { ...message, body: bodyBytes(message.body), headers, publishedAt: now, visibleAt: now };
    // A damaged body is never delivered from the dead-letter queue either: the copy arrives marked.
    const integrity = {
      bodyCrc: row.body_crc,
      corrupt: reason === "corrupt" || row.corrupt === 1 || !bodyIntact(row),
    };
    for (const name of route.queues) {
      const target = this.queueRef(name);
      if (!target) continue;
      this.insertMessage(target, copy, undefined, integrity);
      this.addCounters(target.queue_id, { published: 1 });
    }
    this.deleteRow(source, row.seq);
    this.addCounters(source.queue_id, { deadLettered: 1 });
  }

  /** A queue's dead-letter target must exist when it is set: a queue, or an exchange. */
  private checkDeadLetterTarget(queueName: string, attributes: QueueAttributes): void {
    const target = attributes.deadLetter;
    if (!target) return;
    if ("queue" in target) {
      if (target.queue !== queueName && !this.queueRef(target.queue)) {
        throw deadLetterQueueNotFound(target.queue);
      }
    } else if (!this.exchangeRow(target.exchange)) {
      throw deadLetterExchangeNotFound(target.exchange);
    }
  }

  queueLease(params: {
    queue: string;
    max: number;
    now: number;
    leaseExpiresAt: number;
    expiredBefore: number;
    inFlightMax: number;
    deadLetter: DeadLetterRoute | null;
    autoAck?: boolean;
  }): Promise<{ messages: LeasedMessage[]; deadLettered: number; corrupt: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
      const queueId = queue.queue_id;
      const inFlight = this.inFlightAtMost(queueId, params.now, params.max, params.inFlightMax);
      const wanted = Math.min(params.max, params.inFlightMax - inFlight);
      const messages: LeasedMessage[] = [];
      let deadLettered = 0;
      let redelivered = 0;
      let corrupt = 0;
      // Each pass either leases or dead-letters every candidate it reads, so the loop ends; the bound
      // keeps a queue full of exhausted messages from holding one transaction for long.
      // A lease that ends at once (a visibility timeout of 0) leaves its messages available: a second
      // pass would hand them out again, so it gets one pass.
      const passes = params.leaseExpiresAt > params.now ? limits.leasePassesMax : 1;
      for (let pass = 0; pass < passes && messages.length < wanted; pass++) {
        const candidates = this.candidates(queue, params.now, params.expiredBefore, wanted - messages.length);
        if (candidates.length === 0) break;
        const toLease: MessageRow[] = [];
        for (const row of candidates) {
          if (!bodyIntact(row)) {
            corrupt++;
            if (this.withholdCorrupt(row, queue, params.deadLetter, params.now)) deadLettered++;
          } else if (params.deadLetter && row.delivery_count >= params.deadLetter.maxDeliveries) {
            this.deadLetterRow(row, queue, params.deadLetter, params.now);
            deadLettered++;
          } else {
            toLease.push(row);
          }
        }
        if (toLease.length === 0) continue;
        // 40 random bits: with the seq added the token stays below 2^53, exact as a JavaScript number.
        const tokenBase = Math.floor(this.random.uint48() / 2 ** 8);
        const { changes } = this.stmt(sql.messageLeaseMany).run({
          seqs: JSON.stringify(toLease.map((row) => row.seq)),
          leaseExpiresAt: params.leaseExpiresAt,
          tokenBase,
          now: params.now,
        });
        // The rows were read in this transaction, which no other write can enter.
        invariant(changes === toLease.length, `a lease changed ${changes} of ${toLease.length} rows`);
        for (const row of toLease) {
          // What messageLeaseMany wrote: one more delivery, and the first delivery time kept if set.
          const deliveryCount = row.delivery_count + 1;
          if (deliveryCount > 1) redelivered++;
          messages.push({
            ...toStoredMessage(row),
            visibleAt: params.leaseExpiresAt,
            deliveryCount,
            firstDeliveredAt: row.first_delivered_at ?? params.now,
            receipt: encodeReceipt(row.seq, tokenBase + row.seq),
          });
        }
      }
      if (messages.length > 0) this.addCounters(queueId, { delivered: messages.length, redelivered });
      if (!params.autoAck) this.inFlightBounds.set(queueId, inFlight + messages.length);
      if (params.autoAck && messages.length > 0) {
        for (const message of messages) this.deleteRow(queue, decodeReceipt(message.receipt)?.seq ?? -1);
        this.addCounters(queueId, { acked: messages.length });
      }
      return { messages, deadLettered, corrupt };
    }, params.max);
  }

  /**
   * Keeps a message whose body failed its checksum from being delivered: to its dead-letter target
   * with reason corrupt (answers true), or, with none, marked corrupt where it is, never leased again.
   */
  private withholdCorrupt(
    row: SqliteMessageRow,
    queue: QueueRef,
    deadLetter: DeadLetterRoute | null,
    now: number,
  ): boolean {
    if (deadLetter) {
      this.deadLetterRow(row, queue, deadLetter, now, "corrupt");
      return true;
    }
    this.stmt(sql.messageMarkCorrupt).run({ seq: row.seq, now });
    return false;
  }

  /**
   * The queue's messages in flight, or more. Counting them reads every in-flight entry of the index
   * (44 µs for 1,000), so a lease counts only when the ceiling could bind: it keeps, per queue, the
   * last count plus what it leased since. Only this store's leases and hand-offs put messages in flight, and acks,
   * nacks and ended leases only take them out, so that sum never falls below the true count; while it
   * leaves room for `max` more, the exact count would allow `max` too. An extend can take an ended
   * lease back in flight, so it drops the queue's sum and the next lease counts. (A clock stepping
   * back could do the same to ended leases; the ceiling is a guard against runaway consumers, and
   * would then let through at most the leases that ended within the step.)
   */
  private inFlightAtMost(queueId: number, now: number, max: number, inFlightMax: number): number {
    const bound = this.inFlightBounds.get(queueId);
    if (bound !== undefined && bound + max <= inFlightMax) return bound;
    const { n } = this.stmt(sql.messageCountInFlight).get({ queueId, now }) as { n: number };
    return n;
  }

  /**
   * The next messages a lease may take, in the order it takes them: a FIFO queue's available group
   * heads; a standard queue's available messages above priority 0, highest first, then those of
   * priority 0, each in visibility order.
   */
  private candidates(queue: QueueRef, now: number, expiredBefore: number, limit: number): SqliteMessageRow[] {
    const args = { queueId: queue.queue_id, now, expiredBefore, limit };
    if (queue.kind === "fifo") return this.messageRows(sql.messageSelectAvailableHeads, args);
    const prioritized = this.messageRows(sql.messageSelectAvailablePrioritized, args);
    if (prioritized.length >= limit) return prioritized;
    const rest = this.messageRows(sql.messageSelectAvailable, { ...args, limit: limit - prioritized.length });
    return prioritized.length === 0 ? rest : [...prioritized, ...rest];
  }

  /** Runs `apply` for each receipt that names the latest lease of a row of the queue. */
  private forEachReceipt(
    queue: QueueRef,
    receipts: string[],
    apply: (row: SqliteMessageRow) => void,
  ): ReceiptResult[] {
    // A receipt that appears twice in one batch counts once; its repeat is stale, as in a later call.
    const seen = new Set<number>();
    return receipts.map((receipt): ReceiptResult => {
      const decoded = decodeReceipt(receipt);
      if (!decoded) return { error: "invalid_receipt" };
      const [row] = this.messageRows(sql.messageSelectByReceipt, { ...decoded, queueId: queue.queue_id });
      if (!row || seen.has(row.seq)) return { error: "stale_receipt" };
      seen.add(row.seq);
      apply(row);
      return { ok: true };
    });
  }

  queueAck(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
      let acked = 0;
      // One statement per receipt: the delete checks the receipt itself, reading no body. A receipt
      // given twice in one batch finds its row gone the second time: stale, as in a later call.
      const results = params.receipts.map((receipt): ReceiptResult => {
        const decoded = decodeReceipt(receipt);
        if (!decoded) return { error: "invalid_receipt" };
        const args = { ...decoded, queueId: queue.queue_id };
        if (queue.kind === "fifo") {
          const deleted = this.stmt(sql.messageDeleteByReceiptInGroup).get(args) as
            | { group_key: string }
            | undefined;
          if (!deleted) return { error: "stale_receipt" };
          this.promoteHead(queue.queue_id, deleted.group_key);
        } else if (this.stmt(sql.messageDeleteByReceipt).run(args).changes === 0) {
          return { error: "stale_receipt" };
        }
        acked++;
        return { ok: true };
      });
      if (acked > 0) this.addCounters(queue.queue_id, { acked });
      return results;
    }, params.receipts.length);
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
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
    }, params.receipts.length);
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
      this.inFlightBounds.delete(queue.queue_id);
      return this.forEachReceipt(queue, params.receipts, (row) => {
        this.stmt(sql.messageExtendByReceipt).run({
          seq: row.seq,
          queueId: queue.queue_id,
          leaseToken: row.lease_token,
          leaseExpiresAt: params.leaseExpiresAt,
        });
      });
    }, params.receipts.length);
  }

  async queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    const queueId = this.requireQueueRef(params.queue).queue_id;
    const statement = {
      available: sql.messagePeekAvailable,
      delayed: sql.messagePeekDelayed,
      "in-flight": sql.messagePeekInFlight,
    }[params.state];
    const rows = this.messageRows(statement, { queueId, now: params.now, limit: params.limit });
    // A peek reads and writes nothing: a damaged body it finds is shown as such, and marked by the
    // lease that next reaches it.
    return rows.map((row) =>
      row.corrupt === 1 || !bodyIntact(row)
        ? { ...toStoredMessage(row), corrupt: true }
        : toStoredMessage(row),
    );
  }

  /**
   * Deletes the messages stored before the purge began, in steps (deleteStep), each its own commit,
   * so that other calls run between them. A send made meanwhile may land on either side of the bound.
   * A queue deleted during the purge ends it with what was purged until then.
   */
  async queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    const purged = await this.inSteps(params.queue, (queue, lastSeq) => {
      const deleted = this.deleteStep(queue, lastSeq);
      if (deleted > 0) this.addCounters(queue.queue_id, { purged: deleted });
      return { removed: deleted, done: deleted < limits.purgeStepMax };
    });
    return { purged };
  }

  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
      const queueId = queue.queue_id;
      const deleted = this.stmt(sql.messageDeleteExpired).all({
        queueId,
        expiredBefore: params.expiredBefore,
        limit: params.max,
      }) as { group_key: string | null }[];
      const groups = new Set(deleted.map((row) => row.group_key).filter((key) => key !== null));
      for (const groupKey of groups) this.promoteHead(queueId, groupKey);
      if (deleted.length > 0) this.addCounters(queueId, { expired: deleted.length });
      this.stmt(sql.dedupDeleteExpired).run({ queueId, now: params.now });
      return { expired: deleted.length };
    });
  }

  queueMove(params: MoveParams): Promise<MoveResult> {
    return this.writes.run(() => {
      const source = this.requireQueue(params.queue);
      const args = { queueId: source.queue_id, now: params.now };
      const scanned = this.messageRows(sql.messageSelectMovable, { ...args, limit: redriveScanMax });
      // A damaged body is not moved: it stays in the source, marked, where a purge removes it.
      const candidates: SqliteMessageRow[] = [];
      for (const row of scanned) {
        if (bodyIntact(row)) candidates.push(row);
        else this.stmt(sql.messageMarkCorrupt).run({ seq: row.seq, now: params.now });
      }
      const inFlight = this.stmt(sql.messageSelectInFlightKeys).all(args) as MessageRow[];
      const { rows, held } = notHeldBack(candidates, inFlight, params.max);
      const { moves, stoppedBy } = planMoves(
        rows.map((row) => ({ ...toStoredMessage(row), seq: row.seq })),
        { ...params, source: source.name },
        (name) => {
          const target = this.queueRow(name);
          return target && depthOf(toQueueCounters(target));
        },
      );
      for (const { item } of moves) this.deleteRow(source, item.seq);
      if (moves.length > 0) this.addCounters(source.queue_id, { redriven: moves.length });
      const targets = byTarget(moves);
      for (const [name, { policy, items }] of targets) {
        const target = this.requireQueueRef(name);
        for (const { seq: _, ...message } of items) {
          const moved = {
            ...message,
            body: bodyBytes(message.body),
            publishedAt: params.now,
            visibleAt: params.now,
          };
          this.insertMessage(target, moved);
        }
        this.addCounters(target.queue_id, { published: items.length });
        this.trimOverflow(name, policy, params.now);
      }
      return { moved: moves.length, held, targets: [...targets.keys()], stoppedBy };
    });
  }

  queueDeadLetterExhausted(params: DeadLetterExhaustedParams): Promise<{ deadLettered: number }> {
    return this.writes.run(() => {
      const queue = this.requireQueueRef(params.queue);
      const rows = this.messageRows(sql.messageSelectExhausted, {
        queueId: queue.queue_id,
        visibleFrom: params.visibleFrom,
        now: params.now,
        maxDeliveries: params.deadLetter.maxDeliveries,
        limit: params.max,
      });
      for (const row of rows) this.deadLetterRow(row, queue, params.deadLetter, params.now);
      return { deadLettered: rows.length };
    });
  }

  async queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }> {
    const queue = this.queueRef(params.queue);
    if (!queue) return { nextVisibleAt: null, oldestPublishedAt: null };
    const queueId = queue.queue_id;
    const { next } = this.stmt(sql.messageNextVisibleAt).get({ queueId, now: params.now }) as {
      next: number | null;
    };
    const { oldest } = this.stmt(sql.messageOldestPublishedAt).get({ queueId }) as { oldest: number | null };
    return { nextVisibleAt: next, oldestPublishedAt: oldest };
  }

  private exchangeRow(name: string): ExchangeRow | undefined {
    return this.stmt(sql.exchangeSelectByName).get({ name }) as ExchangeRow | undefined;
  }

  private requireExchange(name: string): ExchangeRow {
    const row = this.exchangeRow(name);
    if (!row) throw exchangeNotFound(name);
    return row;
  }

  private toExchangeRecord(row: ExchangeRow): ExchangeRecord {
    const rows = this.stmt(sql.bindingSelectByExchange).all({ exchangeId: row.exchange_id }) as {
      destination_kind: BindingDestination["kind"];
      destination: string;
      pattern: string;
    }[];
    const bindings = rows.map(
      (binding): BindingRecord => ({
        destination: { kind: binding.destination_kind, name: binding.destination },
        pattern: binding.pattern,
      }),
    );
    return { name: row.name, type: row.type, alternate: row.alternate, createdAt: row.created_at, bindings };
  }

  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    return this.writes.run(() => {
      const existing = this.exchangeRow(params.name);
      if (existing) {
        if (existing.type !== params.type) {
          throw exchangeTypeMismatch(params.name, existing.type);
        }
        this.stmt(sql.exchangeUpdateAlternate).run({
          exchangeId: existing.exchange_id,
          alternate: params.alternate,
        });
      } else {
        this.stmt(sql.exchangeInsert).run({
          name: params.name,
          type: params.type,
          alternate: params.alternate,
          createdAt: params.now,
        });
      }
      return { created: !existing, exchange: this.toExchangeRecord(this.requireExchange(params.name)) };
    });
  }

  async exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    const row = this.exchangeRow(params.name);
    return row && this.toExchangeRecord(row);
  }

  async exchangeList(): Promise<ExchangeRecord[]> {
    return (this.stmt(sql.exchangeSelectAll).all() as ExchangeRow[]).map((row) => this.toExchangeRecord(row));
  }

  exchangeDelete(params: { name: string }): Promise<void> {
    return this.writes.run(() => {
      const exchange = this.requireExchange(params.name);
      const sources = (
        this.stmt(sql.queueSelectDeadLetterExchangeSources).all({ name: params.name }) as { name: string }[]
      ).map((row) => row.name);
      if (sources.length > 0) {
        throw exchangeInUse(params.name, sources);
      }
      this.stmt(sql.exchangeDelete).run({ exchangeId: exchange.exchange_id });
      this.stmt(sql.bindingDeleteByDestination).run({
        destinationKind: "exchange",
        destination: params.name,
      });
    });
  }

  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }> {
    return this.writes.run(() => {
      const exchange = this.requireExchange(params.exchange);
      if (params.destination.kind === "queue") this.requireQueueRef(params.destination.name);
      else this.requireExchange(params.destination.name);
      const { changes } = this.stmt(sql.bindingInsert).run({
        exchangeId: exchange.exchange_id,
        destinationKind: params.destination.kind,
        destination: params.destination.name,
        pattern: params.pattern,
      });
      return { created: changes > 0 };
    });
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.writes.run(() => {
      const exchange = this.requireExchange(params.exchange);
      const { changes } = this.stmt(sql.bindingDelete).run({
        exchangeId: exchange.exchange_id,
        destinationKind: params.destination.kind,
        destination: params.destination.name,
        pattern: params.pattern,
      });
      return { deleted: changes > 0 };
    });
  }
}
