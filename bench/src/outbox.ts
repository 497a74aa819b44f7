/**
 * `npm run bench -- outbox`: the transactional outbox end to end. An application commits rows with
 * writeOutbox into its own database (SQLite, and PostgreSQL unless --no-postgres), the relay publishes
 * them to a real `hopper serve` (SQLite, fsync), and the bench reports
 *
 * - throughput: the application commits `--rows` rows over `--keys` keys, `--rows-per-commit` per
 *   transaction, with no relay running; then the relay drains that backlog (rows/s to the last mark);
 * - latency: commit-to-publish (the application's commit to the relay's mark, which follows the
 *   broker's confirm) p50/p99, one row per commit at `--rate` rows/s.
 *
 * Modes (`--mode poll|wal|all`, default all): polling on SQLite and on PostgreSQL (`--pg-url`), and
 * both polling and WAL on a private PostgreSQL cluster with wal_level=logical and the server's
 * durability (fsync, synchronous commit), started by the bench as the WAL tests start theirs, so the
 * two modes compare on one server. In WAL mode the application inserts and deletes each row, and the
 * latency ends at Hopper's confirm (the relay has no mark to write; it acknowledges the slot).
 *
 * The relay and the application share this process, as they would in a service that runs its relay
 * in-process.
 */
import { parseArgs } from "node:util";
import { HopperClient } from "@hopper/client";
import { migrate, type OutboxEvent, type OutboxRow, runRelay, writeOutbox } from "@hopper/outbox";
import type { Database as SqliteDatabase } from "better-sqlite3";
import pg from "pg";
import { pgUrlDefault } from "./limits.js";
import { startBenchServer } from "./server-process.js";
import { percentiles } from "./statistics.js";

/** The outbox package's private-cluster helper (src/testing/private-postgres.ts), loaded from its
 * build as server-process.ts loads the server's: it is not part of the package's exports. */
const privatePostgresUrl = new URL("../../packages/outbox/dist/testing/private-postgres.js", import.meta.url);
interface PrivatePostgresModule {
  privatePostgresSkipReason(): string | undefined;
  startPrivatePostgres(options: { durable?: boolean }): Promise<{ url: string; stop(): Promise<void> }>;
}

/** How long a phase may take before the bench gives up on it: a stalled relay must not hang the run. */
const phaseTimeoutMs = 120_000;

interface OutboxBenchOptions {
  rows: number;
  keys: number;
  rowsPerCommit: number;
  rate: number;
  latencyRows: number;
  pgUrl: string | undefined;
  modes: ("poll" | "wal")[];
}

type RelayMode = "poll" | "wal";

interface AppDatabase {
  label: string;
  db: SqliteDatabase | pg.Pool;
  /** Writes the events in one transaction; resolves after the commit with its time (ms). */
  commit(events: OutboxEvent[]): Promise<{ ids: string[]; committedAt: number }>;
  close(): Promise<void>;
}

async function sqliteApp(dir: string): Promise<AppDatabase> {
  const Database = (await import("better-sqlite3")).default;
  const db = new Database(`${dir}/app.db`);
  db.pragma("journal_mode = WAL");
  db.pragma("busy_timeout = 5000");
  return {
    label: "SQLite",
    db,
    async commit(events) {
      const ids = db.transaction(() => events.map((event) => writeOutbox(db, event).id))();
      return { ids, committedAt: Date.now() };
    },
    close: async () => {
      db.close();
    },
  };
}

async function postgresApp(
  url: string,
  schema: string,
  label: string,
  mode: RelayMode,
): Promise<AppDatabase> {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const writer = await pool.connect();
  return {
    label,
    db: pool,
    async commit(events) {
      await writer.query("BEGIN");
      const ids: string[] = [];
      for (const event of events) ids.push((await writeOutbox(writer, event, { schema, mode })).id);
      await writer.query("COMMIT");
      return { ids, committedAt: Date.now() };
    },
    async close() {
      writer.release();
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    },
  };
}

