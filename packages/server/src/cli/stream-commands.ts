/**
 * `hopper stream create|ls|stats|append|read|tail` and `hopper stream group ls|reset`: streams, appends,
 * replay from an offset or a time, following a partition, and consumer groups (docs/streams.md). They
 * talk to a running server through the client's `streams` calls, like any other client.
 */
import type { PutStreamBody, ResetBody, StreamRecordOut } from "@hopper/wire";
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
import { formatBlock, formatBody, printJson } from "./output.js";

interface CreateFlags {
  partitions?: number;
  retention?: number | "none";
  retentionBytes?: number;
  retentionRecords?: number;
  dedupWindow?: number;
}

interface AppendFlags {
  file?: string;
  text?: boolean;
  key?: string;
  partition?: number;
  header?: Record<string, string>;
}

interface ReadFlags {
  from?: number;
  fromTime?: string;
  limit?: number;
}

interface ResetFlags {
  to: string;
  force?: boolean;
}

const noneOr = (parse: (text: string) => number) => (text: string) =>
  text.trim() === "none" ? "none" : parse(text);

export function addStreamCommands(program: Command): void {
  const stream = program
    .command("stream")
    .description("create and inspect streams, append, read, tail, groups");

  addConnectionOptions(stream.command("create <stream>"))
    .description("create a stream, or update an existing one (partitions may grow, never shrink)")
    .option("--partitions <n>", "how many partitions", integerFlag(1))
    .option(
      "--retention <duration>",
      'records older than this go; "none" keeps them by age',
      noneOr(durationFlag),
    )
    .option("--retention-bytes <n>", "each partition keeps about this many bytes", integerFlag(1))
    .option("--retention-records <n>", "each partition keeps this many records", integerFlag(1))
    .option("--dedup-window <duration>", "how long a dedupId is remembered", durationFlag)
    .action(clientAction<CreateFlags>(createStream));

  addConnectionOptions(stream.command("ls")).description("list streams").action(clientAction(listStreams));

  addConnectionOptions(stream.command("stats <stream>"))
    .description("show a stream's attributes, partitions and counters")
    .action(clientAction(showStream));

  addConnectionOptions(stream.command("append <stream> [body]"))
    .description("append one record (its partition: --partition, else --key's hash, else round robin)")
    .option("--file <path>", "read the body from a file; - reads stdin")
    .option("--text", "send the body as text/plain even when it parses as JSON")
    .option("--key <key>", "the record's key: it picks the partition")
    .option("--partition <n>", "the partition, overriding the key", integerFlag(0))
    .option("--header <name=value>", "a record header (repeatable)", headerFlag)
    .action(clientAction<AppendFlags>(appendRecord));

  addConnectionOptions(stream.command("read <stream> <partition>"))
    .description("print a partition's records from an offset or a time, and stop")
    .option("--from <offset>", "the first offset (default: the oldest retained)", integerFlag(0))
    .option("--from-time <time>", "the first record appended at or after this ISO-8601 time")
    .option("--limit <n>", "print at most this many records", integerFlag(1))
    .action(clientAction<ReadFlags>(readRecords));

  addConnectionOptions(stream.command("tail <stream> <partition>"))
    .description("print a partition's records from an offset (default: its next), then follow new ones")
    .option("--from <offset>", "the first offset", integerFlag(0))
    .action(clientAction<ReadFlags>(tail));

  const group = stream.command("group").description("consumer groups of a stream");
  addConnectionOptions(group.command("ls <stream>"))
    .description("list a stream's consumer groups: members, committed offsets and lag")
    .action(clientAction(listGroups));
  addConnectionOptions(group.command("reset <stream> <group>"))
    .description("move a group's committed offsets")
    .requiredOption("--to <where>", "earliest, latest, an offset, or an ISO-8601 time")
    .option("--force", "reset even while members hold partitions")
    .action(clientAction<ResetFlags>(resetGroup));
}

/** Builds the PUT body from the flags given, and only those: left out, an attribute keeps its value. */
export function streamAttributesFromFlags(flags: CreateFlags): PutStreamBody {
  const attributes: PutStreamBody = {};
  if (flags.partitions !== undefined) attributes.partitions = flags.partitions;
  if (flags.retention !== undefined)
    attributes.retentionMs = flags.retention === "none" ? null : flags.retention;
  if (flags.retentionBytes !== undefined) attributes.retentionBytes = flags.retentionBytes;
  if (flags.retentionRecords !== undefined) attributes.retentionRecords = flags.retentionRecords;
  if (flags.dedupWindow !== undefined) attributes.dedupWindowMs = flags.dedupWindow;
  return attributes;
}

async function createStream(connection: Connection, [name]: (string | undefined)[], flags: CreateFlags) {
  const { stream } = await connection.client.streams.put(name as string, streamAttributesFromFlags(flags));
  if (connection.json) return printJson(stream);
  console.log(`stream ${stream.name}, ${stream.stats.partitions.length} partitions`);
  console.log(formatBlock(Object.entries(stream.attributes).map(([key, value]) => [key, String(value)])));
}

async function listStreams(connection: Connection) {
  const streams = await connection.client.streams.list();
  if (connection.json) return printJson({ streams });
  if (streams.length === 0) return console.error("no streams");
  for (const stream of streams) {
    const records = stream.stats.partitions.reduce((sum, partition) => sum + partition.records, 0);
    console.log(`${stream.name}\t${stream.stats.partitions.length} partitions\t${records} records`);
  }
}

