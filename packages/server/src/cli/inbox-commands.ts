/**
 * `hopper inbox create|ls|stats|append|tail`: inbox namespaces, appends and following a recipient's
 * log (docs/inboxes.md). The typed client has no inbox calls yet, so these make their HTTP calls
 * themselves, with the same connection options and the same errors (HopperError.fromResponse).
 */

import { HopperError } from "@hopper/client";
import type { AppendResult, InboxEntries, InboxInfo, PutInboxBody, RecipientInfo } from "@hopper/wire";
import type { Command } from "commander";
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
import { bodyFromArgumentOrFile } from "./message-body.js";
import { formatBlock, formatBody, plural, printJson } from "./output.js";

interface CreateFlags {
  maxAge?: number;
  maxDepth?: number;
  forgetDeviceAfter?: number;
  stopFanoutAfter?: number | "none";
  dedupWindow?: number;
}

interface AppendFlags {
  id: string;
  file?: string;
  text?: boolean;
  header?: Record<string, string>;
}

interface TailFlags {
  after?: number;
  epoch?: string;
  /** Stop after printing what is there now instead of following. */
  follow: boolean;
}

export function addInboxCommands(program: Command): void {
  const inbox = program.command("inbox").description("create and inspect inbox namespaces, append, tail");

  addConnectionOptions(inbox.command("create <ns>"))
    .description("create an inbox namespace, or update the attributes of an existing one")
    .option("--max-age <duration>", "entries older than this are trimmed, read or not", durationFlag)
    .option("--max-depth <n>", "the most entries a recipient holds", integerFlag(1))
    .option(
      "--forget-device-after <duration>",
      "a device unseen this long stops holding entries",
      durationFlag,
    )
    .option(
      "--stop-fanout-after <duration>",
      'skip recipients whose devices are all unseen this long; "none" never skips',
      (text: string) => (text.trim() === "none" ? "none" : durationFlag(text)),
    )
    .option("--dedup-window <duration>", "how long a message id is remembered per recipient", durationFlag)
    .action(clientAction<CreateFlags>(createInbox));

  addConnectionOptions(inbox.command("ls"))
    .description("list inbox namespaces")
    .action(clientAction(listInboxes));

  addConnectionOptions(inbox.command("stats <ns> [recipient]"))
    .description("show a namespace's attributes and stats, or one recipient's log and devices")
    .action(clientAction(showInbox));

  addConnectionOptions(inbox.command("append <ns> <recipients> [body]"))
    .description("append a message to each of the comma-separated recipients' logs")
    .requiredOption("--id <id>", "the message's id: appending the same id again appends nothing")
    .option("--file <path>", "read the body from a file; - reads stdin")
    .option("--text", "send the body as text/plain even when it parses as JSON")
    .option("--header <name=value>", "a message header (repeatable)", headerFlag)
    .action(clientAction<AppendFlags>(appendMessage));

  addConnectionOptions(inbox.command("tail <ns> <recipient>"))
    .description("print a recipient's entries, then follow new ones as they are appended")
    .option("--after <seq>", "start after this sequence (default: from the oldest retained)", integerFlag(0))
    .option("--epoch <epoch>", "the epoch --after was read in (required with --after above 0)")
    .option("--no-follow", "print what is there now and stop")
    .action(clientAction<TailFlags>(tail));
}

