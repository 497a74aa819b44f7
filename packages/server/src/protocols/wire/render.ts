/**
 * How messages look on the wire: a JSON body is returned as the JSON value it was sent as; any other
 * content type as base64. Times are ISO-8601.
 */

import type { TaskInfo } from "../../broker/redrive.js";
import type { HopperError } from "../../errors.js";
import type { ExchangeRecord } from "../../model/exchange.js";
import type { LeasedMessage, StoredMessage } from "../../model/message.js";
import { jsonContentType } from "../../model/message-body.js";

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** A JSON body's text (the store may hand it over as text already). */
function jsonText(body: Buffer | string): string {
  return typeof body === "string" ? body : body.toString("utf8");
}

/** Any other body in base64 (stores hand those over as bytes; text is taken as its UTF-8). */
function base64Text(body: Buffer | string): string {
  return (typeof body === "string" ? Buffer.from(body, "utf8") : body).toString("base64");
}

function renderBody(message: StoredMessage): { body: unknown } | { bodyBase64: string } {
  if (message.contentType === jsonContentType) return { body: JSON.parse(jsonText(message.body)) };
  return { bodyBase64: base64Text(message.body) };
}

/**
 * A peeked message. One whose body failed its checksum shows its stored bytes in base64 and
 * `corrupt: true`: they may no longer be JSON, and nothing should take them for the message.
 */
export function renderStored(message: StoredMessage): Record<string, unknown> {
  return {
    id: message.id,
    ...(message.corrupt ? { bodyBase64: base64Text(message.body), corrupt: true } : renderBody(message)),
    contentType: message.contentType,
    headers: message.headers,
    key: message.key,
    priority: message.priority,
    dedupId: message.dedupId,
    deliveryCount: message.deliveryCount,
    publishedAt: iso(message.publishedAt),
    visibleAt: iso(message.visibleAt),
    firstDeliveredAt: iso(message.firstDeliveredAt),
  };
}

/**
 * JSON text of a field, made again only when the value changes (by identity): the messages of one
 * lease mostly share their content type, key, publish time (they came in one send) and first delivery
 * (this lease), so each field remembers its last value and the text made for it.
 */
function lastJsonOf<T>(toJson: (value: T) => string): (value: T) => string {
  let last: { value: T; json: string } | undefined;
  return (value) => {
    if (last === undefined || last.value !== value) last = { value, json: toJson(value) };
    return last.json;
  };
}

const publishedAtJson = lastJsonOf((ms: number) => JSON.stringify(iso(ms)));
const firstDeliveredAtJson = lastJsonOf((ms: number | null) => JSON.stringify(iso(ms)));
const contentTypeJson = lastJsonOf((contentType: string) => JSON.stringify(contentType));
const keyJson = lastJsonOf((key: string | null) => JSON.stringify(key));

function headersJson(headers: Record<string, string>): string {
  for (const _ in headers) return JSON.stringify(headers);
  return "{}";
}

/**
 * `before`, then the leased messages as JSON separated by commas, then `after`, written straight into one
 * buffer: the same fields as renderLeased. A JSON body goes in as the text or bytes it was stored as
 * (it was checked to be JSON on the way in), so the hot path of receive and push never parses a body
 * only to serialize it again, and each body is copied once, into its place: joined as strings first,
 * a 1 KiB body was copied three more times on the JS heap (the message's text, the joined list, the
 * frame flattened for its byte length), 3.6 KB of garbage a message in W1.
 */
export function leasedListJson(before: string, messages: readonly LeasedMessage[], after: string): Buffer {
  const parts: (string | Buffer)[] = [before];
  messages.forEach((message, index) => {
    const json = message.contentType === jsonContentType;
    parts.push(
      `${index === 0 ? "" : ","}{"id":"${message.id}","receipt":"${message.receipt}",` +
        (json ? `"body":` : `"bodyBase64":"${base64Text(message.body)}"`),
    );
    if (json) parts.push(message.body);
    parts.push(
      `,"contentType":${contentTypeJson(message.contentType)},"headers":${headersJson(message.headers)},` +
        `"key":${keyJson(message.key)},"deliveryCount":${message.deliveryCount},` +
        `"publishedAt":${publishedAtJson(message.publishedAt)},` +
        `"firstDeliveredAt":${firstDeliveredAtJson(message.firstDeliveredAt)}}`,
    );
  });
  parts.push(after);
  let bytes = 0;
  for (const part of parts) bytes += typeof part === "string" ? Buffer.byteLength(part) : part.length;
  const written = Buffer.allocUnsafe(bytes);
  let offset = 0;
  for (const part of parts) {
    offset += typeof part === "string" ? written.write(part, offset) : part.copy(written, offset);
  }
  return written;
}

export function renderLeased(message: LeasedMessage): Record<string, unknown> {
  return {
    id: message.id,
    receipt: message.receipt,
    ...renderBody(message),
    contentType: message.contentType,
    headers: message.headers,
    key: message.key,
    deliveryCount: message.deliveryCount,
    publishedAt: iso(message.publishedAt),
    firstDeliveredAt: iso(message.firstDeliveredAt),
  };
}

/** One item of a batch answer: its success as it is, or its error in the catalog's shape. */
export function renderItemResult(result: object | { error: HopperError }): object {
  return "error" in result ? { error: result.error.toJSON() } : result;
}

export function renderExchange(exchange: ExchangeRecord, unroutable: number): Record<string, unknown> {
  return {
    name: exchange.name,
    type: exchange.type,
    alternate: exchange.alternate,
    bindings: exchange.bindings.map((binding) => ({
      [binding.destination.kind]: binding.destination.name,
      pattern: binding.pattern,
    })),
    stats: { unroutable },
  };
}

export function renderTask(task: TaskInfo): Record<string, unknown> {
  return {
    id: task.id,
    kind: task.kind,
    state: task.state,
    moved: task.moved,
    total: task.total,
    queue: task.queue,
    to: task.to,
    ratePerSecond: task.ratePerSecond,
    ...(task.error && { error: task.error.toJSON() }),
    createdAt: iso(task.createdAt),
    finishedAt: iso(task.finishedAt),
  };
}
