/** `hopper send` and `hopper receive`: put messages on a queue and take them off. */
import { type ItemResult, isItemError, type SendMessage, type SendResult } from "@hopper/client";
import { type Command, Option } from "commander";
import { limits } from "../limits.js";
import {
  addConnectionOptions,
  type Connection,
  clientAction,
  durationFlag,
  exitCodes,
  headerFlag,
  integerFlag,
  UsageError,
} from "./flags.js";
import { bodyFromBytes, bodyFromText, readBody, readLines } from "./message-body.js";
import { formatMessage, printJson } from "./output.js";

interface SendFlags {
  file?: string;
  lines?: boolean;
  text?: boolean;
  header?: Record<string, string>;
  key?: string;
  delay?: number;
  dedupId?: string;
  priority?: number;
}

interface ReceiveFlags {
  max: number;
  wait: number;
  visibilityTimeout?: number;
  ack?: boolean;
  autoAck?: boolean;
}

export function addMessageCommands(program: Command): void {
  addConnectionOptions(program.command("send <queue> [body]"))
    .description("send a message: JSON if the body parses as JSON, otherwise text")
    .option("--file <path>", "read the body from a file; - reads stdin")
    .option("--lines", "send each non-blank line of --file as its own message")
    .option("--text", "send the body as text/plain even when it parses as JSON")
    .option("--header <name=value>", "a message header (repeatable)", headerFlag)
    .option("--key <key>", "the message's ordering key")
    .option("--delay <duration>", "how long before the message can be received", durationFlag)
    .option("--dedup-id <id>", "a resend with this id inside the queue's dedup window is not stored again")
    .option("--priority <n>", "0-9, higher is received first (standard queues only)", integerFlag(0))
    .action(clientAction<SendFlags>(send));

  addConnectionOptions(program.command("receive <queue>"))
    .description("lease messages and print them")
    .addOption(new Option("--max <n>", "receive up to this many").argParser(integerFlag(1)).default(1))
    .addOption(
      new Option("--wait <duration>", "wait this long for a first message")
        .argParser(durationFlag)
        .default(0, "0s"),
    )
    .option("--visibility-timeout <duration>", "lease length (default: the queue's)", durationFlag)
    .option("--ack", "acknowledge the messages once they are printed")
    .option("--auto-ack", "at most once: the server deletes the messages as it hands them out")
    .action(clientAction<ReceiveFlags>(receive));
}

/** What every message of one `send` shares: its headers, key, delay, priority and dedupId. */
function sharedFields(flags: SendFlags): SendMessage {
  const shared: SendMessage = {};
  if (flags.header !== undefined) shared.headers = flags.header;
  if (flags.key !== undefined) shared.key = flags.key;
  if (flags.delay !== undefined) shared.delayMs = flags.delay;
  if (flags.priority !== undefined) shared.priority = flags.priority;
  if (flags.dedupId !== undefined) shared.dedupId = flags.dedupId;
  return shared;
}

function checkSources(body: string | undefined, flags: SendFlags): void {
  if (body !== undefined && flags.file !== undefined) {
    throw new UsageError("give the body as an argument or with --file, not both.");
  }
  if (flags.lines && flags.file === undefined) {
    throw new UsageError("--lines reads the lines of --file; add --file <path>, or --file - for stdin.");
  }
  if (body === undefined && flags.file === undefined) {
    throw new UsageError("give a body, or --file <path> (- for stdin).");
  }
  if (flags.lines && flags.dedupId !== undefined) {
    // Every line would carry the same id, so all but the first would be dropped as duplicates.
    throw new UsageError("--dedup-id names one message; it cannot go with --lines.");
  }
}

async function send(connection: Connection, [queue, body]: (string | undefined)[], flags: SendFlags) {
  checkSources(body, flags);
  const shared = sharedFields(flags);
  const failures =
    flags.lines && flags.file !== undefined
      ? await sendLines(connection, queue as string, readLines(flags.file), shared, flags.text)
      : await sendOne(connection, queue as string, { ...shared, ...(await bodyOf(body, flags)) });
  if (failures > 0) process.exitCode = exitCodes.failure;
}

async function bodyOf(body: string | undefined, flags: SendFlags): Promise<SendMessage> {
  if (body !== undefined) return bodyFromText(body, flags.text);
  return bodyFromBytes(await readBody(flags.file as string), flags.text);
}