/** One HTTP call to the broker; a non-2xx answer becomes the HopperError it describes. */
async function request<T>(
  connection: Connection,
  method: string,
  path: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<T> {
  const { apiKey } = connection;
  let response: Response;
  try {
    response = await fetch(new URL(path, connection.url), {
      method,
      headers: {
        ...(body !== undefined && { "content-type": "application/json" }),
        ...(apiKey && { authorization: `Bearer ${apiKey}` }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      ...(signal && { signal }),
    });
  } catch (cause) {
    throw new HopperError({ code: "network_error", message: "fetch failed", status: 0, cause });
  }
  const text = await response.text();
  if (!response.ok)
    throw HopperError.fromResponse(response.status, text, response.headers.get("retry-after"));
  return (text === "" ? undefined : JSON.parse(text)) as T;
}

const segment = encodeURIComponent;

/** Builds the PUT body from the flags given, and only those: left out, an attribute keeps its value. */
export function inboxAttributesFromFlags(flags: CreateFlags): PutInboxBody {
  const attributes: PutInboxBody = {};
  if (flags.maxAge !== undefined) attributes.maxAgeMs = flags.maxAge;
  if (flags.maxDepth !== undefined) attributes.maxDepth = flags.maxDepth;
  if (flags.forgetDeviceAfter !== undefined) attributes.forgetDeviceAfterMs = flags.forgetDeviceAfter;
  if (flags.stopFanoutAfter !== undefined) {
    attributes.stopFanoutAfterMs = flags.stopFanoutAfter === "none" ? null : flags.stopFanoutAfter;
  }
  if (flags.dedupWindow !== undefined) attributes.dedupWindowMs = flags.dedupWindow;
  return attributes;
}

async function createInbox(connection: Connection, [ns]: (string | undefined)[], flags: CreateFlags) {
  const inbox = await request<InboxInfo>(
    connection,
    "PUT",
    `/v1/inboxes/${segment(ns as string)}`,
    inboxAttributesFromFlags(flags),
  );
  if (connection.json) return printJson(inbox);
  console.log(`inbox ${inbox.name} (epoch ${inbox.epoch})`);
  console.log(formatBlock(Object.entries(inbox.attributes).map(([name, value]) => [name, String(value)])));
}

async function listInboxes(connection: Connection) {
  const { inboxes } = await request<{ inboxes: InboxInfo[] }>(connection, "GET", "/v1/inboxes");
  if (connection.json) return printJson({ inboxes });
  if (inboxes.length === 0) return console.error("no inboxes");
  for (const inbox of inboxes) {
    const { entries, recipients, appended } = inbox.stats;
    console.log(`${inbox.name}\t${plural(recipients, "recipient")}\t${entries} held\t${appended} appended`);
  }
}

async function showInbox(connection: Connection, [ns, recipient]: (string | undefined)[]) {
  const base = `/v1/inboxes/${segment(ns as string)}`;
  if (recipient !== undefined) {
    const state = await request<RecipientInfo>(connection, "GET", `${base}/recipients/${segment(recipient)}`);
    if (connection.json) return printJson(state);
    const { depth, head, oldest, epoch } = state;
    console.log(`recipient ${recipient} in ${ns}`);
    console.log(
      formatBlock([
        ["depth", String(depth)],
        ["head", String(head)],
        ["oldest", String(oldest)],
        ["epoch", epoch],
      ]),
    );
    for (const device of state.devices) {
      const live = state.connected.includes(device.device) ? " (connected)" : "";
      console.log(
        `  device ${device.device}: cursor ${device.cursor}, last seen ${device.lastSeenAt}${live}`,
      );
    }
    return;
  }
  const inbox = await request<InboxInfo>(connection, "GET", base);
  if (connection.json) return printJson(inbox);
  console.log(`inbox ${inbox.name} (epoch ${inbox.epoch})`);
  console.log(`attributes\n${formatBlock(Object.entries(inbox.attributes).map(([k, v]) => [k, String(v)]))}`);
  console.log(`stats\n${formatBlock(Object.entries(inbox.stats).map(([k, v]) => [k, String(v)]))}`);
}

async function appendMessage(
  connection: Connection,
  [ns, list, text]: (string | undefined)[],
  flags: AppendFlags,
) {
  const recipients = (list as string)
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (recipients.length === 0) throw new UsageError("name at least one recipient.");
  const body = await bodyFromArgumentOrFile(text, flags);
  const message = { id: flags.id, ...body, ...(flags.header && { headers: flags.header }) };
  const { results } = await request<{ results: AppendResult[] }>(
    connection,
    "POST",
    `/v1/inboxes/${segment(ns as string)}/append`,
    { recipients, message },
  );
  if (connection.json) return printJson({ results });
  for (const result of results) {
    if ("skipped" in result) console.log(`${result.recipient}: skipped (idle)`);
    else console.log(`${result.recipient}: seq ${result.seq}${result.duplicate ? " (duplicate)" : ""}`);
  }
}

/**
 * Prints the recipient's entries after the cursor, then, unless --no-follow, keeps reading with a long
 * poll (waitMs) and prints each entry as it is appended, until Ctrl-C. A gap (entries trimmed, another
 * epoch) is said on stderr, and the tail goes on from the oldest entry retained.
 */
async function tail(connection: Connection, [ns, recipient]: (string | undefined)[], flags: TailFlags) {
  const path = `/v1/inboxes/${segment(ns as string)}/recipients/${segment(recipient as string)}/entries`;
  let after = flags.after ?? 0;
  let epoch = flags.epoch;
  if (after > 0 && epoch === undefined)
    throw new UsageError("--after above 0 needs the --epoch it was read in.");
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  while (!stop.signal.aborted) {
    const waitMs = flags.follow ? limits.cliInboxTailWaitMs : 0;
    const query = new URLSearchParams({
      after: String(after),
      limit: String(limits.cliInboxTailPageMax),
      waitMs: String(waitMs),
    });
    if (epoch !== undefined && after > 0) query.set("epoch", epoch);
    let page: InboxEntries;
    try {
      page = await request<InboxEntries>(connection, "GET", `${path}?${query}`, undefined, stop.signal);
    } catch (error) {
      if (stop.signal.aborted) break;
      if (error instanceof HopperError && error.code === "inbox_gap") {
        const details = error.details as { oldest: number; epoch: string };
        console.error(`gap: ${error.message} Going on from ${details.oldest}.`);
        after = details.oldest - 1;
        epoch = details.epoch;
        continue;
      }
      throw error;
    }
    epoch = page.epoch;
    for (const entry of page.entries) {
      if (connection.json) printJson(entry);
      // One line per entry: a JSON body compact, other bodies as formatBody shows them.
      else
        console.log(
          `${entry.seq}\t${entry.id}\t${entry.bodyBase64 === undefined ? JSON.stringify(entry.body) : formatBody(entry)}`,
        );
      after = entry.seq;
    }
    if (!flags.follow && page.entries.length < limits.cliInboxTailPageMax) break;
  }
  if (stop.signal.aborted) process.exitCode = exitCodes.interrupted;
}
