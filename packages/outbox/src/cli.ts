/**
 * The `hopper-outbox` command: `relay` runs the relay as a process (polling, or tailing the WAL), with
 * its metrics on a loopback port if asked; `migrate` creates the tables (and the WAL mode's slot);
 * `status`, `retry` and `drop` manage failed rows. It ships with @hopper/outbox rather than as
 * `hopper outbox …` in the server's command because a relay runs beside the application, where the
 * broker's package (and its HTTP server) has no business being installed.
 */
import { createServer, type Server } from "node:http";
import { Command, InvalidArgumentError, Option } from "commander";
import { Registry } from "prom-client";
import { dropFailed, migrate, outboxStatus, retryFailed } from "./admin.js";
import { openDatabase } from "./open-database.js";
import { runRelay } from "./relay.js";
import type { TableOptions, WalOptions } from "./tables.js";

/** How often a running relay prints its metrics. */
const metricsLogIntervalMs = 60_000;

interface DbFlags {
  db: string;
  schema?: string;
  prefix?: string;
  json?: boolean;
}

function tableOptions(flags: DbFlags): TableOptions {
  return {
    ...(flags.schema !== undefined ? { schema: flags.schema } : {}),
    ...(flags.prefix !== undefined ? { prefix: flags.prefix } : {}),
  };
}

interface WalFlags {
  slot?: string;
  publication?: string;
}

function walOptions(flags: WalFlags): WalOptions {
  return {
    ...(flags.slot !== undefined ? { slotName: flags.slot } : {}),
    ...(flags.publication !== undefined ? { publicationName: flags.publication } : {}),
  };
}

function withWalFlags(command: Command): Command {
  return command
    .option("--slot <name>", "WAL mode: the replication slot (default <prefix>outbox_<schema>)")
    .option("--publication <name>", "WAL mode: the publication (default <prefix>outbox_<schema>)");
}

function port(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 65_535) {
    throw new InvalidArgumentError("a port, 1 to 65535");
  }
  return parsed;
}

