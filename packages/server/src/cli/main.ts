#!/usr/bin/env node
/** The `hopper` command. */
import { Command } from "commander";
import { serve } from "./serve.js";

const program = new Command();
program.name("hopper").description("Hopper, a durable message broker").version("0.1.0");

program
  .command("serve")
  .description("run the broker on an embedded SQLite file")
  .option("--host <host>", "address to listen on", process.env.HOPPER_HOST ?? "127.0.0.1")
  .option("--port <port>", "port to listen on (0 picks a free one)", process.env.HOPPER_PORT ?? "7171")
  .option("--data <file>", "SQLite data file", process.env.HOPPER_DATA ?? "./hopper-data/hopper.db")
  .option("--durability <mode>", "fsync (survives power loss) or os (survives process crash)", "fsync")
  .option("--api-key <key>", "accept this API key (repeatable; also HOPPER_API_KEYS)", collect, [])
  .option("--log-level <level>", "fatal, error, warn, info, debug", "warn")
  .action(serve);

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

program.parseAsync().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
