/**
 * `hopper outbox …`: the transactional outbox's own command, `hopper-outbox` of `@hopper/outbox`
 * (docs/outbox.md), run with the same arguments. The relay is the outbox package's, so that an
 * application can run it with that package and its database driver alone; this entry is for an
 * operator who has the broker's command at hand. Without `@hopper/outbox` installed it says so.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";

/** The path of `hopper-outbox`'s script, or undefined when `@hopper/outbox` cannot be found. */
function outboxBinPath(): string | undefined {
  try {
    const entry = fileURLToPath(import.meta.resolve("@hopper/outbox"));
    return join(dirname(entry), "..", "bin", "hopper-outbox.js");
  } catch {
    return undefined;
  }
}

export function addOutboxCommand(program: Command): void {
  program
    .command("outbox")
    .description(
      "the outbox relay and its failed rows: runs hopper-outbox of @hopper/outbox (relay|migrate|status|retry|drop)",
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument("[arguments...]", "hopper-outbox's command and flags")
    .action(async () => {
      const bin = outboxBinPath();
      if (!bin) {
        console.error(
          "hopper outbox runs @hopper/outbox's command: npm install @hopper/outbox (and pg or better-sqlite3)",
        );
        process.exit(2);
      }
      // The raw arguments after `outbox`, flags included, exactly as given.
      const args = process.argv.slice(process.argv.indexOf("outbox") + 1);
      const child = spawn(process.execPath, [bin, ...args], { stdio: "inherit" });
      const code = await new Promise<number>((resolve) =>
        child.on("exit", (exitCode) => resolve(exitCode ?? 1)),
      );
      process.exit(code);
    });
}