/** Serves the registry at /metrics on loopback only: the relay's figures are for a local scraper. */
async function serveMetrics(registry: Registry, metricsPort: number): Promise<Server> {
  const server = createServer((request, response) => {
    if (request.method !== "GET" || request.url?.split("?")[0] !== "/metrics") {
      response.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { "content-type": registry.contentType }).end(text),
      (error) => response.writeHead(500).end(error instanceof Error ? error.message : String(error)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(metricsPort, "127.0.0.1", () => resolve());
  });
  return server;
}

function dbCommand(program: Command, name: string, description: string): Command {
  return program
    .command(name)
    .description(description)
    .addOption(
      new Option("--db <url>", "the application's database: postgres://… or sqlite:<file>")
        .env("HOPPER_OUTBOX_DB")
        .makeOptionMandatory(),
    )
    .option("--schema <schema>", "PostgreSQL schema of the outbox tables (default public)")
    .option("--prefix <prefix>", "prefix of the outbox table names (default hopper_)");
}

/** Opens the database, runs `work`, closes it, whatever happens. */
async function withDatabase<T>(
  flags: DbFlags,
  work: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>,
) {
  const opened = await openDatabase(flags.db);
  try {
    return await work(opened);
  } finally {
    await opened.close();
  }
}

const program = new Command();
program.name("hopper-outbox").description("Hopper's transactional outbox relay").version("0.1.0");

withWalFlags(dbCommand(program, "relay", "publish the outbox's rows to Hopper until SIGINT or SIGTERM"))
  .addOption(new Option("--url <url>", "Hopper's URL").env("HOPPER_URL").default("http://127.0.0.1:7171"))
  .addOption(new Option("--api-key <key>", "Hopper API key").env("HOPPER_API_KEY"))
  .addOption(
    new Option("--mode <mode>", "poll: read the outbox table; wal: tail its inserts from a slot (PostgreSQL)")
      .choices(["poll", "wal"])
      .default("poll"),
  )
  .option("--migrate", "create or upgrade the outbox tables first (and, with --mode wal, the slot)")
  .option("--metrics-port <port>", "serve Prometheus metrics at http://127.0.0.1:<port>/metrics", port)
  .action(
    async (
      flags: DbFlags &
        WalFlags & {
          url: string;
          apiKey?: string;
          mode: "poll" | "wal";
          migrate?: boolean;
          metricsPort?: number;
        },
    ) => {
      const opened = await openDatabase(flags.db);
      const tables = tableOptions(flags);
      const wal = walOptions(flags);
      if (flags.migrate) {
        const migrated = await migrate(opened.db, { ...tables, ...(flags.mode === "wal" ? { wal } : {}) });
        if (migrated.wal?.warning) console.error(`[hopper-outbox] ${migrated.wal.warning}`);
      }
      const registry = new Registry();
      const relay = runRelay({
        db: opened.db,
        hopper: { url: flags.url, ...(flags.apiKey ? { apiKey: flags.apiKey } : {}) },
        mode: flags.mode,
        registry,
        ...tables,
        ...wal,
      });
      const metricsServer =
        flags.metricsPort === undefined ? undefined : await serveMetrics(registry, flags.metricsPort);
      const metricsAt = metricsServer ? `; metrics on http://127.0.0.1:${flags.metricsPort}/metrics` : "";
      console.log(`hopper-outbox relay: ${opened.dialect} (${flags.mode}) → ${flags.url}${metricsAt}`);
      const timer = setInterval(() => {
        void relay.metrics().then(
          (metrics) => console.log(JSON.stringify({ at: new Date().toISOString(), ...metrics })),
          (error) =>
            console.error("[hopper-outbox] metrics:", error instanceof Error ? error.message : error),
        );
      }, metricsLogIntervalMs);
      const stop = () => {
        clearInterval(timer);
        metricsServer?.close();
        void relay
          .stop()
          .then(() => opened.close())
          .then(() => process.exit(0));
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    },
  );

withWalFlags(dbCommand(program, "migrate", "create or upgrade the outbox tables"))
  .option("--wal", "also create the WAL mode's publication and replication slot (PostgreSQL)")
  .action(async (flags: DbFlags & WalFlags & { wal?: boolean }) => {
    const tables = tableOptions(flags);
    const { applied, wal } = await withDatabase(flags, (opened) =>
      migrate(opened.db, { ...tables, ...(flags.wal ? { wal: walOptions(flags) } : {}) }),
    );
    console.log(applied.length > 0 ? `applied migrations ${applied.join(", ")}` : "up to date");
    if (wal) {
      const created = wal.created.length > 0 ? `created ${wal.created.join(" and ")}` : "both exist";
      console.log(
        `WAL: slot ${wal.slot}, publication ${wal.publication}: ${created}; max_slot_wal_keep_size ${wal.maxSlotWalKeepSize}`,
      );
      if (wal.warning) console.error(`warning: ${wal.warning}`);
    }
  });

dbCommand(program, "status", "pending and failed rows; each failed row with the rows of its key behind it")
  .option("--json", "print JSON")
  .action(async (flags: DbFlags) => {
    const status = await withDatabase(flags, (opened) => outboxStatus(opened.db, tableOptions(flags)));
    if (flags.json) {
      console.log(JSON.stringify(status, null, 2));
      return;
    }
    const oldest =
      status.oldestPendingCreatedAt === undefined
        ? ""
        : `, oldest written ${new Date(status.oldestPendingCreatedAt).toISOString()}`;
    console.log(`pending ${status.pendingRows}${oldest}; failed ${status.failedRows}`);
    for (const row of status.failed) {
      const destination =
        "queue" in row.destination
          ? `queue ${row.destination.queue}`
          : `exchange ${row.destination.exchange}`;
      console.log(
        `${row.id}  ${destination}  key ${row.key ?? "(none)"}  ${row.error?.code}: ${row.error?.message}  ` +
          `(${row.waitingBehind} waiting behind it)`,
      );
    }
  });

dbCommand(program, "retry", "make failed rows pending again")
  .argument("[ids...]", "ids of failed rows")
  .option("--all", "every failed row")
  .action(async (ids: string[], flags: DbFlags & { all?: boolean }) => {
    if (ids.length === 0 && !flags.all)
      program.error("name the failed rows' ids, or give --all", { exitCode: 2 });
    const count = await withDatabase(flags, (opened) =>
      retryFailed(opened.db, flags.all ? "all" : ids, tableOptions(flags)),
    );
    console.log(`${count} row(s) pending again`);
  });

dbCommand(program, "drop", "delete failed rows, so that their keys go on without them")
  .argument("<ids...>", "ids of failed rows")
  .action(async (ids: string[], flags: DbFlags) => {
    const count = await withDatabase(flags, (opened) => dropFailed(opened.db, ids, tableOptions(flags)));
    console.log(`${count} row(s) dropped`);
  });

program.parseAsync(process.argv).catch((error) => {
  console.error(`hopper-outbox: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
