/**
 * Opens the application's database from a URL, for the command line and test processes:
 * `postgres://…` (a `pg` pool) or `sqlite:<file>` (better-sqlite3, in WAL mode with a busy timeout, so
 * the relay and the application can share the file). Each driver is loaded only when asked for: both
 * are optional peer dependencies.
 */
import type { OutboxDatabase } from "./driver.js";

/** How long a SQLite statement waits for another process's write lock before it fails. */
const sqliteBusyTimeoutMs = 5_000;
/** Connections of the command's pool: the relay's claims, its LISTEN session and a status read. */
const pgPoolSizeMax = 4;

export interface OpenedDatabase {
  db: OutboxDatabase;
  dialect: "postgres" | "sqlite";
  close(): Promise<void>;
}

export async function openDatabase(url: string): Promise<OpenedDatabase> {
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    const pg = (await import("pg")).default;
    const pool = new pg.Pool({ connectionString: url, max: pgPoolSizeMax });
    // An idle client's error (the server restarting) must not crash the process; the next use fails.
    pool.on("error", () => {});
    return { db: pool, dialect: "postgres", close: () => pool.end() };
  }
  if (url.startsWith("sqlite:")) {
    const Database = (await import("better-sqlite3")).default;
    const db = new Database(url.slice("sqlite:".length));
    db.pragma("journal_mode = WAL");
    db.pragma(`busy_timeout = ${sqliteBusyTimeoutMs}`);
    return {
      db,
      dialect: "sqlite",
      close: async () => {
        db.close();
      },
    };
  }
  throw new Error(`--db must be postgres://… or sqlite:<file>, not ${JSON.stringify(url)}`);
}
