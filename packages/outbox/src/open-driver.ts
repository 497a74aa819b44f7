/** Picks the driver for the database the application hands over. */
import { isSqliteDatabase, type OutboxDatabase, type OutboxDriver } from "./driver.js";
import { postgresDriver } from "./postgres-driver.js";
import { sqliteDriver } from "./sqlite-driver.js";
import { resolveTables, type TableOptions, type Tables } from "./tables.js";

export function openDriver(db: OutboxDatabase, options: TableOptions = {}): OutboxDriver {
  return isSqliteDatabase(db)
    ? sqliteDriver(db, resolveTables(options, "sqlite"))
    : postgresDriver(db, resolveTables(options, "postgres"));
}

export function tablesFor(db: unknown, options: TableOptions = {}): Tables {
  return resolveTables(options, isSqliteDatabase(db) ? "sqlite" : "postgres");
}
