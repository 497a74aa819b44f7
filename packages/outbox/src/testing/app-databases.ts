/**
 * The application databases the outbox's tests run on: a SQLite file, and PostgreSQL in a schema of
 * its own for each test (skipped, with the reason, when HOPPER_TEST_PG_URL is not set, as the server's
 * tests do).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type OpenedDatabase, openDatabase } from "../open-database.js";
import type { TableOptions } from "../tables.js";

export const pgTestUrl: string | undefined = process.env.HOPPER_TEST_PG_URL;
export const pgSkipReason =
  "HOPPER_TEST_PG_URL is not set: no PostgreSQL to test against (e.g. postgres://postgres@127.0.0.1:5432/test)";

export interface TestDatabase {
  /** What a child process opens: `sqlite:<file>` or the PostgreSQL URL. */
  readonly url: string;
  readonly tables: TableOptions;
  /** A new connection (pool) to it; closed by `remove`. */
  open(): Promise<OpenedDatabase>;
  remove(): Promise<void>;
}

export interface TestDatabaseKind {
  label: "sqlite" | "postgres";
  skip: string | undefined;
  create(): Promise<TestDatabase>;
}

let nextSchema = 0;

function tracked(url: string, tables: TableOptions, cleanup: () => Promise<void>): TestDatabase {
  const opened: OpenedDatabase[] = [];
  return {
    url,
    tables,
    async open() {
      const database = await openDatabase(url);
      opened.push(database);
      return database;
    },
    async remove() {
      for (const database of opened) await database.close().catch(() => {});
      await cleanup();
    },
  };
}

export const testDatabaseKinds: TestDatabaseKind[] = [
  {
    label: "sqlite",
    skip: undefined,
    async create() {
      const dir = mkdtempSync(join(tmpdir(), "hopper-outbox-"));
      return tracked(`sqlite:${join(dir, "app.db")}`, {}, async () =>
        rmSync(dir, { recursive: true, force: true }),
      );
    },
  },
  {
    label: "postgres",
    skip: pgTestUrl === undefined ? pgSkipReason : undefined,
    async create() {
      const url = pgTestUrl as string;
      const schema = `hopper_outbox_test_${process.pid}_${nextSchema++}`;
      return tracked(url, { schema }, async () => {
        const admin = await openDatabase(url);
        await (admin.db as import("pg").Pool).query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await admin.close();
      });
    },
  },
];
