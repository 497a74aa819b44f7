/**
 * Enqueue inside the application's own PostgreSQL transaction: the messages become visible to
 * consumers only if that transaction commits, and the broker nodes wake on commit (NOTIFY is
 * delivered then). No outbox is needed when the application's database is the broker's.
 *
 *   await client.query("BEGIN");
 *   await client.query("INSERT INTO orders …");
 *   await sendInTransaction(client, "emails", [{ body: { orderId }, dedupId: `order-${orderId}` }]);
 *   await client.query("COMMIT");
 *
 * It applies the queue's policies as a send through the broker does: FIFO groups (a message joins the
 * group of its key), priorities (standard queues only), deduplication (dedupId, or the body's hash with
 * contentBasedDedup) and maxDepth. The locks it takes (message-writes.ts) are held until the
 * application's transaction ends, so a long transaction holds up other sends into the same FIFO groups,
 * and, with a maxDepth, every other send into the queue. One limit: with overflow dead-letter-oldest
 * and a dead-letter exchange, the exchange's bindings would have to be routed, which only the broker
 * does; such a queue refuses sendInTransaction with invalid_request (a dead-letter queue works).
 */
import type pg from "pg";
import { type Clock, systemClock } from "../../clock.js";
import { HopperError, queueNotFound } from "../../errors.js";
import { uuidv7Generator } from "../../ids.js";
import { limits } from "../../limits.js";
import { bodyByteLength, type NewMessage } from "../../model/message.js";
import { decodeMessageBody, type MessageBodyInput } from "../../model/message-body.js";
import { dedupIdFor, sendPolicyOf } from "../../model/policies.js";
import { type DeadLetterRoute, depthOf, type QueueAttributes, type QueueRecord } from "../../model/queue.js";
import { pushbackRefusal } from "../../model/queue-attributes.js";
import { type Random, systemRandom } from "../../random.js";
import { type QueueRow, toQueueRecord } from "../rows.js";
import { channelFor, encodeEvent } from "./events.js";
import { MessageWrites } from "./message-writes.js";
import { checkSchemaName, counterShards } from "./schema.js";
import * as sql from "./statements/index.js";

export interface TransactionalMessage extends MessageBodyInput {
  headers?: Record<string, string>;
  key?: string;
  delayMs?: number;
  /** 0–9, higher leased first; a FIFO queue takes only 0. */
  priority?: number;
  /** A message with the dedupId of one stored within the queue's dedupWindow is not stored again. */
  dedupId?: string;
}

export interface SendInTransactionOptions {
  /** The schema the broker nodes use (their --pg-schema); default "hopper". */
  schema?: string;
  clock?: Clock;
  random?: Random;
}

const namePattern = new RegExp(limits.namePattern);
const headerNamePattern = new RegExp(`^[A-Za-z0-9_.:-]{1,${limits.headerNameLengthMax}}$`);

/**
 * Stores `messages` in `queue` through `client`, inside the transaction the client has open (BEGIN
 * first: FIFO group locks last until it ends, and only a transaction makes the send all or none).
 * All or none: any invalid message, or a send that a full queue refuses (queue_full), throws a
 * HopperError and nothing is written, so the application can roll back or go on. Resolves with each
 * message's id, confirmed once the transaction commits; for a duplicate, the id stored first under
 * its dedupId, with `duplicate` true.
 */
