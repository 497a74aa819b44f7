/**
 * Enqueue inside the application's own PostgreSQL transaction: the messages become visible to
 * consumers only if that transaction commits, and the broker nodes wake on commit (NOTIFY is
 * delivered then). No outbox is needed when the application's database is the broker's.
 *
 *   await client.query("BEGIN");
 *   await client.query("INSERT INTO orders …");
 *   await sendInTransaction(client, "emails", [{ body: { orderId } }]);
 *   await client.query("COMMIT");
 */
import type pg from "pg";
import { decodeMessageBody, type MessageBodyInput } from "../../broker/message-body.js";
import { type Clock, systemClock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import { uuidv7Generator } from "../../ids.js";
import { limits } from "../../limits.js";
import { type Random, systemRandom } from "../../random.js";
import type { QueueAttributes } from "../store.js";
import { channelFor, encodeEvent } from "./events.js";
import { checkSchemaName } from "./schema.js";
import * as sql from "./statements.js";

export interface TransactionalMessage extends MessageBodyInput {
  headers?: Record<string, string>;
  key?: string;
  delayMs?: number;
}

export interface SendInTransactionOptions {
  /** The schema the broker nodes use (their --pg-schema); default "hopper". */
  schema?: string;
  clock?: Clock;
  random?: Random;
}

const namePattern = new RegExp(limits.namePattern);
const headerNamePattern = new RegExp(`^[A-Za-z0-9_.:-]{1,${limits.headerNameLengthMax}}$`);
/** As the PostgreSQL store's own counter shards (schema.ts). */
const counterShards = 16;

/**
 * Stores `messages` in `queue` through `client`, inside whatever transaction the client has open.
 * All or none: any invalid message throws a HopperError and nothing is written, so the application
 * can roll back or go on. Resolves with the ids, which are confirmed once the transaction commits.
 */
export async function sendInTransaction(
  client: pg.ClientBase,
  queue: string,
  messages: TransactionalMessage[],
  options: SendInTransactionOptions = {},
): Promise<{ id: string }[]> {
  const schema = options.schema ?? "hopper";
  checkSchemaName(schema);
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  if (!namePattern.test(queue))
    throw new HopperError("invalid_name", `"${queue}" is not a valid queue name.`);
  if (messages.length < 1 || messages.length > limits.batchSizeMax) {
    throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} messages.`);
  }
  const { rows } = await client.query<{ queue_id: number | string; attributes: QueueAttributes }>(
    sql.queueLockSharedIn(schema),
    [queue],
  );
  const row = rows[0];
  if (!row) throw new HopperError("queue_not_found", `Queue "${queue}" does not exist.`, { queue });
  const attributes = row.attributes;
  const now = clock.now();
  const newId = uuidv7Generator(clock);
  const prepared = messages.map((message, index) => {
    const where = `messages[${index}]`;
    const { body, contentType } = decodeMessageBody(message, where);
    if (body.length > attributes.maxMessageBytes) {
      throw new HopperError("message_too_large", `${where}: the body is larger than the queue allows.`, {
        bytes: body.length,
        max: attributes.maxMessageBytes,
      });
    }
    checkHeaders(message.headers ?? {}, where);
    const delayMs = message.delayMs ?? attributes.delayMs;
    if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > attributes.retentionMs) {
      throw new HopperError("invalid_request", `${where}: delayMs must be from 0 to the queue's retention.`);
    }
    return {
      id: newId(),
      body,
      contentType,
      headers: message.headers ?? {},
      key: message.key ?? null,
      delayMs,
    };
  });
  await client.query(sql.messageInsertManyIn(schema), [
    row.queue_id,
    prepared.map((m) => m.id),
    prepared.map((m) => m.body),
    prepared.map((m) => m.contentType),
    prepared.map((m) => (Object.keys(m.headers).length > 0 ? JSON.stringify(m.headers) : null)),
    prepared.map((m) => m.key),
    prepared.map(() => now),
    prepared.map((m) => now + m.delayMs),
    prepared.map(() => 0),
  ]);
  await client.query(sql.queueAddCountersIn(schema), [
    row.queue_id,
    Math.floor(random.float() * counterShards),
    prepared.length,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
  ]);
  await client.query(sql.notify, [channelFor(schema), encodeEvent("app", { kind: "messages", queue })]);
  return prepared.map((m) => ({ id: m.id }));
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
