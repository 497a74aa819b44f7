/**
 * The shared store: any number of broker nodes over one PostgreSQL database. Each call is one
 * transaction on a pooled connection; PostgreSQL itself shares one WAL flush among transactions that
 * commit together, so concurrency gives group commit. Leasing uses FOR UPDATE SKIP LOCKED, so nodes
 * never hand out the same message. One more connection per node LISTENs for other nodes' changes and
 * holds the housekeeping lock while this node leads.
 *
 * This file composes the parts and owns their lifetime: the pool (database.ts), the queues
 * (queue-store.ts and the queue-*.ts files it uses), the exchanges (exchange-store.ts), the inboxes
 * (inbox-store.ts and the inbox-*.ts files it uses) and the link between nodes (cluster-link.ts,
 * events.ts).
 */
import type { Random } from "../../random.js";
import type { Store, StoreEvent } from "../store.js";
import { PostgresClusterLink } from "./cluster-link.js";
import { PostgresDatabase } from "./database.js";
import { PostgresExchangeStore } from "./exchange-store.js";
import { PostgresInboxStore } from "./inbox-store.js";
import { QueueContext } from "./queue-context.js";
import { PostgresQueueStore } from "./queue-store.js";
import { checkSchemaName } from "./schema.js";
import { StreamGroups } from "./stream-groups.js";
import { StreamShares } from "./stream-shares.js";
import { PostgresStreamStore } from "./stream-store.js";

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

/** The params object of the Store method `name`. */
type Params<Name extends keyof Store> = Store[Name] extends (params: infer P) => unknown ? P : never;

export class PostgresStore implements Store {
  /** Writes run side by side on pooled connections; each commits when it is done. */
  readonly commitsInCallOrder = false;
  readonly schema: string;
  private readonly db: PostgresDatabase;
  private readonly link: PostgresClusterLink;
  private readonly queues: PostgresQueueStore;
  private readonly exchanges: PostgresExchangeStore;
  private readonly inboxes: PostgresInboxStore;
  private readonly streams: PostgresStreamStore;
  private readonly groups: StreamGroups;
  private readonly shares: StreamShares;