export async function sendInTransaction(
  client: pg.ClientBase,
  queue: string,
  messages: TransactionalMessage[],
  options: SendInTransactionOptions = {},
): Promise<{ id: string; duplicate: boolean }[]> {
  const schema = options.schema ?? "hopper";
  checkSchemaName(schema);
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  if (!namePattern.test(queue))
    throw new HopperError("invalid_name", `"${queue}" is not a valid queue name.`);
  if (messages.length < 1 || messages.length > limits.batchSizeMax) {
    throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} messages.`);
  }
  const { rows } = await client.query<QueueRow>(sql.queueLockSharedWithCountersIn(schema), [queue]);
  const row = rows[0];
  if (!row) throw queueNotFound(queue);
  const record = toQueueRecord({ ...row, queue_id: Number(row.queue_id) });
  const now = clock.now();
  await checkPushback(client, schema, record, now);
  const newId = uuidv7Generator(clock);
  const prepared = messages.map((message, index) =>
    prepare(message, `messages[${index}]`, record, now, newId),
  );
  const policy = sendPolicyOf(record.attributes, overflowRoute(record));
  const writes = new MessageWrites(schema, () => Math.floor(random.float() * counterShards));
  const locked = await writes.lockQueue(client, queue, policy.overflow ? "depth" : "share");
  if (!locked) throw queueNotFound(queue);
  // Only a full queue that refuses throws after writing (deduplication claims come first): a savepoint
  // undoes those writes and leaves the application's transaction as it was.
  const refusable = policy.overflow?.policy === "reject";
  if (refusable) await savepoint(client);
  let sent: { ids: string[]; written: string[] };
  try {
    sent = await writes.send(client, locked, prepared, policy, now);
  } catch (error) {
    if (refusable) await client.query("ROLLBACK TO SAVEPOINT hopper_send");
    throw error;
  }
  if (refusable) await client.query("RELEASE SAVEPOINT hopper_send");
  for (const name of new Set(sent.written)) {
    await client.query(sql.notify, [
      channelFor(schema),
      encodeEvent("app", { kind: "messages", queue: name }),
    ]);
  }
  return sent.ids.map((id, index) => ({ id, duplicate: id !== prepared[index]?.id }));
}

/** A publish, here as through the broker, is refused while the queue is over its pushback limits. */
async function checkPushback(
  client: pg.ClientBase,
  schema: string,
  queue: QueueRecord,
  now: number,
): Promise<void> {
  const { pushbackDepth, pushbackAgeMs } = queue.attributes;
  if (pushbackDepth === null && pushbackAgeMs === null) return;
  const oldestPublishedAt =
    pushbackAgeMs === null
      ? null
      : ((await client.query<{ oldest: number | null }>(sql.messageOldestPublishedAtIn(schema), [queue.name]))
          .rows[0]?.oldest ?? null);
  const refusal = pushbackRefusal(queue.name, queue.attributes, {
    depth: depthOf(queue.counters),
    oldestPublishedAt: oldestPublishedAt === null ? null : Number(oldestPublishedAt),
    now,
  });
  if (refusal) throw refusal;
}

/** Validates one message against the queue and makes it a stored message. */
function prepare(
  message: TransactionalMessage,
  where: string,
  queue: QueueRecord,
  now: number,
  newId: () => string,
): NewMessage {
  const attributes = queue.attributes;
  const { body, contentType } = decodeMessageBody(message, where);
  const bytes = bodyByteLength(body);
  if (bytes > attributes.maxMessageBytes) {
    throw new HopperError("message_too_large", `${where}: the body is larger than the queue allows.`, {
      bytes,
      max: attributes.maxMessageBytes,
    });
  }
  checkHeaders(message.headers ?? {}, where);
  const delayMs = message.delayMs ?? attributes.delayMs;
  if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > attributes.retentionMs) {
    throw new HopperError("invalid_request", `${where}: delayMs must be from 0 to the queue's retention.`);
  }
  const priority = message.priority ?? 0;
  if (!Number.isInteger(priority) || priority < 0 || priority > limits.priorityMax) {
    throw new HopperError(
      "invalid_request",
      `${where}: priority must be an integer from 0 to ${limits.priorityMax}.`,
    );
  }
  if (queue.kind === "fifo" && priority !== 0) {
    throw new HopperError(
      "invalid_request",
      `${where}: a FIFO queue delivers in order per key: it has no priorities.`,
      { queue: queue.name },
    );
  }
  checkLength(message.key, limits.keyLengthMax, `${where}: key`);
  checkLength(message.dedupId, limits.dedupIdLengthMax, `${where}: dedupId`);
  return {
    id: newId(),
    body,
    contentType,
    headers: message.headers ?? {},
    key: message.key ?? null,
    priority,
    dedupId: dedupIdFor({ body, dedupId: message.dedupId ?? null }, attributes),
    publishedAt: now,
    visibleAt: now + delayMs,
  };
}

/**
 * Where dead-letter-oldest moves the oldest messages of this queue. Only the broker routes through an
 * exchange, so a queue that dead-letters to one is refused here.
 */
function overflowRoute(queue: QueueRecord): DeadLetterRoute | null {
  const attributes: QueueAttributes = queue.attributes;
  if (attributes.maxDepth === null || attributes.overflow !== "dead-letter-oldest") return null;
  const target = attributes.deadLetter;
  if (!target) return null;
  if ("queue" in target) return { queues: [target.queue], maxDeliveries: target.maxDeliveries };
  throw new HopperError(
    "invalid_request",
    `Queue "${queue.name}" moves its oldest messages to the dead-letter exchange "${target.exchange}" when ` +
      "full; sendInTransaction cannot route an exchange's bindings: send through the broker instead.",
    { queue: queue.name, exchange: target.exchange },
  );
}

/** Opens the savepoint that a refused send rolls back to; there is none outside a transaction. */
async function savepoint(client: pg.ClientBase): Promise<void> {
  try {
    await client.query("SAVEPOINT hopper_send");
  } catch (error) {
    if ((error as { code?: string }).code !== "25P01") throw error;
    throw new HopperError(
      "invalid_request",
      "sendInTransaction runs inside the application's transaction: BEGIN first.",
    );
  }
}

function checkLength(value: string | undefined, max: number, what: string): void {
  if (value !== undefined && (typeof value !== "string" || value.length < 1 || value.length > max)) {
    throw new HopperError("invalid_request", `${what} must be a string of 1 to ${max} characters.`);
  }
}

function checkHeaders(headers: Record<string, string>, where: string): void {
  const entries = Object.entries(headers);
  const bad =
    entries.length > limits.headersCountMax ||
    entries.some(
      ([name, value]) =>
        !headerNamePattern.test(name) ||
        typeof value !== "string" ||
        value.length > limits.headerValueLengthMax,
    );
  if (bad) throw new HopperError("invalid_request", `${where}: headers break the limits (docs/api.md).`);
}
