/**
 * The `hopper-outbox` command: `relay` runs the relay as a process; `migrate` creates the tables;
 * `status`, `retry` and `drop` manage failed rows. It ships with @hopper/outbox rather than as
 * `hopper outbox …` in the server's command because a relay runs beside the application, where the
 * broker's package (and its HTTP server) has no business being installed.
 */
import { Command, Option } from "commander";
import { dropFailed, migrate, outboxStatus, retryFailed } from "./admin.js";
import { openDatabase } from "./open-database.js";
import { runRelay } from "./relay.js";
import type { TableOptions } from "./tables.js";

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

dbCommand(program, "relay", "publish the outbox's rows to Hopper until SIGINT or SIGTERM")
  .addOption(new Option("--url <url>", "Hopper's URL").env("HOPPER_URL").default("http://127.0.0.1:7171"))
  .addOption(new Option("--api-key <key>", "Hopper API key").env("HOPPER_API_KEY"))
  .option("--migrate", "create or upgrade the outbox tables first")
  .action(async (flags: DbFlags & { url: string; apiKey?: string; migrate?: boolean }) => {
    const opened = await openDatabase(flags.db);
    const tables = tableOptions(flags);
    if (flags.migrate) await migrate(opened.db, tables);
    const relay = runRelay({
      db: opened.db,
      hopper: { url: flags.url, ...(flags.apiKey ? { apiKey: flags.apiKey } : {}) },
      ...tables,
    });
    console.log(`hopper-outbox relay: ${opened.dialect} → ${flags.url}`);
    const timer = setInterval(() => {
      void relay.metrics().then(
        (metrics) => console.log(JSON.stringify({ at: new Date().toISOString(), ...metrics })),
        (error) => console.error("[hopper-outbox] metrics:", error instanceof Error ? error.message : error),
      );
    }, metricsLogIntervalMs);
    const stop = () => {
      clearInterval(timer);
      void relay
        .stop()
        .then(() => opened.close())
        .then(() => process.exit(0));
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });

dbCommand(program, "migrate", "create or upgrade the outbox tables").action(async (flags: DbFlags) => {
  const { applied } = await withDatabase(flags, (opened) => migrate(opened.db, tableOptions(flags)));
  console.log(applied.length > 0 ? `applied migrations ${applied.join(", ")}` : "up to date");
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