  private constructor(options: PostgresStoreOptions, schema: string) {
    this.schema = schema;
    this.db = new PostgresDatabase({
      url: options.url,
      schema,
      random: options.random,
      ...(options.poolSize === undefined ? {} : { poolSize: options.poolSize }),
    });
    this.link = new PostgresClusterLink(this.db, {
      ...(options.presenceIntervalMs === undefined ? {} : { presenceIntervalMs: options.presenceIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    this.streams = new PostgresStreamStore(this.db, this.link);
    this.groups = new StreamGroups(this.db, this.streams);
    const context = new QueueContext(this.db, this.link, options.random, (client, params) =>
      this.streams.appends.appendIn(client, params),
    );
    this.queues = new PostgresQueueStore(context);
    this.shares = new StreamShares(this.db, this.streams, context, options.random);
    this.exchanges = new PostgresExchangeStore(context);
    this.inboxes = new PostgresInboxStore(this.db, this.link);
  }

  /** Connects, creates the schema and applies migrations, then starts listening. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const schema = options.schema ?? "hopper";
    checkSchemaName(schema);
    const store = new PostgresStore(options, schema);
    try {
      await store.db.migrate();
      await store.link.start();
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  ping(): Promise<void> {
    return this.db.ping();
  }

  async close(): Promise<void> {
    await this.link.stop();
    await this.db.close();
  }

  // The cluster link (cluster-link.ts).

  watch(listener: (event: StoreEvent) => void): void {
    this.link.watch(listener);
  }

  housekeepingLeader(): Promise<boolean> {
    return this.link.housekeepingLeader();
  }

  signalBroadcast(params: Params<"signalBroadcast">) {
    return this.link.signalBroadcast(params);
  }

  // Queues (queue-store.ts).

  queueUpsert(params: Params<"queueUpsert">) {
    return this.queues.queueUpsert(params);
  }

  queueGet(params: Params<"queueGet">) {
    return this.queues.queueGet(params);
  }

  queueList() {
    return this.queues.queueList();
  }

  queueDelete(params: Params<"queueDelete">) {
    return this.queues.queueDelete(params);
  }

  queueDepth(params: Params<"queueDepth">) {
    return this.queues.queueDepth(params);
  }

  queueListWithDepth(params: Params<"queueListWithDepth">) {
    return this.queues.queueListWithDepth(params);
  }

  queueSendMany(params: Params<"queueSendMany">) {
    return this.queues.queueSendMany(params);
  }

  queueLease(params: Params<"queueLease">) {
    return this.queues.queueLease(params);
  }

  queueAck(params: Params<"queueAck">) {
    return this.queues.queueAck(params);
  }

  queueNack(params: Params<"queueNack">) {
    return this.queues.queueNack(params);
  }

  queueExtend(params: Params<"queueExtend">) {
    return this.queues.queueExtend(params);
  }

  queuePeek(params: Params<"queuePeek">) {
    return this.queues.queuePeek(params);
  }

  queuePurge(params: Params<"queuePurge">) {
    return this.queues.queuePurge(params);
  }

  queueExpire(params: Params<"queueExpire">) {
    return this.queues.queueExpire(params);
  }

  queueMove(params: Params<"queueMove">) {
    return this.queues.queueMove(params);
  }

  queueDeadLetterExhausted(params: Params<"queueDeadLetterExhausted">) {
    return this.queues.queueDeadLetterExhausted(params);
  }

  queueNextEvents(params: Params<"queueNextEvents">) {
    return this.queues.queueNextEvents(params);
  }

  // Exchanges and bindings (exchange-store.ts).

  exchangeUpsert(params: Params<"exchangeUpsert">) {
    return this.exchanges.exchangeUpsert(params);
  }

  exchangeGet(params: Params<"exchangeGet">) {
    return this.exchanges.exchangeGet(params);
  }

  exchangeList() {
    return this.exchanges.exchangeList();
  }

  exchangeDelete(params: Params<"exchangeDelete">) {
    return this.exchanges.exchangeDelete(params);
  }

  bindingUpsert(params: Params<"bindingUpsert">) {
    return this.exchanges.bindingUpsert(params);
  }

  bindingDelete(params: Params<"bindingDelete">) {
    return this.exchanges.bindingDelete(params);
  }

  // Inboxes (inbox-store.ts).

  inboxUpsert(params: Params<"inboxUpsert">) {
    return this.inboxes.inboxUpsert(params);
  }

  inboxGet(params: Params<"inboxGet">) {
    return this.inboxes.inboxGet(params);
  }

  inboxList() {
    return this.inboxes.inboxList();
  }

  inboxDelete(params: Params<"inboxDelete">) {
    return this.inboxes.inboxDelete(params);
  }

  inboxAppend(params: Params<"inboxAppend">) {
    return this.inboxes.inboxAppend(params);
  }

  inboxRead(params: Params<"inboxRead">) {
    return this.inboxes.inboxRead(params);
  }

  inboxAck(params: Params<"inboxAck">) {
    return this.inboxes.inboxAck(params);
  }

  inboxDeviceSeen(params: Params<"inboxDeviceSeen">) {
    return this.inboxes.inboxDeviceSeen(params);
  }

  inboxDeviceDelete(params: Params<"inboxDeviceDelete">) {
    return this.inboxes.inboxDeviceDelete(params);
  }

  inboxRecipientGet(params: Params<"inboxRecipientGet">) {
    return this.inboxes.inboxRecipientGet(params);
  }

  inboxSweep(params: Params<"inboxSweep">) {
    return this.inboxes.inboxSweep(params);
  }

  // Streams (stream-store.ts).

  streamUpsert(params: Params<"streamUpsert">) {
    return this.streams.streamUpsert(params);
  }

  streamGet(params: Params<"streamGet">) {
    return this.streams.streamGet(params);
  }

  streamList() {
    return this.streams.streamList();
  }

  streamDelete(params: Params<"streamDelete">) {
    return this.streams.streamDelete(params);
  }

  streamAppend(params: Params<"streamAppend">) {
    return this.streams.streamAppend(params);
  }

  streamRead(params: Params<"streamRead">) {
    return this.streams.streamRead(params);
  }

  streamSweep(params: Params<"streamSweep">) {
    return this.streams.streamSweep(params);
  }

  // Stream consumer groups (stream-groups.ts).

  streamGroupFetch(params: Params<"streamGroupFetch">) {
    return this.groups.fetch(params);
  }

  streamGroupCommit(params: Params<"streamGroupCommit">) {
    return this.groups.commit(params);
  }

  streamGroupLeave(params: Params<"streamGroupLeave">) {
    return this.groups.leave(params);
  }

  streamGroupReset(params: Params<"streamGroupReset">) {
    return this.groups.reset(params);
  }

  streamGroupDelete(params: Params<"streamGroupDelete">) {
    return this.groups.delete(params);
  }

  streamGroupList(params: Params<"streamGroupList">) {
    return this.groups.list(params);
  }

  streamGroupExpire(params: Params<"streamGroupExpire">) {
    return this.groups.expire(params);
  }

  // Stream share groups (stream-shares.ts).

  streamShareUpsert(params: Params<"streamShareUpsert">) {
    return this.shares.upsert(params);
  }

  streamShareReceive(params: Params<"streamShareReceive">) {
    return this.shares.receive(params);
  }

  streamShareAck(params: Params<"streamShareAck">) {
    return this.shares.ack(params);
  }

  streamShareNack(params: Params<"streamShareNack">) {
    return this.shares.nack(params);
  }

  streamShareExtend(params: Params<"streamShareExtend">) {
    return this.shares.extend(params);
  }

  streamSharePending(params: Params<"streamSharePending">) {
    return this.shares.pending(params);
  }
}
