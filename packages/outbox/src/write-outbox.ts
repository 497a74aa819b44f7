/**
 * writeOutbox: the event goes into the outbox table with the application's own transaction, so it
 * exists exactly when the application's change does. The relay publishes it after the commit.
 *
 * For the WAL relay (`mode: "wal"`, PostgreSQL) the row is inserted and deleted again in the same
 * transaction, as Debezium's outbox does: the insert is in the WAL, which the relay reads through its
 * slot, and the table stays empty. No key lock is taken then: logical decoding hands transactions over
 * in commit order, which is the order per key.
 */
import type { Database as SqliteDatabase } from "better-sqlite3";
import type { Client as PgClient, PoolClient } from "pg";
import { systemClock } from "./clock.js";
import { isSqliteDatabase } from "./driver.js";
import { eventInsertValues, type OutboxEvent } from "./event.js";
import { postgresQueries } from "./postgres-queries.js";
import { sqliteQueries } from "./sqlite-queries.js";
import { resolveTables, type TableOptions } from "./tables.js";
import { uuid7 } from "./uuid7.js";

export interface WriteOutboxOptions extends TableOptions {
  /** When the event was written (ms); default now. Used for the oldest-pending age and latency. */
  now?: number;
  /** "poll" (default): the row stays until the relay marks it sent. "wal": the row is deleted in the
   * same transaction, for a relay in WAL mode (PostgreSQL only). Use one mode per outbox. */
  mode?: "poll" | "wal";
}

export interface WrittenEvent {
  /** The row's UUIDv7: the published message's `x-outbox-id` header and `dedupId`. */
  id: string;
}

/**
 * Inserts `event` with the transaction `tx` is in: a better-sqlite3 database, inside
 * `db.transaction(…)` (the call is synchronous there), or a `pg` client after `BEGIN` (the call returns
 * a promise; await it before COMMIT). Throws a TypeError, and writes nothing, for an event that Hopper
 * would refuse whatever the queue (a bad name, key or header).
 */
export function writeOutbox(
  tx: SqliteDatabase,
  event: OutboxEvent,
  options?: WriteOutboxOptions,
): WrittenEvent;
export function writeOutbox(
  tx: PgClient | PoolClient,
  event: OutboxEvent,
  options?: WriteOutboxOptions,
): Promise<WrittenEvent>;
export function writeOutbox(
  tx: SqliteDatabase | PgClient | PoolClient,
  event: OutboxEvent,
  options: WriteOutboxOptions = {},
): WrittenEvent | Promise<WrittenEvent> {
  const now = options.now ?? systemClock.now();
  const id = uuid7(now);
  const values = eventInsertValues(event, id, now);
  if (isSqliteDatabase(tx)) {
    if (options.mode === "wal") throw new TypeError("writeOutbox: the WAL mode needs PostgreSQL");
    const tables = resolveTables(options, "sqlite");
    tx.prepare(sqliteQueries(tables).outboxInsert).run(...values);
    return { id };
  }
  const tables = resolveTables(options, "postgres");
  const q = postgresQueries(tables);
  return (async () => {
    if (options.mode === "wal") {
      await tx.query(q.outboxInsert, values);
      await tx.query(q.outboxDeleteInserted, [id]);
      return { id };
    }
    await tx.query(q.outboxKeyLock, [`${tables.schema}.${tables.prefix}outbox:${values[4]}`]);
    await tx.query(q.outboxInsert, values);
    return { id };
  })();
}
