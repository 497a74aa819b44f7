/**
 * What the application and an operator call besides the relay: migrate, and the management of failed
 * rows that `hopper-outbox status|retry|drop` runs.
 */
import { type OutboxClock, systemClock } from "./clock.js";
import type { FailedRow, OutboxDatabase, OutboxStats } from "./driver.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import type { TableOptions } from "./tables.js";

/**
 * Creates `<prefix>outbox`, `<prefix>processed` and `<prefix>outbox_failed` (and, on PostgreSQL, the
 * schema and the insert trigger that wakes relays), or brings them up to this version. Idempotent and
 * versioned (`<prefix>outbox_migrations`); concurrent calls wait for each other.
 */
export async function migrate(
  db: OutboxDatabase,
  options: TableOptions & { clock?: OutboxClock } = {},
): Promise<{ applied: number[] }> {
  return openDriver(db, options).migrate({ now: (options.clock ?? systemClock).now() });
}

export interface OutboxStatus extends OutboxStats {
  /** Failed rows, oldest first (at most 1000), each with the rows of its key that wait behind it. */
  failed: FailedRow[];
}

export async function outboxStatus(db: OutboxDatabase, options: TableOptions = {}): Promise<OutboxStatus> {
  const driver = openDriver(db, options);
  const stats = await driver.outboxStats();
  return { ...stats, failed: await driver.outboxFailedList({ limit: outboxLimits.statusRowsMax }) };
}

/** Makes failed rows pending again (the ids given, or all); answers how many. */
export async function retryFailed(
  db: OutboxDatabase,
  ids: string[] | "all",
  options: TableOptions = {},
): Promise<number> {
  return openDriver(db, options).outboxRetry({ ids: ids === "all" ? undefined : ids });
}

/** Deletes failed rows (never pending or sent ones); answers how many. Their keys go on without them. */
export async function dropFailed(
  db: OutboxDatabase,
  ids: string[],
  options: TableOptions = {},
): Promise<number> {
  return openDriver(db, options).outboxDrop({ ids });
}
