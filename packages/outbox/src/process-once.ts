/**
 * processOnce: the insert-first idempotent consumer. It claims (consumer, message id) with an insert
 * that ignores conflicts and runs the effect in the same transaction, so the effect and the claim
 * commit together or not at all; a second delivery (a redelivery, or the relay's rare double publish)
 * finds the claim and skips. Two consumers racing on one message: the second insert waits for the
 * first transaction, then sees its claim (PostgreSQL), or waits for the write lock (SQLite).
 *
 * The id is the message's `x-outbox-id` header when it has one (every copy the relay published of one
 * row carries it, even two publishes of it), else the broker's message id. Claims are keyed by consumer
 * because the copies of one exchange publish share that id while each queue's consumer must act.
 */
import type { HandlerContext, MessageHandler, ReceivedMessage } from "@hopper/client";
import type { Database as SqliteDatabase } from "better-sqlite3";
import type { Client as PgClient, Pool, PoolClient } from "pg";
import { type OutboxClock, systemClock } from "./clock.js";
import { isPgPool, isSqliteDatabase } from "./driver.js";
import { outboxIdHeader } from "./event.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import { postgresQueries } from "./postgres-queries.js";
import { sqliteQueries } from "./sqlite-queries.js";
import { resolveTables, type TableOptions } from "./tables.js";

/** What processOnce needs of a message: a received message has it. */
export interface IdentifiedMessage {
  id: string;
  headers?: Record<string, string> | null;
}

export type ProcessOnceResult<T> = { applied: true; result: T } | { applied: false };

export interface ProcessOnceOptions extends TableOptions {
  clock?: OutboxClock;
}

/** The id processOnce claims for `message`: its x-outbox-id, or its broker id. */
export function processedMessageId(message: IdentifiedMessage): string {
  return message.headers?.[outboxIdHeader] ?? message.id;
}

export function processOnce<T>(
  db: SqliteDatabase,
  claim: { consumer: string; message: IdentifiedMessage },
  fn: (tx: SqliteDatabase) => T,
  options?: ProcessOnceOptions,
): Promise<ProcessOnceResult<T>>;
export function processOnce<T>(
  db: Pool | PgClient | PoolClient,
  claim: { consumer: string; message: IdentifiedMessage },
  fn: (tx: PgClient | PoolClient) => Promise<T>,
  options?: ProcessOnceOptions,
): Promise<ProcessOnceResult<T>>;
export async function processOnce<T>(
  db: SqliteDatabase | Pool | PgClient | PoolClient,
  { consumer, message }: { consumer: string; message: IdentifiedMessage },
  fn: ((tx: SqliteDatabase) => T) | ((tx: PgClient | PoolClient) => Promise<T>),
  options: ProcessOnceOptions = {},
): Promise<ProcessOnceResult<T>> {
  if (typeof consumer !== "string" || consumer.length === 0)
    throw new TypeError("processOnce: consumer is required");
  const messageId = processedMessageId(message);
  const now = (options.clock ?? systemClock).now();
  if (isSqliteDatabase(db)) {
    const q = sqliteQueries(resolveTables(options, "sqlite"));
    // IMMEDIATE takes the write lock before the claim, so a racing consumer waits (busy_timeout) rather
    // than failing to upgrade a read lock.
    return db
      .transaction((): ProcessOnceResult<T> => {
        if (db.prepare(q.processedClaim).run(consumer, messageId, now).changes === 0)
          return { applied: false };
        const result = (fn as (tx: SqliteDatabase) => T)(db);
        if (result instanceof Promise) {
          throw new TypeError(
            "processOnce on SQLite: fn must be synchronous (better-sqlite3 transactions are)",
          );
        }
        return { applied: true, result };
      })
      .immediate();
  }
  const q = postgresQueries(resolveTables(options, "postgres"));
  const client: PgClient | PoolClient = isPgPool(db) ? await db.connect() : db;
  let failure: unknown;
  try {
    await client.query("BEGIN");
    const claimed = await client.query(q.processedClaim, [consumer, messageId, now]);
    if (claimed.rowCount === 0) {
      await client.query("ROLLBACK");
      return { applied: false };
    }
    const result = await (fn as (tx: PgClient | PoolClient) => Promise<T>)(client);
    await client.query("COMMIT");
    return { applied: true, result };
  } catch (error) {
    failure = error;
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    if (isPgPool(db)) (client as PoolClient).release(failure instanceof Error ? failure : undefined);
  }
}

export interface ProcessOnceHandlerOptions extends ProcessOnceOptions {
  /** How long a claim is kept; default 7 days (limits.processedRetentionMsDefault). */
  processedRetentionMs?: number;
}

type SqliteEffect = (message: ReceivedMessage, tx: SqliteDatabase, context: HandlerContext) => void;
type PgEffect = (
  message: ReceivedMessage,
  tx: PgClient | PoolClient,
  context: HandlerContext,
) => Promise<void>;

/**
 * A worker handler (`hopper.worker(queue, processOnce.handler(db, consumer, fn))`) that runs `fn` at
 * most once per message for `consumer`. It returns only after the transaction committed, so the worker
 * acks only then; if it throws, nothing was committed and the worker nacks. It also deletes expired
 * claims, at most once a minute.
 */
function processOnceHandler(
  db: SqliteDatabase,
  consumer: string,
  fn: SqliteEffect,
  options?: ProcessOnceHandlerOptions,
): MessageHandler;
function processOnceHandler(
  db: Pool | PgClient | PoolClient,
  consumer: string,
  fn: PgEffect,
  options?: ProcessOnceHandlerOptions,
): MessageHandler;
function processOnceHandler(
  db: SqliteDatabase | Pool | PgClient | PoolClient,
  consumer: string,
  fn: SqliteEffect | PgEffect,
  options: ProcessOnceHandlerOptions = {},
): MessageHandler {
  const clock = options.clock ?? systemClock;
  const retentionMs = options.processedRetentionMs ?? outboxLimits.processedRetentionMsDefault;
  const driver = openDriver(db, options);
  let nextPruneAt = clock.now();
  return async (message, context) => {
    if (isSqliteDatabase(db)) {
      await processOnce(
        db,
        { consumer, message },
        (tx) => (fn as SqliteEffect)(message, tx, context),
        options,
      );
    } else {
      await processOnce(db, { consumer, message }, (tx) => (fn as PgEffect)(message, tx, context), options);
    }
    if (clock.now() >= nextPruneAt) {
      nextPruneAt = clock.now() + outboxLimits.pruneIntervalMs;
      await driver.processedPrune({
        processedBefore: clock.now() - retentionMs,
        limit: outboxLimits.pruneRowsMax,
      });
    }
  };
}

processOnce.handler = processOnceHandler;