async function showStream(connection: Connection, [name]: (string | undefined)[]) {
  const stream = await connection.client.streams.get(name as string);
  if (connection.json) return printJson(stream);
  const { partitions, ...counters } = stream.stats;
  console.log(`stream ${stream.name}`);
  console.log(
    `attributes\n${formatBlock(Object.entries(stream.attributes).map(([k, v]) => [k, String(v)]))}`,
  );
  console.log(`counters\n${formatBlock(Object.entries(counters).map(([k, v]) => [k, String(v)]))}`);
  for (const p of partitions)
    console.log(
      `  partition ${p.partition}: offsets ${p.oldest}..${p.next} (${p.records} records, ${p.bytes} bytes)`,
    );
}

async function appendRecord(
  connection: Connection,
  [name, text]: (string | undefined)[],
  flags: AppendFlags,
) {
  const body = await bodyFromArgumentOrFile(text, flags);
  const record = {
    ...body,
    ...(flags.key !== undefined && { key: flags.key }),
    ...(flags.partition !== undefined && { partition: flags.partition }),
    ...(flags.header && { headers: flags.header }),
  };
  const [result] = await connection.client.streams.append(name as string, [record]);
  if (connection.json) return printJson(result);
  if (result && "error" in result) throw result.error;
  if (result)
    console.log(
      `partition ${result.partition}, offset ${result.offset}${result.duplicate ? " (duplicate)" : ""}`,
    );
}

function printRecord(connection: Connection, record: StreamRecordOut): void {
  if (connection.json) {
    printJson(record);
    return;
  }
  const body = record.bodyBase64 === undefined ? JSON.stringify(record.body) : formatBody(record);
  console.log(`${record.offset}\t${record.timestamp}\t${record.key ?? "-"}\t${body}`);
}

function partitionOf(text: string | undefined): number {
  const partition = Number(text);
  if (!Number.isSafeInteger(partition) || partition < 0)
    throw new UsageError("the partition is a number from 0.");
  return partition;
}

async function readRecords(
  connection: Connection,
  [name, partitionText]: (string | undefined)[],
  flags: ReadFlags,
) {
  if (flags.from !== undefined && flags.fromTime !== undefined)
    throw new UsageError("give --from or --from-time, not both.");
  const partition = partitionOf(partitionText);
  const limit = flags.limit ?? Number.MAX_SAFE_INTEGER;
  let printed = 0;
  let page = await connection.client.streams.read(name as string, partition, {
    ...(flags.from !== undefined && { from: flags.from }),
    ...(flags.fromTime !== undefined && { fromTime: new Date(flags.fromTime) }),
    limit: Math.min(limit, limits.streamReadLimitMax),
  });
  // Bounded: each page moves `next` on, and the loop ends at the partition's end or at --limit.
  for (;;) {
    for (const record of page.records.slice(0, limit - printed)) printRecord(connection, record);
    printed += page.records.length;
    if (page.records.length === 0 || printed >= limit) return;
    page = await connection.client.streams.read(name as string, partition, {
      from: page.next,
      limit: Math.min(limit - printed, limits.streamReadLimitMax),
    });
  }
}

/**
 * Prints the partition's records from --from (default: from its next offset), then looks again every
 * cliStreamTailPollMs for new ones, until Ctrl-C. A read has no long poll (a group fetch has), so the
 * tail polls; it creates no group.
 */
async function tail(connection: Connection, [name, partitionText]: (string | undefined)[], flags: ReadFlags) {
  const partition = partitionOf(partitionText);
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  let from =
    flags.from ??
    (await connection.client.streams.get(name as string)).stats.partitions[partition]?.next ??
    0;
  while (!stop.signal.aborted) {
    const page = await connection.client.streams.read(name as string, partition, {
      from,
      limit: limits.streamReadLimitMax,
    });
    for (const record of page.records) printRecord(connection, record);
    from = page.next;
    if (page.records.length === 0)
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, limits.cliStreamTailPollMs);
        stop.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
  }
  process.exitCode = exitCodes.interrupted;
}

async function listGroups(connection: Connection, [name]: (string | undefined)[]) {
  const groups = await connection.client.streams.listGroups(name as string);
  if (connection.json) return printJson({ groups });
  if (groups.length === 0) return console.error("no groups");
  for (const group of groups) {
    const lag = group.partitions.reduce((sum, partition) => sum + partition.lag, 0);
    console.log(`${group.name}\tgeneration ${group.generation}\t${group.members.length} members\tlag ${lag}`);
    for (const p of group.partitions)
      console.log(
        `  partition ${p.partition}: committed ${p.committed ?? "-"}, lag ${p.lag}, held by ${p.holder ?? "-"}`,
      );
  }
}

/** `--to`: earliest, latest, an offset (every partition), or an ISO-8601 time. */
export function resetTarget(text: string): ResetBody["to"] {
  const to = text.trim();
  if (to === "earliest" || to === "latest") return to;
  if (/^\d+$/.test(to)) return { offset: Number(to) };
  const time = Date.parse(to);
  if (Number.isNaN(time)) throw new UsageError("--to is earliest, latest, an offset, or an ISO-8601 time.");
  return { time: new Date(time).toISOString() };
}

async function resetGroup(connection: Connection, [name, group]: (string | undefined)[], flags: ResetFlags) {
  const info = await connection.client.streams.resetGroup(name as string, group as string, {
    to: resetTarget(flags.to),
    ...(flags.force && { force: true }),
  });
  if (connection.json) return printJson(info);
  for (const p of info.partitions)
    console.log(`partition ${p.partition}: committed ${p.committed ?? "-"}, lag ${p.lag}`);
}
