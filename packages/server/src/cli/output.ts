/**
 * Text for people: tables, label/value blocks and message listings. Pure functions of what the server
 * answered, so they are tested without a server; `--json` bypasses all of this.
 */
import type {
  DeadLetterPolicy,
  QueueAttributes,
  QueueStats,
  QueueSummary,
  ReceivedMessage,
  RetryPolicy,
} from "@hopper/client";
import { formatDuration } from "./duration.js";

/** Prints a server answer as one line of JSON, so a stream of answers can be read line by line. */
export function printJson(answer: unknown): void {
  console.log(JSON.stringify(answer));
}

/** The gap between table columns and between a label and its value. */
const columnGap = "  ";

/** Lays out rows under a header; columns named in `rightAligned` (numbers) are right-aligned. */
export function formatTable(header: string[], rows: string[][], rightAligned: ReadonlySet<number>): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => {
        const width = widths[column] ?? 0;
        return rightAligned.has(column) ? cell.padStart(width) : cell.padEnd(width);
      })
      .join(columnGap)
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** Lays out `label value` pairs with the values in one column, indented under a heading. */
export function formatBlock(pairs: [label: string, value: string][], indent = "  "): string {
  const width = Math.max(0, ...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${indent}${label.padEnd(width)}${columnGap}${value}`).join("\n");
}

/** A duration attribute: 0 reads better as "0s" than as "0ms". */
export function formatDurationAttribute(ms: number): string {
  return ms === 0 ? "0s" : formatDuration(ms);
}

/**
 * An age that is never a round number, to two units at most: "850ms", "12.3s", "4m 5s", "2h 10m",
 * "3d 4h". Zero means "no message", shown as "-".
 */
export function formatAge(ms: number): string {
  if (ms <= 0) return "-";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`;
  const units = [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const;
  const index = units.findIndex(([, size]) => ms >= size);
  const [bigName, bigSize] = units[index] as (typeof units)[number];
  const [smallName, smallSize] = units[index + 1] as (typeof units)[number];
  const big = Math.floor(ms / bigSize);
  const small = Math.floor((ms - big * bigSize) / smallSize);
  return small === 0 ? `${big}${bigName}` : `${big}${bigName} ${small}${smallName}`;
}

/** A byte count, in KiB or MiB when it is a whole number of them. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** "1 message", "3 messages". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** The table of `hopper queue ls`. */
export function formatQueueTable(queues: QueueSummary[]): string {
  const header = ["NAME", "KIND", "AVAILABLE", "IN-FLIGHT", "DELAYED", "OLDEST", "DEAD-LETTERED"];
  const rows = queues.map(({ name, kind, stats }) => [
    name,
    kind,
    String(stats.available),
    String(stats.inFlight),
    String(stats.delayed),
    formatAge(stats.oldestMessageAgeMs),
    String(stats.deadLettered),
  ]);
  return formatTable(header, rows, new Set([2, 3, 4, 5, 6]));
}

type Pair = [label: string, value: string];

/** The attributes shown with a label of their own; any other is shown by its wire name, as JSON. */
const labelledAttributes = new Set([
  "visibilityTimeoutMs",
  "retentionMs",
  "delayMs",
  "receiveWaitMs",
  "maxMessageBytes",
  "deadLetter",
  "retry",
  "maxDepth",
  "overflow",
  "dedupWindowMs",
  "contentBasedDedup",
]);

/** One row per known attribute, in a fixed order, then any the CLI does not know. */
export function attributePairs(attributes: QueueAttributes): Pair[] {
  const pairs: Pair[] = [];
  const durationPair = (label: string, ms: number | undefined) => {
    if (ms !== undefined) pairs.push([label, formatDurationAttribute(ms)]);
  };
  durationPair("visibility timeout", attributes.visibilityTimeoutMs);
  durationPair("retention", attributes.retentionMs);
  durationPair("delay", attributes.delayMs);
  durationPair("receive wait", attributes.receiveWaitMs);
  if (attributes.maxMessageBytes !== undefined) {
    pairs.push(["max message size", formatBytes(attributes.maxMessageBytes)]);
  }
  // The server sends `deadLetter: null` for a queue without one.
  if ("deadLetter" in attributes) pairs.push(["dead letter", formatDeadLetter(attributes.deadLetter)]);
  if (attributes.retry) pairs.push(["retry", formatRetry(attributes.retry)]);
  if ("maxDepth" in attributes) pairs.push(["max depth", formatMaxDepth(attributes)]);
  if (attributes.dedupWindowMs !== undefined) pairs.push(["dedup", formatDedup(attributes)]);
  for (const [name, value] of Object.entries(attributes)) {
    if (!labelledAttributes.has(name)) pairs.push([name, JSON.stringify(value)]);
  }
  return pairs;
}

function formatDeadLetter(deadLetter: DeadLetterPolicy | null | undefined): string {
  if (!deadLetter) return "none";
  const deliveries = deadLetter.maxDeliveries === 1 ? "1 delivery" : `${deadLetter.maxDeliveries} deliveries`;
  const target =
    "queue" in deadLetter
      ? deadLetter.queue
      : `exchange ${deadLetter.exchange} (routing key ${deadLetter.routingKey ?? "the queue's name"})`;
  return `to ${target} after ${deliveries}`;
}

/** "none", or "1000, then reject" with what a send into the full queue does. */
function formatMaxDepth(attributes: QueueAttributes): string {
  if (attributes.maxDepth === null || attributes.maxDepth === undefined) return "none";
  return `${attributes.maxDepth}, then ${attributes.overflow ?? "reject"}`;
}

/** "off", "5m window", or "5m window, by body too" when a message without a dedupId is hashed. */
function formatDedup(attributes: QueueAttributes): string {
  if (!attributes.dedupWindowMs) return "off";
  const byBody = attributes.contentBasedDedup ? ", by body too" : "";
  return `${formatDurationAttribute(attributes.dedupWindowMs)} window${byBody}`;
}

/** "1s x2 up to 15m, full jitter": the first delay, its growth per attempt, and its ceiling. */
function formatRetry(retry: RetryPolicy): string {
  const steps = `${formatDurationAttribute(retry.initialDelayMs)} x${retry.multiplier}`;
  const jitter = retry.jitter === "full" ? ", full jitter" : "";
  return `${steps} up to ${formatDurationAttribute(retry.maxDelayMs)}${jitter}`;
}

/** One row per known statistic, in a fixed order, then any the CLI does not know. */
export function statPairs(stats: QueueStats): Pair[] {
  const { available, inFlight, delayed, corrupt, oldestMessageAgeMs, ...counters } = stats;
  const pairs: Pair[] = [
    ["available", String(available)],
    ["in flight", String(inFlight)],
    ["delayed", String(delayed)],
    ["corrupt", String(corrupt)],
    ["oldest message age", formatAge(oldestMessageAgeMs)],
  ];
  const labels: Record<string, string> = { deadLettered: "dead-lettered" };
  for (const [name, value] of Object.entries(counters)) {
    pairs.push([labels[name] ?? name, typeof value === "number" ? String(value) : JSON.stringify(value)]);
  }
  return pairs;
}

/**
 * A message's body as text: JSON pretty-printed, text/* decoded as UTF-8, anything else left as
 * base64, since raw bytes could garble the terminal.
 */
export function formatBody(message: Pick<ReceivedMessage, "body" | "bodyBase64" | "contentType">): string {
  if (message.bodyBase64 === undefined) return JSON.stringify(message.body, null, 2) ?? "";
  if (message.contentType.startsWith("text/")) {
    return Buffer.from(message.bodyBase64, "base64").toString("utf8");
  }
  return `(base64) ${message.bodyBase64}`;
}

/** One received message as a block; the receipt is left out once the message has been acked. */
export function formatMessage(message: ReceivedMessage, showReceipt: boolean): string {
  const pairs: Pair[] = [
    ["id", message.id],
    ["delivery", String(message.deliveryCount)],
    ["content type", message.contentType],
  ];
  if (message.key !== undefined && message.key !== null) pairs.push(["key", message.key]);
  for (const [name, value] of Object.entries(message.headers ?? {}))
    pairs.push(["header", `${name}: ${value}`]);
  if (showReceipt) pairs.push(["receipt", message.receipt]);
  const body = formatBody(message)
    .split("\n")
    .map((line) => `  ${line}`.trimEnd())
    .join("\n");
  return `${formatBlock(pairs, "")}\nbody\n${body}`;
}
