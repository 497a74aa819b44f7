/**
 * Text for `hopper dlq`: the table of a dead-letter queue's messages with why each is there, the
 * counts by reason and by original queue, and the lines that show a redrive's progress. Pure
 * functions of what the server answered and the time, so they are tested without a server.
 */
import { deadLetterHeaders, type PeekedMessage, type Task } from "@hopper/client";
import { limits } from "../limits.js";
import { formatAge, formatTable, plural } from "./output.js";

/** The progress bar's width in characters, between its brackets. */
const progressBarChars = 24;

/** Shown for a header the message does not carry, e.g. one sent to the queue directly. */
const missing = "-";

/**
 * A body on one line: JSON compact, `text/*` decoded with runs of whitespace made one space, anything
 * else only described, since raw bytes could garble the terminal. Cut to `limits.cliBodyPreviewCharsMax`.
 */
export function bodyPreview(message: Pick<PeekedMessage, "body" | "bodyBase64" | "contentType">): string {
  let text: string;
  if (message.bodyBase64 === undefined) {
    text = JSON.stringify(message.body) ?? "";
  } else if (message.contentType.startsWith("text/")) {
    text = Buffer.from(message.bodyBase64, "base64").toString("utf8");
  } else {
    return `(${Buffer.from(message.bodyBase64, "base64").length} bytes ${message.contentType})`;
  }
  const oneLine = text.replace(/\s+/g, " ").trim();
  const chars = Array.from(oneLine);
  return chars.length <= limits.cliBodyPreviewCharsMax
    ? oneLine
    : `${chars.slice(0, limits.cliBodyPreviewCharsMax - 1).join("")}…`;
}

/**
 * How long ago the message was first published: `x-original-published-at`, which dead-lettering
 * keeps, or its own `publishedAt` when it was not dead-lettered.
 */
export function messageAgeMs(message: PeekedMessage, nowMs: number): number {
  const original = Date.parse(message.headers[deadLetterHeaders.originalPublishedAt] ?? "");
  const publishedAt = Number.isNaN(original) ? Date.parse(message.publishedAt) : original;
  return Math.max(0, nowMs - publishedAt);
}

/** The table of `hopper dlq peek`: one row per message, oldest first as the server answered. */
export function formatDeadLetterTable(messages: PeekedMessage[], nowMs: number): string {
  const header = ["ID", "AGE", "REASON", "ORIGINAL-QUEUE", "DELIVERIES", "KEY", "BODY"];
  const rows = messages.map((message) => [
    message.id,
    formatAge(messageAgeMs(message, nowMs)),
    message.headers[deadLetterHeaders.reason] ?? missing,
    message.headers[deadLetterHeaders.originalQueue] ?? missing,
    message.headers[deadLetterHeaders.deliveryCount] ?? String(message.deliveryCount),
    message.key ?? missing,
    bodyPreview(message),
  ]);
  return formatTable(header, rows, new Set([1, 4]));
}

/** "max_deliveries 3, max_depth 1": counts of a header's values, most first, then by name. */
function countsBy(messages: PeekedMessage[], header: string): string {
  const counts = new Map<string, number>();
  for (const message of messages) {
    const value = message.headers[header] ?? missing;
    counts.set(value, (counts.get(value) ?? 0) + 1);
  }
  return [...counts]
    .sort(([a, countA], [b, countB]) => countB - countA || a.localeCompare(b))
    .map(([value, count]) => `${value} ${count}`)
    .join(", ");
}

/**
 * The line under the table: how many messages are shown of how many the queue holds, and the shown
 * ones counted by reason and by original queue.
 */
export function formatDeadLetterSummary(messages: PeekedMessage[], queueDepth: number): string {
  const shown = `${messages.length} of ${plural(queueDepth, "message")} shown`;
  const reasons = countsBy(messages, deadLetterHeaders.reason);
  const origins = countsBy(messages, deadLetterHeaders.originalQueue);
  return `${shown}; by reason: ${reasons}; by original queue: ${origins}`;
}

/** What a redrive's progress line needs besides the task: the rate seen so far and the time left. */
export interface ProgressEstimate {
  /** Messages per second over the last few polls; null until two polls apart in time. */
  ratePerSecond: number | null;
  /** null while the rate is unknown or zero. */
  etaMs: number | null;
}

function percentOf(task: Pick<Task, "moved" | "total">): number {
  return task.total === 0 ? 100 : Math.floor((task.moved / task.total) * 100);
}

function formatRate(ratePerSecond: number | null): string {
  return ratePerSecond === null ? "- msg/s" : `${ratePerSecond.toFixed(1)} msg/s`;
}

/** Rounded up to a whole second, so the figure does not flicker between polls. */
function formatEta(etaMs: number | null): string {
  if (etaMs === null) return `ETA ${missing}`;
  // formatAge shows 0 as "-", which would read as "unknown".
  return `ETA ${etaMs <= 0 ? "0s" : formatAge(Math.ceil(etaMs / 1000) * 1000)}`;
}

/** `[#######-----------------]  30/100  30%  19.8 msg/s  ETA 3.5s`: one line, redrawn on a terminal. */
export function formatProgressBar(task: Pick<Task, "moved" | "total">, estimate: ProgressEstimate): string {
  const filled = Math.round((percentOf(task) / 100) * progressBarChars);
  const bar = `[${"#".repeat(filled)}${"-".repeat(progressBarChars - filled)}]`;
  return [
    bar,
    `${task.moved}/${task.total}`,
    `${percentOf(task)}%`,
    formatRate(estimate.ratePerSecond),
    formatEta(estimate.etaMs),
  ].join("  ");
}

/** `redrive 0192…: 30/100 moved (30%), 19.8 msg/s, ETA 3.5s`: a line of its own, for logs. */
export function formatProgressLine(
  task: Pick<Task, "id" | "moved" | "total">,
  estimate: ProgressEstimate,
): string {
  const rate = formatRate(estimate.ratePerSecond);
  return `redrive ${task.id}: ${task.moved}/${task.total} moved (${percentOf(task)}%), ${rate}, ${formatEta(estimate.etaMs)}`;
}

/** Where a redrive sends its messages, in words. */
function destination(task: Pick<Task, "to">): string {
  return task.to === null ? "their original queues" : task.to;
}

/** `started redrive 0192…: 100 messages from orders.dlq to their original queues`. */
export function formatTaskStarted(task: Task): string {
  const rate = task.ratePerSecond === null ? "" : ` at ${task.ratePerSecond} msg/s`;
  return `started redrive ${task.id}: ${plural(task.total, "message")} from ${task.queue} to ${destination(task)}${rate}`;
}

/** `redrive 0192… done: moved 100 of 100 from orders.dlq to their original queues`. */
export function formatTaskFinished(task: Task): string {
  return `redrive ${task.id} ${task.state}: moved ${task.moved} of ${task.total} from ${task.queue} to ${destination(task)}`;
}
