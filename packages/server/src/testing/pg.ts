/**
 * Helpers for end-to-end tests over PostgreSQL: where the test server is, a schema of its own for each
 * run, dropping it afterwards, a lock that keeps a test that restarts PostgreSQL from doing so while
 * another of these tests runs, and control of the local cluster (pg_ctlcluster) for that test.
 */
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";

/** The test database (CI sets it), e.g. postgres://postgres@127.0.0.1:5432/test; undefined skips. */
export const pgTestUrl: string | undefined = process.env.HOPPER_TEST_PG_URL;

export const pgSkipReason =
  "HOPPER_TEST_PG_URL is not set: no PostgreSQL to test against (e.g. postgres://postgres@127.0.0.1:5432/test)";

/**
 * Sessions that belong to this test process carry this application_name prefix (servers get it through
 * PGAPPNAME), so a test can tell its own sessions from everybody else's.
 */
export const pgAppNamePrefix = "hopper_e2e";

let nextSchema = 0;

/** A schema name no other run uses: `hopper_e2e_<label>_<pid>_<n>`, valid for `--pg-schema`. */
export function testSchemaName(label: string): string {
  return `${pgAppNamePrefix}_${label}_${process.pid}_${nextSchema++}`;
}

/** The application_name for this process's sessions, passed to servers as PGAPPNAME. */
export function testAppName(label: string): string {
  return `${pgAppNamePrefix}_${label}_${process.pid}`;
}

/** Runs `work` on a fresh connection and closes it, whatever happens. */
export async function withPgClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Drops each schema with everything in it; a schema that is not there is no error. */
export async function dropSchemas(url: string, schemas: readonly string[]): Promise<void> {
  if (schemas.length === 0) return;
  await withPgClient(url, async (client) => {
    for (const schema of schemas) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`not a schema name: ${schema}`);
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    }
  });
}

/**
 * The advisory lock between end-to-end tests that share the PostgreSQL server: a test that only uses
 * it holds the lock shared; a test that restarts the server takes it exclusively first, so it waits
 * for the others to finish and they wait for the restart. `node --test` runs test files in parallel.
 */
const serverRestartLockKey = 0x686f7072; // "hopr"
/** The application_name of every session that holds or waits for the restart lock. */
const lockAppNamePrefix = `${pgAppNamePrefix}_lock_`;

export interface PgLock {
  release(): Promise<void>;
}

/**
 * Holds the restart lock on a connection of its own until `release`. A shared holder that waits while
 * a restart takes the lock loses its connection to the restart; it then connects again, until
 * `timeoutMs` has passed.
 */
export async function holdRestartLock(
  url: string,
  mode: "shared" | "exclusive",
  timeoutMs: number,
): Promise<PgLock> {
  const deadline = Date.now() + timeoutMs;
  const lockFunction = mode === "shared" ? "pg_advisory_lock_shared" : "pg_advisory_lock";
  for (;;) {
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5_000,
      application_name: `${lockAppNamePrefix}${process.pid}`,
    });
    // A restart ends this session; the error must not crash the test process.
    client.on("error", () => {});
    try {
      await client.connect();
      const waitMs = Math.max(1, deadline - Date.now());
      await client.query(`SET lock_timeout = ${Math.ceil(waitMs)}`);
      await client.query(`SELECT ${lockFunction}($1)`, [serverRestartLockKey]);
      return { release: () => client.end().catch(() => {}) };
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() >= deadline) {
        throw new Error(`could not take the ${mode} PostgreSQL restart lock within ${timeoutMs} ms`, {
          cause: error,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** A local cluster as Debian's postgresql-common names it: `pg_ctlcluster <version> <name> …`. */
export interface LocalCluster {
  version: string;
  name: string;
  port: number;
}

/**
 * The local cluster that serves `url`, or the reason there is none that this process may restart:
 * not root, no pg_lsclusters, a remote host, or no cluster on the URL's port.
 */
export function findLocalCluster(url: string): LocalCluster | { skip: string } {
  const target = new URL(url);
  const port = Number(target.port || 5432);
  if (!["127.0.0.1", "localhost", "[::1]"].includes(target.hostname)) {
    return {
      skip: `PostgreSQL at ${target.hostname} is not local: this test restarts it with pg_ctlcluster`,
    };
  }
  if (process.getuid?.() !== 0) return { skip: "restarting PostgreSQL with pg_ctlcluster needs root" };
  const listed = spawnSync("pg_lsclusters", ["--no-header"], { encoding: "utf8" });
  if (listed.error || listed.status !== 0) {
    return { skip: `pg_lsclusters is not available: ${listed.error?.message ?? listed.stderr}` };
  }
  for (const line of listed.stdout.split("\n")) {
    const [version, name, clusterPort] = line.trim().split(/\s+/);
    if (version && name && Number(clusterPort) === port) return { version, name, port };
  }
  return { skip: `no local cluster listens on port ${port}:\n${listed.stdout}` };
}

const run = promisify(execFile);
/** A fast shutdown ends sessions at once; the checkpoint and the start take seconds, not minutes. */
const pgCtlTimeoutMs = 60_000;

/** Runs `pg_ctlcluster --skip-systemctl-redirect <version> <name> <action> …` and waits for it. */
export async function pgCtlCluster(cluster: LocalCluster, action: string, ...extra: string[]): Promise<void> {
  await run("pg_ctlcluster", ["--skip-systemctl-redirect", cluster.version, cluster.name, action, ...extra], {
    timeout: pgCtlTimeoutMs,
  });
}

/** Whether PostgreSQL at `url` accepts a connection and answers a query now. */
export async function pgAccepts(url: string): Promise<boolean> {
  try {
    await withPgClient(url, (client) => client.query("SELECT 1"));
    return true;
  } catch {
    return false;
  }
}

/** Polls until PostgreSQL accepts connections; throws after `timeoutMs`. */
export async function waitUntilPgAccepts(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pgAccepts(url))) {
    if (Date.now() > deadline)
      throw new Error(`PostgreSQL at ${url} did not accept connections in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts the cluster if it does not accept connections, and waits until it does: whatever a test did
 * to PostgreSQL, the tests after it and CI find it running.
 */
export async function ensurePgRunning(url: string, cluster: LocalCluster, timeoutMs: number): Promise<void> {
  if (await pgAccepts(url)) return;
  // It may be starting up already; "start" then fails with "already running", which is fine.
  await pgCtlCluster(cluster, "start").catch(() => {});
  await waitUntilPgAccepts(url, timeoutMs);
}

/**
 * Client sessions on the whole server that are neither this test's (by application_name) nor waiting on
 * the restart lock: a restart would break them. Described one per entry, for a skip reason.
 */
export async function otherPgSessions(url: string, ownAppNames: readonly string[]): Promise<string[]> {
  return withPgClient(url, async (client) => {
    const { rows } = await client.query<{ pid: number; datname: string; application_name: string }>(
      `SELECT pid, datname, application_name FROM pg_stat_activity
       WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
         AND NOT (application_name = ANY($1::text[])) AND NOT starts_with(application_name, $2)`,
      [ownAppNames, lockAppNamePrefix],
    );
    return rows.map((row) => `pid ${row.pid} on ${row.datname} (application_name "${row.application_name}")`);
  });
}
