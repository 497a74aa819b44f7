/**
 * The three stores an end-to-end test runs a server process on: an SQLite file, a log directory and a
 * PostgreSQL schema of its own. A test loops over `e2eStores` so that one body checks each store;
 * PostgreSQL is skipped, with the reason printed, when HOPPER_TEST_PG_URL is not set.
 */
import { dropSchemas, holdRestartLock, pgSkipReason, pgTestUrl, testAppName, testSchemaName } from "./pg.js";
import { createTempDir, type ServerProcessOptions } from "./server-process.js";

/** A shared hold on the restart lock waits at most this long for pg-restart.test.ts to finish. */
const restartLockWaitMs = 60_000;

/** A store opened for one test: the options of every server process on it, and how to remove it. */
export interface OpenedStore {
  /** The same each time: a server restarted with them finds what the last one kept. */
  readonly options: ServerProcessOptions;
  /** Removes the file, directory or schema (and releases what `open` held). */
  close(): Promise<void>;
}

export interface E2eStore {
  readonly name: "SQLite" | "log" | "PostgreSQL";
  /** Why this store is not tested in this run, or undefined when it is. */
  readonly skip: string | undefined;
  /** `label` names the PostgreSQL schema and sessions (letters, digits and _); `extra` adds options. */
  open(label: string, extra?: Partial<ServerProcessOptions>): Promise<OpenedStore>;
}

const sqlite: E2eStore = {
  name: "SQLite",
  skip: undefined,
  async open(_label, extra = {}) {
    const dir = createTempDir();
    return { options: { ...extra, dataFile: dir.file("hopper.db") }, close: async () => dir.remove() };
  },
};

const log: E2eStore = {
  name: "log",
  skip: undefined,
  async open(_label, extra = {}) {
    const dir = createTempDir();
    return { options: { ...extra, store: `log:${dir.file("log")}` }, close: async () => dir.remove() };
  },
};

const postgres: E2eStore = {
  name: "PostgreSQL",
  skip: pgTestUrl ? undefined : pgSkipReason,
  async open(label, extra = {}) {
    const url = pgTestUrl;
    if (url === undefined) throw new Error(pgSkipReason);
    // A test that restarts PostgreSQL waits for this one to end, and this one for its restart.
    const lock = await holdRestartLock(url, "shared", restartLockWaitMs);
    const pgSchema = testSchemaName(label);
    return {
      options: { ...extra, store: url, pgSchema, env: { ...extra.env, PGAPPNAME: testAppName(label) } },
      close: async () => {
        await dropSchemas(url, [pgSchema]);
        await lock.release();
      },
    };
  },
};

export const e2eStores: readonly E2eStore[] = [sqlite, log, postgres];
