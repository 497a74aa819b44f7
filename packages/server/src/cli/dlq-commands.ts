/**
 * `hopper dlq peek|redrive`: what is in a dead-letter queue and why, and moving it back. A redrive
 * runs on the server as a task; unless told not to wait, the command follows it to the end and its
 * exit code says how it ended (0 done, 1 failed, 130 cancelled).
 */
import { systemClock, type Task } from "@hopper/client";
import { type Command, Option } from "commander";
import { limits } from "../limits.js";
import {
  formatDeadLetterSummary,
  formatDeadLetterTable,
  formatTaskFinished,
  formatTaskStarted,
} from "./dlq-output.js";
import {
  addConnectionOptions,
  type Connection,
  clientAction,
  exitCodes,
  integerFlag,
  positiveNumberFlag,
} from "./flags.js";
import { printJson } from "./output.js";
import { followTask } from "./redrive-wait.js";

interface PeekFlags {
  limit: number;
}

interface RedriveFlags {
  to?: string;
  max?: number;
  rate?: number;
  /** False with --no-wait. */
  wait: boolean;
}

export function addDlqCommands(program: Command): void {
  const dlq = program.command("dlq").description("inspect a dead-letter queue and redrive its messages");

  addConnectionOptions(dlq.command("peek <queue>"))
    .description("show a dead-letter queue's messages and why each is there, without leasing them")
    .addOption(
      new Option("--limit <n>", "show up to this many, oldest first")
        .argParser(integerFlag(1))
        .default(limits.cliPeekLimitDefault),
    )
    .action(clientAction<PeekFlags>(peek));

  addConnectionOptions(dlq.command("redrive <queue>"))
    .description("move a queue's messages back to the queues they came from, or to --to")
    .option("--to <queue>", "move every message to this queue instead")
    .option("--max <n>", "move at most this many", integerFlag(1))
    .option("--rate <n>", "messages per second (default: as fast as the server goes)", positiveNumberFlag)
    .option("--no-wait", "start the task, print it and return without following it")
    .action(clientAction<RedriveFlags>(redrive));
}

async function peek(connection: Connection, [queue]: (string | undefined)[], flags: PeekFlags) {
  const { client } = connection;
  const [info, messages] = await Promise.all([
    client.getQueue(queue as string),
    client.peek(queue as string, { limit: flags.limit }),
  ]);
  if (connection.json) return printJson({ messages });
  if (messages.length === 0) return console.error(`no messages in ${queue}`);
  console.log(formatDeadLetterTable(messages, systemClock.now()));
  console.log(formatDeadLetterSummary(messages, info.stats.available));
}

async function redrive(connection: Connection, [queue]: (string | undefined)[], flags: RedriveFlags) {
  const { client } = connection;
  const started = await client.redrive(queue as string, {
    ...(flags.to !== undefined && { to: flags.to }),
    ...(flags.max !== undefined && { max: flags.max }),
    ...(flags.rate !== undefined && { ratePerSecond: flags.rate }),
  });
  if (!flags.wait) {
    return connection.json ? printJson({ task: started }) : console.log(formatTaskStarted(started));
  }
  if (!connection.json) console.log(formatTaskStarted(started));
  const { task } = await followTask(started, {
    client,
    clock: systemClock,
    progress: { isTTY: process.stderr.isTTY === true, write: (text) => process.stderr.write(text) },
    onInterrupt: onProcessInterrupt,
  });
  if (connection.json) printJson(task);
  else console.log(formatTaskFinished(task));
  process.exitCode = exitCodeOf(task);
}

function exitCodeOf(task: Task): number {
  if (task.state === "done") return exitCodes.ok;
  if (task.state === "cancelled") return exitCodes.interrupted;
  const error = task.error;
  console.error(`error ${error?.code ?? "failed"}: ${error?.message ?? "the redrive failed"}`);
  return exitCodes.failure;
}

/**
 * Calls `handler` on the first Ctrl-C; a second one exits at once, for when the cancel itself hangs.
 * Listening to SIGINT replaces Node's default of exiting, so the first one can cancel the task.
 */
function onProcessInterrupt(handler: () => void): () => void {
  let count = 0;
  const listener = () => {
    count += 1;
    if (count > 1) process.exit(exitCodes.interrupted);
    // On a terminal the progress bar holds the cursor's line; the note goes on a line of its own.
    const lineBreak = process.stderr.isTTY ? "\n" : "";
    process.stderr.write(`${lineBreak}cancelling the redrive (Ctrl-C again to quit without waiting)\n`);
    handler();
  };
  process.on("SIGINT", listener);
  return () => process.off("SIGINT", listener);
}
