/**
 * What the application and an operator call besides the relay: migrate, and the management of failed
 * rows that `hopper-outbox status|retry|drop` runs.
 */
import { type OutboxClock, systemClock } from "./clock.js";
import type { FailedRow, OutboxDatabase, OutboxStats } from "./driver.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import type { TableOptions, WalOptions } from "./tables.js";
import { setUpWal, type WalSetup } from "./wal-setup.js";

export interface MigrateOptions extends TableOptions {
  /** PostgreSQL: also set up the WAL mode, its publication and replication slot (wal-setup.ts), with
   * default names (`true`) or those given. Run it before the application writes WAL-mode events. */
  wal?: boolean | WalOptions;
  clock?: OutboxClock;
}

/**
 * Creates `<prefix>outbox`, `<prefix>processed` and `<prefix>outbox_failed` (and, on PostgreSQL, the
 * schema and the insert trigger that wakes relays), or brings them up to this version. Idempotent and
 * versioned (`<prefix>outbox_migrations`); concurrent calls wait for each other. With `wal`, then
 * creates the publication and the slot if missing, and answers what it found (`wal.warning` when
 * max_slot_wal_keep_size is unlimited).
 */
export async function migrate(
  db: OutboxDatabase,
  options: MigrateOptions = {},
): Promise<{ applied: number[]; wal?: WalSetup }> {
  const result = await openDriver(db, options).migrate({ now: (options.clock ?? systemClock).now() });
  if (!options.wal) return result;
  // After the migration's transaction: a slot cannot be created in a transaction that has written.
  const walOptions = options.wal === true ? {} : options.wal;
  return { ...result, wal: await setUpWal(db, { ...options, ...walOptions }) };
}

export interface OutboxStatus extends OutboxStats {
  /** Failed rows (at most 1000): the outbox table's, oldest first, each with the rows of its key
   * that wait behind it; then the WAL relay's failed events, with none waiting. */
  failed: FailedRow[];
}

export async function outboxStatus(db: OutboxDatabase, options: TableOptions = {}): Promise<OutboxStatus> {
  const driver = openDriver(db, options);
  const stats = await driver.outboxStats();
  return { ...stats, failed: await driver.outboxFailedList({ limit: outboxLimits.statusRowsMax }) };
}

/** Makes failed rows pending again (the ids given, or all); answers how many. The WAL relay's failed
 * events are written to the outbox again (insert and delete), so the relay reads them anew. */
export async function retryFailed(
  db: OutboxDatabase,
  ids: string[] | "all",
  options: TableOptions = {},
): Promise<number> {
  return openDriver(db, options).outboxRetry({ ids: ids === "all" ? undefined : ids });
}

/** Deletes failed rows and failed WAL events (never pending or sent ones); answers how many. Their
 * keys go on without them. */
export async function dropFailed(
  db: OutboxDatabase,
  ids: string[],
  options: TableOptions = {},
): Promise<number> {
  return openDriver(db, options).outboxDrop({ ids });
}