/** Sends one message and prints its id; answers the number of failed messages. */
async function sendOne(connection: Connection, queue: string, message: SendMessage): Promise<number> {
  const results = await connection.client.send(queue, [message]);
  return reportSent(connection, results, [undefined]);
}

/**
 * Sends one message per line, in batches of at most `limits.batchSizeMax` messages and about
 * `limits.cliSendBatchBytesMax` bytes. Ids are printed batch by batch, so if a request fails the output
 * already says which lines were sent. Answers the number of failed messages.
 */
async function sendLines(
  connection: Connection,
  queue: string,
  lines: AsyncIterable<{ text: string; number: number }>,
  shared: SendMessage,
  asText: boolean | undefined,
): Promise<number> {
  let batch: SendMessage[] = [];
  let lineNumbers: number[] = [];
  let batchBytes = 0;
  let failures = 0;
  let sent = 0;
  const flush = async () => {
    const results = await connection.client.send(queue, batch);
    failures += reportSent(connection, results, lineNumbers);
    sent += batch.length;
    batch = [];
    lineNumbers = [];
    batchBytes = 0;
  };
  for await (const line of lines) {
    const message = { ...shared, ...bodyFromText(line.text, asText) };
    const bytes = Buffer.byteLength(JSON.stringify(message));
    const full = batch.length === limits.batchSizeMax || batchBytes + bytes > limits.cliSendBatchBytesMax;
    if (batch.length > 0 && full) await flush();
    batch.push(message);
    lineNumbers.push(line.number);
    batchBytes += bytes;
  }
  if (batch.length > 0) await flush();
  if (sent === 0 && !connection.json) console.error("no lines to send");
  return failures;
}

/**
 * Prints the id of each sent message, and each failed one on stderr with the line it came from. A
 * duplicate's id (the one stored first) is printed too, with a note on stderr, so stdout stays a list
 * of ids. With --json it prints the answer instead. Answers the number of failures.
 */
function reportSent(connection: Connection, results: SendResult[], lineNumbers: (number | undefined)[]) {
  if (connection.json) printJson({ results });
  let failures = 0;
  results.forEach((result, index) => {
    if (isItemError(result)) {
      failures += 1;
      const line = lineNumbers[index];
      const where = line === undefined ? "" : ` (line ${line})`;
      console.error(`error ${result.error.code}: ${result.error.message}${where}`);
    } else if (!connection.json) {
      console.log(result.id);
      if (result.duplicate) {
        const note = "the queue already had a message with this dedupId (or body, with content-based dedup)";
        console.error(`duplicate: ${note}; ${result.id} is the one it kept`);
      }
    }
  });
  return failures;
}

/**
 * Leases messages and prints them. With --ack they are acknowledged only after they are printed, so
 * a message is never deleted before it has been shown. With --auto-ack the server deleted them as it
 * handed them out, so there is no receipt to show or use.
 */
async function receive(connection: Connection, [queue]: (string | undefined)[], flags: ReceiveFlags) {
  if (flags.ack && flags.autoAck) {
    throw new UsageError(
      "--auto-ack deletes the messages as they are received; --ack has nothing left to do.",
    );
  }
  const { client } = connection;
  const messages = await client.receive(queue as string, {
    max: flags.max,
    waitMs: flags.wait,
    ...(flags.visibilityTimeout !== undefined && { visibilityTimeoutMs: flags.visibilityTimeout }),
    ...(flags.autoAck && { autoAck: true }),
  });
  const showReceipt = !flags.ack && !flags.autoAck;
  if (connection.json) printJson({ messages });
  else if (messages.length === 0) console.error(`no messages in ${queue}`);
  else console.log(messages.map((message) => formatMessage(message, showReceipt)).join("\n\n"));
  if (!flags.ack || messages.length === 0) return;
  const results = await client.ack(
    queue as string,
    messages.map((message) => message.receipt),
  );
  reportAcked(
    results,
    messages.map((message) => message.id),
  );
}

function reportAcked(results: ItemResult[], ids: string[]): void {
  results.forEach((result, index) => {
    if (!isItemError(result)) return;
    process.exitCode = exitCodes.failure;
    console.error(`error ${result.error.code}: ${result.error.message} (message ${ids[index]})`);
  });
}
