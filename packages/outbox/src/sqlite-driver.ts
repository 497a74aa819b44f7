/**
 * The outbox driver for SQLite through better-sqlite3: sqlite-queries.ts. The claim reads outside any
 * transaction and marks in one: an open write transaction cannot wait for a publish (better-sqlite3's
 * transactions are synchronous), and the single relay per file makes row locks unnecessary.
 */
import type { Database } from "better-sqlite3";
import type { FailedRow, OutboxDriver } from "./driver.js";
import { decodeRow } from "./event.js";
import { sqliteMigrations, sqliteQueries } from "./sqlite-queries.js";
import type { Tables } from "./tables.js";

type RawRow = Record<string, unknown>;

export function sqliteDriver(db: Database, tables: Tables): OutboxDriver {
  const q = sqliteQueries(tables);
  return {
    dialect: "sqlite",
    async migrate({ now }) {
      const migrations = sqliteMigrations(tables);
      // IMMEDIATE takes the write lock first, so two processes migrating at once run one after the other.
      return db
        .transaction(() => {
          db.exec(q.migrationsPrepare);
          const done = new Set(
            (db.prepare(q.migrationsApplied).all() as { version: number }[]).map((row) => row.version),
          );
          const applied: number[] = [];
          for (const [index, sql] of migrations.entries()) {
            const version = index + 1;
            if (done.has(version)) continue;
            db.exec(sql);
            db.prepare(q.migrationsRecord).run(version, now);
            applied.push(version);
          }
          return { applied };
        })
        .immediate();
    },
    async outboxClaimHeads({ limit, excludedDestinations, now }, work) {
      const raw = db.prepare(q.outboxClaimHeads).all(JSON.stringify(excludedDestinations), limit) as RawRow[];
      if (raw.length === 0) return 0;
      const marks = await work(raw.map(decodeRow));
      db.transaction(() => {
        const at = now();
        if (marks.sent.length > 0) db.prepare(q.outboxMarkSent).run(at, JSON.stringify(marks.sent));
        for (const failed of marks.failed) {
          db.prepare(q.outboxMarkFailed).run(at, JSON.stringify(failed.error), failed.seq);
        }
      }).immediate();
      return raw.length;
    },
    async outboxStats() {
      const row = db.prepare(q.outboxStats).get() as RawRow;
      return {
        pendingRows: Number(row.pending_rows ?? 0),
        failedRows: Number(row.failed_rows ?? 0),
        oldestPendingCreatedAt:
          row.oldest_pending_created_at === null ? undefined : Number(row.oldest_pending_created_at),
      };
    },
    async outboxFailedList({ limit }) {
      const rows = db.prepare(q.outboxFailedList).all(limit) as RawRow[];
      return rows.map((raw): FailedRow => ({ ...decodeRow(raw), waitingBehind: Number(raw.waiting_behind) }));
    },
    async outboxRetry({ ids }) {
      const list = ids === undefined ? null : JSON.stringify(ids);
      return db.prepare(q.outboxRetry).run(list, list ?? "[]").changes;
    },
    async outboxDrop({ ids }) {
      return db.prepare(q.outboxDrop).run(JSON.stringify(ids)).changes;
    },
    async outboxPruneSent({ sentBefore, limit }) {
      return db.prepare(q.outboxPruneSent).run(sentBefore, limit).changes;
    },
    async processedPrune({ processedBefore, limit }) {
      return db.prepare(q.processedPrune).run(processedBefore, limit).changes;
    },
  };
}
