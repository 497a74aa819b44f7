#!/usr/bin/env node
/** The `hopper` command. */
import { Command } from "commander";
import { addDlqCommands } from "./dlq-commands.js";
import { addConnectionOptions, reportFailure } from "./flags.js";
import { addInboxCommands } from "./inbox-commands.js";
import { addLogCommands } from "./log-commands.js";
import { addMessageCommands } from "./message-commands.js";
import { addOutboxCommand } from "./outbox-command.js";
import { addQueueCommands } from "./queue-commands.js";
import type { ServeFlags } from "./serve.js";
import { addStreamCommands } from "./stream-commands.js";

const program = new Command();
program.name("hopper").description("Hopper, a durable message broker").version("0.1.0");

program
  .command("serve")
  .description(
    "run the broker on an embedded SQLite file, on an append-only log, or as one of many nodes over PostgreSQL",
  )
  .option("--host <host>", "address to listen on", process.env.HOPPER_HOST ?? "127.0.0.1")
  .option("--port <port>", "port to listen on (0 picks a free one)", process.env.HOPPER_PORT ?? "7171")
  .option("--data <file>", "SQLite data file", process.env.HOPPER_DATA ?? "./hopper-data/hopper.db")
  .option("--durability <mode>", "fsync (survives power loss) or os (survives process crash)", "fsync")
  .option(
    "--store <url>",
    "postgres://… to keep state in PostgreSQL, or log:<directory> for the log store, instead of --data",
    process.env.HOPPER_STORE,
  )
  .option(
    "--pg-schema <schema>",
    "PostgreSQL schema for Hopper's tables",
    process.env.HOPPER_PG_SCHEMA ?? "hopper",
  )
  .option("--api-key <key>", "accept this API key (repeatable; also HOPPER_API_KEYS)", collect, [])
  // The secret's environment variable is read by serve, not given as a default: --help prints defaults.
  .option(
    "--jwt-secret <secret>",
    "accept device tokens (JWT, HS256) signed with this secret of 32+ bytes (also HOPPER_JWT_SECRET)",
  )
  .option("--jwt-jwks <file>", "accept device tokens (JWT, RS256/ES256) signed by a key of this JWKS file")
  .option("--log-level <level>", "fatal, error, warn, info, debug", "warn")
  .option(
    "--skip-integrity-check",
    "SQLite: start without PRAGMA quick_check of the file (it reads all of it: slow on a very large file)",
  )
  .action(serve);

// Program options stop at the command name: `serve --api-key` names a key to accept, while the
// program's --api-key is the key a client command sends, and without this the program's would take it.
// Client commands take --url, --api-key and --json after their name too.
program.enablePositionalOptions();
addConnectionOptions(program);
// Set after `serve` is added, so `serve` keeps commander's own exit code 1 for its bad flags; the
// client commands, added below, inherit the override and exit 2 on a bad flag.
program.exitOverride();
addQueueCommands(program);
addMessageCommands(program);
addDlqCommands(program);
addLogCommands(program);
addInboxCommands(program);
addStreamCommands(program);
addOutboxCommand(program);

/**
 * Loads the server (Fastify, SQLite, metrics) only when `serve` runs: importing it costs most of a
 * second, which every client command would otherwise pay.
 */
async function serve(flags: ServeFlags): Promise<void> {
  const { serve: run } = await import("./serve.js");
  await run(flags);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

// Exits at once, as before the client commands existed: a failed `serve` may hold open handles that
// would otherwise keep the process alive.
program.parseAsync().catch((error: unknown) => {
  process.exit(reportFailure(error));
});
