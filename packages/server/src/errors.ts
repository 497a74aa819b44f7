/**
 * The error catalog: every error a client can see, with its stable code and HTTP status. Adapters map
 * a HopperError to their wire; nothing else decides a status code.
 */

import type { ExchangeType } from "./model/exchange.js";
import type { QueueKind } from "./model/queue.js";

export const errorCatalog = {
  invalid_request: { status: 400, message: "The request does not match the schema." },
  invalid_json: { status: 400, message: "The request body is not valid JSON." },
  invalid_name: { status: 400, message: "Names match [A-Za-z0-9_.:-]{1,128} and are not . or ..." },
  invalid_attribute: { status: 400, message: "A queue attribute is out of range." },
  invalid_receipt: { status: 400, message: "The receipt is not one this server issued." },
  batch_too_large: { status: 400, message: "The batch has too many items." },
  message_too_large: { status: 400, message: "The message body is larger than the queue allows." },
  signal_too_large: { status: 400, message: "The signal's data is larger than a signal may carry." },
  not_implemented: { status: 400, message: "This feature is not available yet." },
  unauthorized: { status: 401, message: "A valid API key is required." },
  forbidden: { status: 403, message: "This client may not make this request." },
  not_found: { status: 404, message: "No such route." },
  queue_not_found: { status: 404, message: "The queue does not exist." },
  consumer_not_found: { status: 404, message: "This connection has no consumer with that sub." },
  dead_letter_queue_not_found: { status: 400, message: "The dead-letter queue does not exist." },
  exchange_not_found: { status: 404, message: "The exchange does not exist." },
  dead_letter_exchange_not_found: { status: 400, message: "The dead-letter exchange does not exist." },
  unroutable: { status: 400, message: "No binding matches the routing key, and the publish is mandatory." },
  stale_receipt: { status: 409, message: "The lease this receipt names is gone." },
  no_dead_letter_target: {
    status: 409,
    message: "The queue has no dead-letter target; the message stays leased.",
  },
  queue_kind_mismatch: { status: 409, message: "A queue's kind cannot change." },
  redrive_running: { status: 409, message: "A redrive of this queue is already running." },
  queue_in_use: { status: 409, message: "The queue is the dead-letter queue of another queue." },
  exchange_type_mismatch: { status: 409, message: "An exchange's type cannot change." },
  exchange_in_use: { status: 409, message: "The exchange is the dead-letter exchange of a queue." },
  request_timeout: { status: 408, message: "The request did not arrive in full in time." },
  request_too_large: { status: 413, message: "The request body is too large." },
  unsupported_media_type: { status: 415, message: "Send JSON with Content-Type: application/json." },
  headers_too_large: { status: 431, message: "The request's headers are larger than the server reads." },
  backpressure: { status: 429, message: "The queue is over its pushback limit; retry after a while." },
  queue_full: { status: 429, message: "The queue holds its maxDepth messages and refuses more." },
  task_not_found: { status: 404, message: "The task does not exist." },
  inbox_not_found: { status: 404, message: "The inbox namespace does not exist." },
  inbox_gap: {
    status: 410,
    message: "Entries after this cursor are no longer retained; resync from oldest.",
  },
  cursor_beyond_head: { status: 400, message: "The sequence is beyond the recipient's head." },
  too_many_inboxes: { status: 429, message: "The server holds the most inbox namespaces it allows." },
  too_many_devices: { status: 429, message: "The recipient has the most devices allowed." },
  too_many_recipients: { status: 400, message: "The append names more recipients than allowed." },
  too_many_tasks: { status: 429, message: "The server runs the most tasks it allows." },
  too_many_queues: { status: 429, message: "The server holds the most queues it allows." },
  too_many_waiters: { status: 429, message: "The server holds the most long polls it allows." },
  too_many_connections: { status: 429, message: "The server holds the most WebSocket connections." },
  too_many_consumers: { status: 429, message: "This connection holds the most consumers it allows." },
  too_many_subscriptions: { status: 429, message: "The most signal subscriptions allowed are taken." },
  store_full: { status: 507, message: "The store holds the most message bytes it allows." },
  unavailable: { status: 503, message: "The store is not reachable." },
  store_damaged: { status: 500, message: "The store's files are damaged; the server refuses to serve them." },
  internal: { status: 500, message: "An internal error occurred." },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof errorCatalog;

export class HopperError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>) {
    super(message ?? errorCatalog[code].message);
    this.name = "HopperError";
    this.code = code;
    this.status = errorCatalog[code].status;
    this.details = details;
  }

  toJSON(): { code: ErrorCode; message: string; details?: Record<string, unknown> } {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message };
  }
}

