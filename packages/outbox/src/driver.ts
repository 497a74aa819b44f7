/**
 * The storage of the outbox in the application's database, as the relay and the commands use it. Like
 * River's drivers, a driver only runs named statements (postgres-queries.ts, sqlite-queries.ts); what a
 * row's state means, the order per key and the retries live once, in relay.ts. Methods are named
 * entity first, one params object each.
 */
import type { Database as SqliteDatabase } from "better-sqlite3";
import type { Client as PgClient, Pool, PoolClient } from "pg";
import type { OutboxRow } from "./event.js";
import type { RecordedError } from "./publish-errors.js";

/** A PostgreSQL connection (`pg.Client`, or a pool's client) or pool, or a better-sqlite3 database. */
export type OutboxDatabase = Pool | PgClient | PoolClient | SqliteDatabase;

/** What the relay decided for the claimed rows; rows in neither list stay pending. */
export interface RowMarks {
  sent: number[];
  failed: { seq: number; error: RecordedError }[];
}

export interface OutboxStats {
  pendingRows: number;
  failedRows: number;
  /** created_at of the oldest pending row (ms), or undefined when none is pending. */
  oldestPendingCreatedAt: number | undefined;
}

export interface FailedRow extends OutboxRow {
  /** Unsent rows of the same key behind this one: they wait until it is retried or dropped. */
  waitingBehind: number;
}

export interface OutboxDriver {
  readonly dialect: "postgres" | "sqlite";
  /** Creates or upgrades the tables; safe to call again and from several processes at once. */
  migrate(params: { now: number }): Promise<{ applied: number[] }>;
  /**
   * Reads up to `limit` rows that are each the first unsent row of their key, hands them to `work`
   * (which publishes them) and applies the marks it returns. On PostgreSQL this is one transaction whose
   * row locks keep other relays off these rows and their keys until the marks are committed; a crash
   * before that commit leaves the rows pending, so they are published again.
   */
  outboxClaimHeads(
    params: { limit: number; excludedDestinations: string[]; now: () => number },
    work: (rows: OutboxRow[]) => Promise<RowMarks>,
  ): Promise<number>;
  outboxStats(): Promise<OutboxStats>;
  outboxFailedList(params: { limit: number }): Promise<FailedRow[]>;
  /** Failed rows back to pending: those of `ids`, or every one when `ids` is undefined. */
  outboxRetry(params: { ids: string[] | undefined }): Promise<number>;
  /** Deletes failed rows, so that their keys go on without them. */
  outboxDrop(params: { ids: string[] }): Promise<number>;
  outboxPruneSent(params: { sentBefore: number; limit: number }): Promise<number>;
  processedPrune(params: { processedBefore: number; limit: number }): Promise<number>;
  /**
   * Calls `onInsert` when rows may have been committed (PostgreSQL NOTIFY). Undefined for SQLite,
   * which the relay polls.
   */
  listen?(onInsert: () => void, onError: (error: unknown) => void): Promise<{ close(): Promise<void> }>;
}

/** Tells a better-sqlite3 database from a `pg` client or pool, without loading either module. */
export function isSqliteDatabase(db: unknown): db is SqliteDatabase {
  return (
    typeof db === "object" &&
    db !== null &&
    typeof (db as SqliteDatabase).prepare === "function" &&
    typeof (db as SqliteDatabase).pragma === "function"
  );
}

export function isPgPool(db: unknown): db is Pool {
  return typeof db === "object" && db !== null && typeof (db as Pool).totalCount === "number";
}