interface PhaseResult {
  database: string;
  mode: RelayMode;
  /** Rows the application committed per second while writing the backlog (no relay running). */
  commitsPerSecond: number;
  rowsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
}

async function runPhases(
  app: AppDatabase,
  hopperUrl: string,
  queue: string,
  options: OutboxBenchOptions,
  mode: RelayMode,
  schema?: string,
): Promise<PhaseResult> {
  const tables = schema === undefined ? {} : { schema };
  await migrate(app.db, { ...tables, wal: mode === "wal" });
  const committedAt = new Map<string, number>();
  // By id, as the relay reports them: in WAL mode the relay can publish a row before the
  // application's COMMIT has returned (the walsender and the backend wake together), so a
  // publish may come before its commit time is known.
  const publishedAt = new Map<string, number>();
  let published = 0;
  let measureLatency = false;
  const waitUntil = async (what: string, done: () => boolean) => {
    const deadline = Date.now() + phaseTimeoutMs;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`outbox bench: timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  // Throughput: the application commits every row first, then the relay drains the backlog, so the
  // figure is the relay's and not the application's commit rate (reported beside it).
  const event = (n: number): OutboxEvent => ({
    destination: { queue },
    key: `k${n % options.keys}`,
    body: { n },
  });
  const start = Date.now();
  for (let n = 0; n < options.rows; n += options.rowsPerCommit) {
    const batch = [];
    for (let i = n; i < Math.min(n + options.rowsPerCommit, options.rows); i++) batch.push(event(i));
    await app.commit(batch);
  }
  const commitsPerSecond = options.rows / ((Date.now() - start) / 1000);
  const relay = runRelay({
    db: app.db,
    hopper: { url: hopperUrl },
    mode,
    ...tables,
    onPublished: (rows: readonly OutboxRow[], markedAt: number) => {
      published += rows.length;
      if (!measureLatency) return;
      for (const row of rows) publishedAt.set(row.id, markedAt);
    },
  });
  try {
    const drainStart = Date.now();
    await waitUntil("the throughput rows", () => published >= options.rows);
    const rowsPerSecond = options.rows / ((Date.now() - drainStart) / 1000);

    // Latency: one row per commit at a fixed rate.
    measureLatency = true;
    const latencyStart = Date.now();
    const intervalMs = 1000 / options.rate;
    for (let n = 0; n < options.latencyRows; n++) {
      const dueAt = latencyStart + n * intervalMs;
      const waitMs = dueAt - Date.now();
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      const { ids, committedAt: at } = await app.commit([event(n)]);
      committedAt.set(ids[0] as string, at);
    }
    await waitUntil("the latency rows", () => publishedAt.size >= options.latencyRows);
    const latency = percentiles([...committedAt].map(([id, at]) => (publishedAt.get(id) as number) - at));
    return {
      database: app.label,
      mode,
      commitsPerSecond,
      rowsPerSecond,
      latencyP50Ms: latency.p50,
      latencyP99Ms: latency.p99,
    };
  } finally {
    await relay.stop();
  }
}

/** The flags, checked; undefined (after saying why) when one is wrong. */
function parseOutboxOptions(argv: string[]): OutboxBenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      rows: { type: "string", default: "5000" },
      keys: { type: "string", default: "100" },
      "rows-per-commit": { type: "string", default: "10" },
      rate: { type: "string", default: "200" },
      "latency-rows": { type: "string", default: "2000" },
      "pg-url": { type: "string", default: pgUrlDefault },
      "no-postgres": { type: "boolean", default: false },
      mode: { type: "string", default: "all" },
    },
  });
  if (!["poll", "wal", "all"].includes(values.mode)) {
    console.error("outbox bench: --mode is poll, wal or all");
    return undefined;
  }
  const options: OutboxBenchOptions = {
    rows: Number(values.rows),
    keys: Number(values.keys),
    rowsPerCommit: Number(values["rows-per-commit"]),
    rate: Number(values.rate),
    latencyRows: Number(values["latency-rows"]),
    pgUrl: values["no-postgres"] ? undefined : values["pg-url"],
    modes: values.mode === "all" ? ["poll", "wal"] : [values.mode as RelayMode],
  };
  for (const [name, value] of Object.entries(options)) {
    if (typeof value === "number" && !(Number.isInteger(value) && value > 0)) {
      console.error(`outbox bench: --${name} must be a positive integer`);
      return undefined;
    }
  }
  return options;
}

interface AppSpec {
  open: () => Promise<AppDatabase>;
  mode: RelayMode;
  schema?: string;
}

/** The phases to run, in order, and the private cluster started for them (stopped by the caller). */
async function benchApps(
  options: OutboxBenchOptions,
  dir: string,
): Promise<{ apps: AppSpec[]; cluster: { stop(): Promise<void> } | undefined }> {
  const apps: AppSpec[] = [];
  if (options.modes.includes("poll")) apps.push({ open: () => sqliteApp(dir), mode: "poll" });
  const schema = `hopper_bench_outbox_${process.pid}`;
  const pgUrl = options.pgUrl;
  if (pgUrl === undefined) return { apps, cluster: undefined };
  if (options.modes.includes("poll")) {
    apps.push({ open: () => postgresApp(pgUrl, schema, "PostgreSQL", "poll"), mode: "poll", schema });
  }
  const privatePostgres = (await import(privatePostgresUrl.href)) as PrivatePostgresModule;
  const reason = privatePostgres.privatePostgresSkipReason();
  if (reason) {
    console.error(`[bench] outbox: no wal_level=logical cluster: ${reason}`);
    return { apps, cluster: undefined };
  }
  const cluster = await privatePostgres.startPrivatePostgres({ durable: true });
  for (const mode of options.modes) {
    const label = "PostgreSQL, private cluster (wal_level=logical)";
    const modeSchema = `${schema}_${mode}`;
    apps.push({ open: () => postgresApp(cluster.url, modeSchema, label, mode), mode, schema: modeSchema });
  }
  return { apps, cluster };
}

function printResults(options: OutboxBenchOptions, results: PhaseResult[]): void {
  console.log(
    `\noutbox: ${options.rows} rows over ${options.keys} keys, ${options.rowsPerCommit} per commit; latency at ${options.rate} rows/s, one per commit (Hopper on SQLite, fsync)\n`,
  );
  console.log(
    "| application database | mode | rows committed/s | relay drain rows/s | commit→publish p50 (ms) | p99 (ms) |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const result of results) {
    const mode = result.mode === "wal" ? "WAL" : "polling";
    console.log(
      `| ${result.database} | ${mode} | ${result.commitsPerSecond.toFixed(0)} | ${result.rowsPerSecond.toFixed(0)} | ${result.latencyP50Ms} | ${result.latencyP99Ms} |`,
    );
  }
}

export async function runOutboxBench(argv: string[]): Promise<number> {
  const options = parseOutboxOptions(argv);
  if (options === undefined) return 2;
  const server = await startBenchServer({ store: { kind: "sqlite", durability: "fsync" } });
  const hopper = new HopperClient({ url: server.url });
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(`${tmpdir()}/hopper-bench-outbox-`);
  const results: PhaseResult[] = [];
  let cluster: { stop(): Promise<void> } | undefined;
  try {
    const planned = await benchApps(options, dir);
    cluster = planned.cluster;
    for (const [index, spec] of planned.apps.entries()) {
      const queue = `outbox-bench-${index}`;
      await hopper.putQueue(queue);
      const app = await spec.open();
      try {
        console.error(`[bench] outbox on ${app.label}, ${spec.mode}`);
        results.push(await runPhases(app, server.url, queue, options, spec.mode, spec.schema));
      } finally {
        await app.close();
        // Each phase on a broker as small as the first's: a later phase must not pay for the earlier
        // ones' messages in Hopper's file.
        await hopper.deleteQueue(queue);
      }
    }
  } finally {
    await hopper.close();
    await server.stop();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  printResults(options, results);
  return 0;
}