/** The queue of that name does not exist. */
export function queueNotFound(queue: string): HopperError {
  return new HopperError("queue_not_found", `Queue "${queue}" does not exist.`, { queue });
}

/** The queue holds `depth` of at most `maxDepth` messages and refuses more (overflow "reject"). */
export function queueFull(queue: string, maxDepth: number, depth: number): HopperError {
  return new HopperError("queue_full", `Queue "${queue}" holds ${depth} of at most ${maxDepth} messages.`, {
    queue,
    maxDepth,
    depth,
  });
}

/** The queue exists with another kind, and a queue's kind cannot change. */
export function queueKindMismatch(queue: string, kind: QueueKind): HopperError {
  return new HopperError("queue_kind_mismatch", `Queue "${queue}" is ${kind}.`, { kind });
}

/** The queue cannot be deleted while other queues name it as their dead-letter queue. */
export function queueInUse(queue: string, deadLetterSources: string[]): HopperError {
  return new HopperError(
    "queue_in_use",
    `Queue "${queue}" is the dead-letter queue of ${deadLetterSources.join(", ")}.`,
    { deadLetterSources },
  );
}

/** The queue a queue's dead-letter target names does not exist. */
export function deadLetterQueueNotFound(queue: string): HopperError {
  return new HopperError("dead_letter_queue_not_found", `Dead-letter queue "${queue}" does not exist.`, {
    queue,
  });
}

/** The exchange of that name does not exist. */
export function exchangeNotFound(exchange: string): HopperError {
  return new HopperError("exchange_not_found", `Exchange "${exchange}" does not exist.`, { exchange });
}

/** The exchange exists with another type, and an exchange's type cannot change. */
export function exchangeTypeMismatch(exchange: string, type: ExchangeType): HopperError {
  return new HopperError("exchange_type_mismatch", `Exchange "${exchange}" is ${type}.`, { type });
}

/** The exchange cannot be deleted while queues name it as their dead-letter exchange. */
export function exchangeInUse(exchange: string, deadLetterSources: string[]): HopperError {
  return new HopperError(
    "exchange_in_use",
    `Exchange "${exchange}" is the dead-letter exchange of ${deadLetterSources.join(", ")}.`,
    { deadLetterSources },
  );
}

/** The exchange a queue's dead-letter target names does not exist. */
export function deadLetterExchangeNotFound(exchange: string): HopperError {
  return new HopperError(
    "dead_letter_exchange_not_found",
    `Dead-letter exchange "${exchange}" does not exist.`,
    { exchange },
  );
}

/** The inbox namespace of that name does not exist. */
export function inboxNotFound(inbox: string): HopperError {
  return new HopperError("inbox_not_found", `Inbox namespace "${inbox}" does not exist.`, { inbox });
}

/** An ack names a sequence beyond the recipient's head: no such entry was ever appended. */
export function cursorBeyondHead(seq: number, head: number): HopperError {
  return new HopperError("cursor_beyond_head", `Sequence ${seq} is beyond the head ${head}.`, { seq, head });
}

/**
 * A store's file failed a check as the store opened (docs/reliability.md): `file` is the file,
 * `failed` what was found, `todo` what the operator can do. The server does not start.
 */
export function storeDamaged(file: string, failed: string, todo: string): HopperError {
  return new HopperError("store_damaged", `${file}: ${failed} Hopper refuses to serve it. ${todo}`, {
    file,
  });
}

/** Asserts a programmer's invariant; a failure is a bug and crashes loudly. */
export function invariant(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`invariant violated: ${message}`);
}
