/**
 * An outbox event as the application writes it, as a row keeps it, and as the relay publishes it.
 * Events are checked when written, against the limits of Hopper's API, so that a malformed event fails
 * the application's transaction instead of becoming a row that the broker would refuse later.
 */
import type { PublishMessage, SendMessage } from "@hopper/client";
import { wireLimits } from "@hopper/wire/limits";
import type { RecordedError } from "./publish-errors.js";

/** The header every published copy carries: the row's id, which processOnce keys its claim on. */
export const outboxIdHeader = "x-outbox-id";

export type Destination = { queue: string } | { exchange: string; routingKey: string };

export interface OutboxEvent {
  destination: Destination;
  /** The ordering key: events of one key are published in commit order, one at a time. Also the
   * message's `key` (its FIFO group). Events without a key are ordered together, as one key. */
  key?: string;
  /** Any JSON value, or bytes (a Uint8Array, sent as `bodyBase64`). */
  body: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

export type RowState = "pending" | "sent" | "failed";

/** A row of the outbox table, decoded. */
export interface OutboxRow {
  seq: number;
  id: string;
  destination: Destination;
  key: string | undefined;
  body: string;
  bodyEncoding: "json" | "base64";
  contentType: string | undefined;
  headers: Record<string, string> | undefined;
  state: RowState;
  createdAt: number;
  sentAt: number | undefined;
  failedAt: number | undefined;
  error: RecordedError | undefined;
}

/** The destination as one string, `queue:name` or `exchange:name`: what pauses are kept by. */
export function destinationLabel(destination: Destination): string {
  return "queue" in destination ? `queue:${destination.queue}` : `exchange:${destination.exchange}`;
}

const namePattern = new RegExp(wireLimits.namePattern);
const headerNamePattern = new RegExp(`^[A-Za-z0-9_.:-]{1,${wireLimits.headerNameLengthMax}}$`);

/** The values of outboxInsert, in column order ($1 id … $10 created_at). */
export function eventInsertValues(event: OutboxEvent, id: string, createdAt: number): unknown[] {
  // Over 80 lines: one check per field of an event, in the order a reader of the API expects.
  const { destination } = event;
  let kind: "queue" | "exchange";
  let name: string;
  let routingKey: string | null = null;
  if (destination !== null && typeof destination === "object" && "queue" in destination) {
    kind = "queue";
    name = destination.queue;
  } else if (destination !== null && typeof destination === "object" && "exchange" in destination) {
    kind = "exchange";
    name = destination.exchange;
    routingKey = destination.routingKey;
    if (typeof routingKey !== "string" || routingKey.length > wireLimits.routingKeyLengthMax) {
      throw new TypeError(
        `outbox event: routingKey must be a string of at most ${wireLimits.routingKeyLengthMax}`,
      );
    }
  } else {
    throw new TypeError("outbox event: destination must be { queue } or { exchange, routingKey }");
  }
  if (typeof name !== "string" || !namePattern.test(name)) {
    throw new TypeError(`outbox event: ${JSON.stringify(name)} is not a valid ${kind} name`);
  }
  if (
    event.key !== undefined &&
    (typeof event.key !== "string" || event.key.length < 1 || event.key.length > wireLimits.keyLengthMax)
  ) {
    throw new TypeError(`outbox event: key must be 1 to ${wireLimits.keyLengthMax} characters`);
  }
  const headers = event.headers ?? {};
  const headerNames = Object.keys(headers);
  // One header is the relay's own x-outbox-id.
  if (headerNames.length > wireLimits.headersCountMax - 1) {
    throw new TypeError(`outbox event: at most ${wireLimits.headersCountMax - 1} headers`);
  }
  for (const headerName of headerNames) {
    const value = headers[headerName];
    if (!headerNamePattern.test(headerName) || headerName.toLowerCase() === outboxIdHeader) {
      throw new TypeError(`outbox event: header name ${JSON.stringify(headerName)} is not allowed`);
    }
    if (typeof value !== "string" || value.length > wireLimits.headerValueLengthMax) {
      throw new TypeError(
        `outbox event: header ${headerName} must be a string of at most ${wireLimits.headerValueLengthMax}`,
      );
    }
  }
  let body: string;
  let bodyEncoding: "json" | "base64";
  if (event.body instanceof Uint8Array) {
    body = Buffer.from(event.body.buffer, event.body.byteOffset, event.body.byteLength).toString("base64");
    bodyEncoding = "base64";
  } else {
    const text = JSON.stringify(event.body);
    if (text === undefined) throw new TypeError("outbox event: body must be a JSON value or a Uint8Array");
    if (event.contentType !== undefined && event.contentType !== "application/json") {
      throw new TypeError("outbox event: a JSON body takes no contentType but application/json");
    }
    body = text;
    bodyEncoding = "json";
  }
  const contentType = event.contentType ?? null;
  if (
    contentType !== null &&
    (contentType.length < 1 || contentType.length > wireLimits.contentTypeLengthMax)
  ) {
    throw new TypeError(
      `outbox event: contentType must be 1 to ${wireLimits.contentTypeLengthMax} characters`,
    );
  }
  return [
    id,
    kind,
    name,
    routingKey,
    event.key ?? "",
    body,
    bodyEncoding,
    contentType,
    headerNames.length > 0 ? JSON.stringify(headers) : null,
    createdAt,
  ];
}

type RawRow = Record<string, unknown>;

const optionalNumber = (value: unknown) =>
  value === null || value === undefined ? undefined : Number(value);

/** Decodes a row as either database returns it (PostgreSQL's bigints come as strings). */
export function decodeRow(raw: RawRow): OutboxRow {
  const kind = raw.destination_kind as "queue" | "exchange";
  const name = raw.destination_name as string;
  return {
    seq: Number(raw.seq),
    id: raw.id as string,
    destination:
      kind === "queue" ? { queue: name } : { exchange: name, routingKey: raw.routing_key as string },
    key: raw.order_key === "" ? undefined : (raw.order_key as string),
    body: raw.body as string,
    bodyEncoding: raw.body_encoding as "json" | "base64",
    contentType: (raw.content_type as string | null) ?? undefined,
    headers: raw.headers ? (JSON.parse(raw.headers as string) as Record<string, string>) : undefined,
    state: raw.state as RowState,
    createdAt: Number(raw.created_at),
    sentAt: optionalNumber(raw.sent_at),
    failedAt: optionalNumber(raw.failed_at),
    error: raw.error ? (JSON.parse(raw.error as string) as RecordedError) : undefined,
  };
}

/** The message the relay sends for a row: its id as x-outbox-id and as the dedupId. */
export function rowMessage(row: OutboxRow): SendMessage {
  const message: SendMessage = {
    headers: { ...row.headers, [outboxIdHeader]: row.id },
    dedupId: row.id,
  };
  if (row.bodyEncoding === "json") message.body = JSON.parse(row.body);
  else message.bodyBase64 = row.body;
  if (row.contentType !== undefined) message.contentType = row.contentType;
  if (row.key !== undefined) message.key = row.key;
  return message;
}

export function rowPublishMessage(row: OutboxRow & { destination: { routingKey: string } }): PublishMessage {
  return { ...rowMessage(row), routingKey: row.destination.routingKey };
}
