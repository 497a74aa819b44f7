/**
 * The PostgreSQL store's pool of connections and how every call runs on it: as one transaction
 * (retried when PostgreSQL aborts it for a deadlock or a serialization failure), or as one prepared
 * statement in its own implicit transaction. Connection failures become `unavailable`. Also the
 * schema's migrations, applied as the store opens, and what runs once a transaction has committed.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import type { Random } from "../../random.js";
import { counterShards, migrations } from "./schema.js";
import * as sql from "./statements/index.js";

export type Client = pg.PoolClient;

/** Serializes migrations between nodes that start together: an arbitrary, fixed advisory lock key. */
const migrationLockClass = 0x686f7070; // "hopp"
/** Connection-level errors: the store is unreachable rather than the request wrong. */
const unavailableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "57P01",
  "57P02",
  "57P03",
]);

/** bigint columns hold milliseconds, sequences and 48-bit tokens: all exact as JavaScript numbers. */
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

export interface PostgresDatabaseOptions {
  /** A postgres:// connection string. */
  url: string;
  /** The schema that holds Hopper's tables, already checked (schema.ts checkSchemaName). */
  schema: string;
  /** Connections for transactions per node. */
  poolSize?: number;
  random: Random;
}

export class PostgresDatabase {
  readonly schema: string;
  /** How to connect, with Hopper's session settings: the cluster link's own session uses it too. */
  readonly connection: pg.ClientConfig;
  private readonly pool: pg.Pool;
  private readonly random: Random;
  /** The prepared-statement name of each one-statement call's text (preparedName). */
  private readonly preparedNames = new Map<string, string>();
  /** What runs once the transaction on each client has committed (afterCommit), and only then. */
  private readonly afterCommitOf = new WeakMap<Client, (() => void)[]>();

  constructor(options: PostgresDatabaseOptions) {
    this.schema = options.schema;
    this.random = options.random;
    // Every statement is an indexed lookup or an ordered index walk that stops at its LIMIT. Without
    // fresh statistics (autovacuum off, or a queue that grew fast) the planner prefers a bitmap scan
    // and a sort of every available row for the lease query, whose cost then grows with the queue's
    // depth; turning bitmap scans off for Hopper's own sessions keeps the plans it was written for.
    // Generic plans: a prepared statement is planned once per connection, not again for each set of
    // values (PostgreSQL's default re-plans a statement whose custom plans look cheaper, which the
    // lease statement's do). W2 on one node: p99 7.95-8.86 ms against 11.4-11.8 (docs/benchmarks.md).
    this.connection = {
      connectionString: options.url,
      options: `-c search_path=${options.schema} -c enable_bitmapscan=off -c plan_cache_mode=force_generic_plan`,
      types,
    };
    this.pool = new pg.Pool({ ...this.connection, max: options.poolSize ?? limits.postgresPoolSizeDefault });
    // An idle pooled connection that the server drops must not crash the process; the next query
    // reconnects.
    this.pool.on("error", () => {});
  }

  /** Creates the schema and applies the migrations it lacks, one node at a time. */
  async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query(sql.migrationLock, [migrationLockClass, this.schema]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`);
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, applied_at timestamptz DEFAULT now())",
      );
      const { rows } = await client.query<{ version: number | null }>(
        "SELECT max(version) AS version FROM schema_migrations",
      );
      const applied = rows[0]?.version ?? 0;
      for (const [index, migration] of migrations.entries()) {
        if (index < applied) continue;
        await client.query(migration);
        await client.query("INSERT INTO schema_migrations (version) VALUES ($1)", [index + 1]);
      }
    });
  }

  /**
   * Runs `work` in one transaction on a pooled connection; connection failures become `unavailable`.
   * A transaction that PostgreSQL aborted for a deadlock or a serialization failure is run again: it
   * changed nothing, and the retry usually meets no conflict.
   */
  async transaction<T>(work: (client: Client) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce(work);
      } catch (error) {
        const code = (error as { code?: string }).code;
        const retryable = code === "40P01" || code === "40001";
        if (!retryable || attempt >= limits.postgresTransactionAttemptsMax) throw error;
      }
    }
  }

  private async transactionOnce<T>(work: (client: Client) => Promise<T>): Promise<T> {
    let client: Client;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
    }
    let broken: Error | undefined;
    // The pool listens for errors on idle connections only. A checked-out connection that the server
    // ends (a restart, a terminated session) emits "error" here, and an unheard error would end the
    // process; it marks the connection broken, so it is discarded and the call answers unavailable.
    const onError = (error: Error) => {
      broken ??= error;
    };
    client.on("error", onError);
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      for (const action of this.afterCommitOf.get(client) ?? []) action();
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: Error) => {
        broken = rollbackError;
      });
      if (error instanceof HopperError) throw error;
      const code = (error as { code?: string }).code;
      if (broken || (code !== undefined && unavailableCodes.has(code))) {
        broken ??= error as Error;
        throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
      }
      throw error;
    } finally {
      this.afterCommitOf.delete(client);
      client.off("error", onError);
      client.release(broken);
    }
  }

  /** Runs one statement in its own implicit transaction: one round trip. Failures map as transaction's. */
  async statement<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const name = this.preparedName(text);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.pool.query<R>({ name, text, values });
      } catch (error) {
        const code = (error as { code?: string }).code;
        if ((code === "40P01" || code === "40001") && attempt < limits.postgresTransactionAttemptsMax)
          continue;
        if (code === undefined || unavailableCodes.has(code) || code.startsWith("08")) {
          throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
        }
        throw error;
      }
    }
  }

  /**
   * The name a one-statement call is prepared under. Each pooled connection then parses and plans it
   * once (PostgreSQL switches to a cached generic plan once it costs no more than the custom ones)
   * instead of at every call: the lease statement alone takes 0.35 ms to plan.
   */
  private preparedName(text: string): string {
    let name = this.preparedNames.get(text);
    if (!name) {
      name = `hopper_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
      this.preparedNames.set(text, name);
    }
    return name;
  }

  counterShard(): number {
    return Math.floor(this.random.float() * counterShards);
  }

  /**
   * Runs `action` once the transaction on `client` has committed; never if it rolls back. Announcements
   * to the other nodes go this way (cluster-link.ts), so that none tells of a change that was undone.
   */
  afterCommit(client: Client, action: () => void): void {
    const actions = this.afterCommitOf.get(client) ?? [];
    actions.push(action);
    this.afterCommitOf.set(client, actions);
  }

  /** True when no other call of this node holds or awaits a connection. */
  alone(): boolean {
    return this.pool.waitingCount === 0 && this.pool.idleCount === this.pool.totalCount;
  }

  /** Runs one statement outside any transaction, unprepared (a rare call); any failure is `unavailable`. */
  async unprepared(text: string, values: unknown[]): Promise<void> {
    try {
      await this.pool.query(text, values);
    } catch (error) {
      throw new HopperError("unavailable", `PostgreSQL is not reachable: ${(error as Error).message}`);
    }
  }

  async ping(): Promise<void> {
    await this.transaction((client) => client.query("SELECT 1"));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
