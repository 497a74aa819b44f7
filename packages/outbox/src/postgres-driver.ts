/** The outbox driver for PostgreSQL through `pg`: postgres-queries.ts, one transaction per claim. */
import type { Client as PgClient, Pool, PoolClient } from "pg";
import { type FailedRow, isPgPool, type OutboxDriver, type RowMarks } from "./driver.js";
import { decodeRow } from "./event.js";
import { postgresMigrations, postgresQueries } from "./postgres-queries.js";
import type { Tables } from "./tables.js";

type Queryable = PgClient | PoolClient;

export function postgresDriver(db: Pool | PgClient | PoolClient, tables: Tables): OutboxDriver {
  // Over 80 lines: the driver is one object of named statements, each short; splitting it scatters them.
  const q = postgresQueries(tables);
  /** A connection for one unit of work: the pool's, released after, or the caller's client. */
  async function withConnection<T>(work: (client: Queryable) => Promise<T>): Promise<T> {
    if (!isPgPool(db)) return work(db);
    const client = await db.connect();
    let broken: unknown;
    try {
      return await work(client);
    } catch (error) {
      broken = error;
      throw error;
    } finally {
      // A connection whose transaction failed mid-way is dropped rather than reused.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }
  async function inTransaction<T>(work: (client: Queryable) => Promise<T>): Promise<T> {
    return withConnection(async (client) => {
      await client.query("BEGIN");
      try {
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      }
    });
  }
  const count = (value: unknown) => Number(value ?? 0);

  return {
    dialect: "postgres",
    async migrate({ now }) {
      const migrations = postgresMigrations(tables);
      return inTransaction(async (client) => {
        await client.query(q.migrationsLock, [`hopper_outbox_migrate:${tables.schema}.${tables.prefix}`]);
        await client.query(q.migrationsPrepare);
        const { rows } = await client.query<{ version: number }>(q.migrationsApplied);
        const done = new Set(rows.map((row) => row.version));
        const applied: number[] = [];
        for (const [index, sql] of migrations.entries()) {
          const version = index + 1;
          if (done.has(version)) continue;
          await client.query(sql);
          await client.query(q.migrationsRecord, [version, now]);
          applied.push(version);
        }
        return { applied };
      });
    },
    async outboxClaimHeads({ limit, excludedDestinations, now }, work) {
      return inTransaction(async (client) => {
        const { rows } = await client.query(q.outboxClaimHeads, [limit, excludedDestinations]);
        if (rows.length === 0) return 0;
        const marks: RowMarks = await work(rows.map(decodeRow));
        const at = now();
        if (marks.sent.length > 0) await client.query(q.outboxMarkSent, [marks.sent, at]);
        for (const failed of marks.failed) {
          await client.query(q.outboxMarkFailed, [failed.seq, at, JSON.stringify(failed.error)]);
        }
        return rows.length;
      });
    },
    async outboxStats() {
      return withConnection(async (client) => {
        const { rows } = await client.query(q.outboxStats);
        const row = rows[0] ?? {};
        return {
          pendingRows: count(row.pending_rows),
          failedRows: count(row.failed_rows),
          oldestPendingCreatedAt:
            row.oldest_pending_created_at === null ? undefined : Number(row.oldest_pending_created_at),
        };
      });
    },
    async outboxFailedList({ limit }) {
      return withConnection(async (client) => {
        const { rows } = await client.query(q.outboxFailedList, [limit]);
        return rows.map(
          (raw): FailedRow => ({ ...decodeRow(raw), waitingBehind: count(raw.waiting_behind) }),
        );
      });
    },
    async outboxRetry({ ids }) {
      // The outbox table's failed rows go back to pending; the WAL relay's go back through the slot.
      return inTransaction(async (client) => {
        const pending = (await client.query(q.outboxRetry, [ids ?? null])).rowCount ?? 0;
        const requeued = (await client.query(q.outboxFailedRequeue, [ids ?? null])).rowCount ?? 0;
        if (requeued > 0) {
          await client.query(q.outboxFailedRequeueDelete, [ids ?? null]);
          await client.query(q.outboxFailedDelete, [ids ?? null]);
        }
        return pending + requeued;
      });
    },
    async outboxDrop({ ids }) {
      return inTransaction(async (client) => {
        const dropped = (await client.query(q.outboxDrop, [ids])).rowCount ?? 0;
        return dropped + ((await client.query(q.outboxFailedDelete, [ids])).rowCount ?? 0);
      });
    },
    async outboxPruneSent({ sentBefore, limit }) {
      return withConnection(
        async (client) => (await client.query(q.outboxPruneSent, [sentBefore, limit])).rowCount ?? 0,
      );
    },
    async processedPrune({ processedBefore, limit }) {
      return withConnection(
        async (client) => (await client.query(q.processedPrune, [processedBefore, limit])).rowCount ?? 0,
      );
    },
    async listen(onInsert, onError) {
      // LISTEN needs a session of its own that stays open: a pool's client kept out of the pool.
      const client: Queryable = isPgPool(db) ? await db.connect() : db;
      const onNotification = (message: { channel: string }) => {
        if (message.channel === tables.channel) onInsert();
      };
      client.on("notification", onNotification);
      client.on("error", onError);
      await client.query(`LISTEN "${tables.channel}"`);
      return {
        async close() {
          client.off("notification", onNotification);
          await client.query(`UNLISTEN "${tables.channel}"`).catch(() => {});
          client.off("error", onError);
          if (isPgPool(db)) (client as PoolClient).release();
        },
      };
    },
  };
}
