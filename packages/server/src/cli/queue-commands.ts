/** `hopper queue create|ls|stats|purge|rm`: queue management through the typed client. */
import type { OverflowPolicy, QueueAttributes } from "@hopper/client";
import { type Command, Option } from "commander";
import {
  addConnectionOptions,
  boundFlag,
  type Connection,
  clientAction,
  durationFlag,
  integerFlag,
  UsageError,
} from "./flags.js";
import { attributePairs, formatBlock, formatQueueTable, plural, printJson, statPairs } from "./output.js";

interface CreateFlags {
  visibilityTimeout?: number;
  retention?: number;
  delay?: number;
  receiveWait?: number;
  maxMessageBytes?: number;
  deadLetter?: string;
  maxDeliveries?: number;
  fifo?: boolean;
  maxDepth?: number | "none";
  overflow?: OverflowPolicy;
  dedupWindow?: number;
  contentBasedDedup?: boolean;
}

const overflowPolicies: OverflowPolicy[] = ["reject", "drop-oldest", "dead-letter-oldest"];

export function addQueueCommands(program: Command): void {
  const queue = program.command("queue").description("create, list, inspect, purge and delete queues");

  addConnectionOptions(queue.command("create <name>"))
    .description("create a queue, or update the attributes of an existing one")
    .option("--visibility-timeout <duration>", "how long a received message stays leased", durationFlag)
    .option("--retention <duration>", "how long an unreceived message is kept", durationFlag)
    .option("--delay <duration>", "how long a new message waits before it can be received", durationFlag)
    .option("--receive-wait <duration>", "the long poll of a receive that does not say", durationFlag)
    .option("--max-message-bytes <n>", "the largest body this queue takes", integerFlag(1))
    .option("--dead-letter <queue>", "where messages go after --max-deliveries deliveries")
    .option("--max-deliveries <n>", "deliveries before a message is dead-lettered", integerFlag(1))
    .option("--fifo", "a FIFO queue: each key's messages one at a time, in order (only when created)")
    .option("--max-depth <n>", 'the most messages the queue holds; "none" lifts the bound', boundFlag)
    .addOption(
      new Option("--overflow <policy>", "what a send into a full queue does").choices(overflowPolicies),
    )
    .option("--dedup-window <duration>", "how long a dedupId is remembered; 0 turns it off", durationFlag)
    .option("--content-based-dedup", "deduplicate a message without a dedupId by its body")
    .option("--no-content-based-dedup", "deduplicate only by dedupId")
    .action(clientAction<CreateFlags>(createQueue));

  addConnectionOptions(queue.command("ls"))
    .description("list queues with their depths")
    .action(clientAction(listQueues));

  addConnectionOptions(queue.command("stats <name>"))
    .description("show a queue's attributes and statistics")
    .action(clientAction(showQueue));

  addConnectionOptions(queue.command("purge <name>"))
    .description("delete every message in a queue, leased or not")
    .action(clientAction(purgeQueue));

  addConnectionOptions(queue.command("rm <name>"))
    .description("delete a queue and its messages")
    .action(clientAction(deleteQueue));
}

/**
 * Builds the PUT body from the flags given, and only those: on an existing queue an attribute left
 * out keeps its value, so filling in defaults here would silently reset what an operator had set.
 */
export function attributesFromFlags(flags: CreateFlags): QueueAttributes {
  if ((flags.deadLetter === undefined) !== (flags.maxDeliveries === undefined)) {
    throw new UsageError("--dead-letter and --max-deliveries go together; give both or neither.");
  }
  const attributes: QueueAttributes = {};
  if (flags.visibilityTimeout !== undefined) attributes.visibilityTimeoutMs = flags.visibilityTimeout;
  if (flags.retention !== undefined) attributes.retentionMs = flags.retention;
  if (flags.delay !== undefined) attributes.delayMs = flags.delay;
  if (flags.receiveWait !== undefined) attributes.receiveWaitMs = flags.receiveWait;
  if (flags.maxMessageBytes !== undefined) attributes.maxMessageBytes = flags.maxMessageBytes;
  if (flags.deadLetter !== undefined && flags.maxDeliveries !== undefined) {
    attributes.deadLetter = { queue: flags.deadLetter, maxDeliveries: flags.maxDeliveries };
  }
  if (flags.fifo) attributes.kind = "fifo";
  if (flags.maxDepth !== undefined) attributes.maxDepth = flags.maxDepth === "none" ? null : flags.maxDepth;
  if (flags.overflow !== undefined) attributes.overflow = flags.overflow;
  if (flags.dedupWindow !== undefined) attributes.dedupWindowMs = flags.dedupWindow;
  if (flags.contentBasedDedup !== undefined) attributes.contentBasedDedup = flags.contentBasedDedup;
  return attributes;
}

async function createQueue(connection: Connection, [name]: (string | undefined)[], flags: CreateFlags) {
  const attributes = attributesFromFlags(flags);
  const { created, queue } = await connection.client.putQueue(name as string, attributes);
  if (connection.json) return printJson(queue);
  console.log(`${created ? "created" : "updated"} queue ${queue.name}`);
  console.log(formatBlock(attributePairs(queue.attributes)));
}

async function listQueues(connection: Connection) {
  const queues = await connection.client.listQueues();
  if (connection.json) return printJson({ queues });
  // An empty table would look like a failure; the note goes to stderr so stdout stays a table.
  if (queues.length === 0) return console.error("no queues");
  console.log(formatQueueTable(queues));
}

async function showQueue(connection: Connection, [name]: (string | undefined)[]) {
  const queue = await connection.client.getQueue(name as string);
  if (connection.json) return printJson(queue);
  console.log(`queue ${queue.name} (${queue.kind})`);
  console.log(`attributes\n${formatBlock(attributePairs(queue.attributes))}`);
  console.log(`stats\n${formatBlock(statPairs(queue.stats))}`);
}

async function purgeQueue(connection: Connection, [name]: (string | undefined)[]) {
  const answer = await connection.client.purge(name as string);
  if (connection.json) return printJson(answer);
  console.log(`purged ${plural(answer.purged, "message")} from ${name}`);
}

/** DELETE answers 204 with no body, so `--json` prints nothing and the exit code says it worked. */
async function deleteQueue(connection: Connection, [name]: (string | undefined)[]) {
  await connection.client.deleteQueue(name as string);
  if (!connection.json) console.log(`deleted queue ${name}`);
}
