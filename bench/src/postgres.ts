/**
 * The bench's own PostgreSQL chores, outside any system under test: naming a fresh schema per run,
 * dropping it afterwards, and finding the server processes (backends) that serve a target's sessions.
 */
import pg from "pg";
import { schemaDropTimeoutMs } from "./limits.js";

const schemaPattern = /^[a-z_][a-z0-9_]{0,62}$/;
let schemasNamed = 0;
/** Schemas named and not dropped yet, with their database: what an interrupted run must still drop. */
const schemasToDrop = new Map<string, string>();

/**
 * A schema no other run uses: `bench_<label>_<pid>_<n>`, which Hopper's --pg-schema accepts. It is
 * remembered until `dropSchema`, so `dropLeftoverSchemas` can drop it after a failure or Ctrl-C.
 */
export function benchSchemaName(label: string, url: string): string {
  const name = `bench_${label}_${process.pid}_${schemasNamed++}`;
  if (!schemaPattern.test(name)) throw new Error(`"${name}" is not a valid schema name`);
  schemasToDrop.set(name, url);
  return name;
}

/** Drops every schema this process named and has not dropped yet. */
export async function dropLeftoverSchemas(): Promise<void> {
  await Promise.allSettled([...schemasToDrop].map(([schema, url]) => dropSchema(url, schema)));
}

/** The application_name of one target's sessions in this run, so their backends can be found. */
export function benchAppName(label: string): string {
  return `hopper_bench_${label}_${process.pid}`;
}

/** Runs `work` on a connection of its own and closes it, whatever happens. */
export async function withPgClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: 5_000,
    application_name: "hopper_bench_admin",
  });
  client.on("error", () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Drops the schema with everything in it; a schema that is not there is no error. */
export async function dropSchema(url: string, schema: string): Promise<void> {
  if (!schemaPattern.test(schema)) throw new Error(`not a schema name: ${schema}`);
  await withPgClient(url, async (client) => {
    await client.query(`SET lock_timeout = ${schemaDropTimeoutMs}`);
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
  schemasToDrop.delete(schema);
}

/**
 * Watches the backends of one application_name. One connection is kept open for the whole run, so
 * that looking does not open sessions of its own while a workload runs.
 */
export class BackendWatch {
  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<BackendWatch> {
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5_000,
      application_name: "hopper_bench_monitor",
    });
    client.on("error", () => {});
    await client.connect();
    return new BackendWatch(client);
  }

  /** Process ids of the backends serving sessions named `appName`. */
  async pids(appName: string): Promise<number[]> {
    const { rows } = await this.client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
      [appName],
    );
    return rows.map((row) => row.pid);
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => {});
  }
}

/** The server's version as it reports it (`SHOW server_version`), e.g. "15.20 (Debian 15.20-0+deb12u1)". */
export async function postgresVersion(url: string): Promise<string> {
  return withPgClient(url, async (client) => {
    const { rows } = await client.query<{ server_version: string }>("SHOW server_version");
    return rows[0]?.server_version.split(" ")[0] ?? "unknown";
  });
}
