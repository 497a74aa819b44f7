/**
 * `hopper log verify|salvage`: offline tools for a log store's directory (docs/log-store.md,
 * "Recovery"). Both take the directory's lock, so they refuse a log that a running server writes.
 * Exit codes: verify 0 when a server would open the log, 1 when it would refuse it; salvage 0 when it
 * copied everything, 1 when it left damaged bytes behind.
 */
import type { Command } from "commander";
import { exitCodes } from "./flags.js";

interface SalvageFlags {
  to: string;
  skipDamaged?: boolean;
}

export function addLogCommands(program: Command): void {
  const log = program.command("log").description("check or salvage a log store's directory, offline");

  log
    .command("verify <dir>")
    .description("read the log as a server's recovery would and print what it finds; changes nothing")
    .action(async (dir: string) => {
      // Loaded here: the store modules are not needed by the other client commands.
      const { verifyLog } = await import("../store/log/log-salvage.js");
      const result = verifyLog(dir);
      for (const line of result.lines) console.log(line);
      process.exitCode = result.opens ? exitCodes.ok : exitCodes.failure;
    });

  log
    .command("salvage <dir>")
    .description("copy every intact record up to the first damage into a new log")
    .requiredOption("--to <dir>", "the new log's directory (must not exist, or be empty)")
    .option(
      "--skip-damaged",
      "also copy the intact records after each damaged region (their messages may redeliver, or refer to what was lost)",
    )
    .action(async (dir: string, flags: SalvageFlags) => {
      const { salvageLog } = await import("../store/log/log-salvage.js");
      const { LogStore } = await import("../store/log/log-store.js");
      const { systemRandom } = await import("../random.js");
      const result = await salvageLog(dir, flags.to, { skipDamaged: flags.skipDamaged ?? false });
      console.log(`copied ${result.recordsCopied} record(s) into ${flags.to}`);
      for (const { fileName, offset, reason } of result.damage)
        console.log(`left behind: damage in ${fileName} at offset ${offset}: ${reason}`);
      if (result.bytesLeftBehind > 0) console.log(`${result.bytesLeftBehind} byte(s) of segments not copied`);
      // The new log is opened as a server would open it: its records must replay.
      const store = LogStore.open({ dir: flags.to, random: systemRandom });
      await store.close();
      console.log(`${flags.to} opens as a log store: serve it with --store log:${flags.to}`);
      process.exitCode = result.damage.length === 0 ? exitCodes.ok : exitCodes.failure;
    });
}
