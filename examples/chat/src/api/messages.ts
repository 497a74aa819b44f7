/**
 * Sending, history and receipts. A send inserts the message with its conversation's next sequence
 * and an outbox row (the MessageCreated event) in one transaction, so the event exists exactly when
 * the message does; the relay publishes it afterwards. The message id is the UUID the page made
 * before its first attempt, so a resend after a lost answer finds the stored row and never makes a
 * second. Receipts are stored, then appended to the sender's inbox (idempotent on their entry id), so
 * the sender's devices show the ticks.
 */
import { writeOutbox } from "@hopper/outbox";
import type Database from "better-sqlite3";
import type { FastifyInstance } from "fastify";
import { type ChatEnv, entryIds, limits, names, pausePoint } from "../config.js";
import type { ChatQueries, MessageRow } from "../db.js";
import type { HopperInboxes } from "../hopper-inboxes.js";
import type { ChatAuth } from "./auth.js";

/** The event the relay publishes for each committed message: it names the row, with a short preview. */
export interface MessageCreated {
  type: "MessageCreated";
  messageId: string;
  conversationId: string;
  seq: number;
  sender: string;
  preview: string;
  createdAt: string;
}

export type ReceiptState = "delivered" | "read";

export interface MessageRoutesDeps {
  env: ChatEnv;
  db: Database.Database;
  queries: ChatQueries;
  auth: ChatAuth;
  inboxes: HopperInboxes;
  now: () => Date;
}

const uuidPattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

type SendOutcome = { message: MessageRow; duplicate: boolean } | { conflict: true };

/** The transaction of a send: the stored message if the id is known, else a new row and its event. */
function sendTransaction(db: Database.Database, queries: ChatQueries) {
  return db.transaction(
    (user: string, conversationId: string, id: string, text: string, createdAt: string): SendOutcome => {
      const existing = queries.message.get(id);
      if (existing !== undefined) {
        const same = existing.sender === user && existing.conversationId === conversationId;
        return same ? { message: existing, duplicate: true } : { conflict: true };
      }
      const next = queries.nextSeq.get(conversationId);
      if (next === undefined) throw new Error(`conversation ${conversationId} vanished`);
      const message = { id, conversationId, seq: next.lastSeq, sender: user, text, createdAt };
      queries.insertMessage.run(id, conversationId, message.seq, user, text, createdAt);
      const event: MessageCreated = {
        type: "MessageCreated",
        messageId: id,
        conversationId,
        seq: message.seq,
        sender: user,
        preview: text.slice(0, limits.previewCharsMax),
        createdAt,
      };
      // Keyed by conversation: the relay publishes one conversation's events in commit order.
      writeOutbox(db, {
        destination: { exchange: names.exchange, routingKey: names.routingKey },
        key: conversationId,
        body: event,
      });
      return { message, duplicate: false };
    },
  );
}

/** Messages after `after` with who has received and read each. */
function historyOf(queries: ChatQueries, conversationId: string, after: number, limit: number) {
  const messages = queries.history.all(conversationId, after, limit);
  const last = messages.at(-1)?.seq ?? after;
  const receipts = new Map<string, { delivered: string[]; read: string[] }>();
  for (const row of queries.receiptsOfRange.all(conversationId, after, last)) {
    const entry = receipts.get(row.messageId) ?? { delivered: [], read: [] };
    entry[row.state as ReceiptState].push(row.userId);
    receipts.set(row.messageId, entry);
  }
  return messages.map((message) => ({
    ...message,
    ...(receipts.get(message.id) ?? { delivered: [], read: [] }),
  }));
}

const notMember = { error: { code: "not_found", message: "No such conversation." } };

function isMember(queries: ChatQueries, conversationId: string, user: string): boolean {
  return queries.isMember.get(conversationId, user) !== undefined;
}

export function messageRoutes(app: FastifyInstance, deps: MessageRoutesDeps): void {
  sendRoute(app, deps);
  historyRoute(app, deps);
  receiptRoute(app, deps);
}

function sendRoute(app: FastifyInstance, deps: MessageRoutesDeps): void {
  const { env, db, queries, auth, now } = deps;
  const send = sendTransaction(db, queries);
  app.post<{ Params: { id: string }; Body: { id: string; text: string } }>(
    "/api/conversations/:id/messages",
    {
      schema: {
        body: {
          type: "object",
          additionalProperties: false,
          required: ["id", "text"],
          properties: {
            id: { type: "string", pattern: uuidPattern },
            text: { type: "string", minLength: 1, maxLength: limits.messageTextCharsMax },
          },
        },
      },
    },
    async (request, reply) => {
      const user = auth.userOf(request, reply);
      if (user === undefined) return reply;
      const conversationId = request.params.id;
      if (!isMember(queries, conversationId, user)) return reply.code(404).send(notMember);
      // IMMEDIATE: the transaction reads before it writes, and in WAL mode a deferred one that another
      // process wrote under would fail at its first write (SQLITE_BUSY) instead of waiting its turn.
      const outcome = send.immediate(
        user,
        conversationId,
        request.body.id.toLowerCase(),
        request.body.text,
        now().toISOString(),
      );
      if ("conflict" in outcome) {
        return reply
          .code(409)
          .send({ error: { code: "id_taken", message: "This message id names another message." } });
      }
      // Test-only: a kill -9 here leaves a committed message and outbox row whose sender never heard.
      await pausePoint(env, "api-after-commit", { id: outcome.message.id });
      return reply.code(outcome.duplicate ? 200 : 201).send(outcome);
    },
  );
}

function historyRoute(app: FastifyInstance, deps: MessageRoutesDeps): void {
  const { queries, auth } = deps;
  app.get<{ Params: { id: string }; Querystring: { after?: number; limit?: number } }>(
    "/api/conversations/:id/messages",
    {
      schema: {
        querystring: {
          type: "object",
          additionalProperties: false,
          properties: {
            after: { type: "integer", minimum: 0 },
            limit: { type: "integer", minimum: 1, maximum: limits.historyPageMax },
          },
        },
      },
    },
    async (request, reply) => {
      const user = auth.userOf(request, reply);
      if (user === undefined) return reply;
      const conversationId = request.params.id;
      if (!isMember(queries, conversationId, user)) return reply.code(404).send(notMember);
      const { after = 0, limit = limits.historyPageMax } = request.query;
      return { messages: historyOf(queries, conversationId, after, limit) };
    },
  );
}

function receiptRoute(app: FastifyInstance, deps: MessageRoutesDeps): void {
  const { queries, auth, inboxes, now } = deps;
  app.post<{ Body: { state: ReceiptState; messageIds: string[] } }>(
    "/api/receipts",
    {
      schema: {
        body: {
          type: "object",
          additionalProperties: false,
          required: ["state", "messageIds"],
          properties: {
            state: { enum: ["delivered", "read"] },
            messageIds: {
              type: "array",
              minItems: 1,
              maxItems: limits.receiptBatchMax,
              items: { type: "string", pattern: uuidPattern },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const user = auth.userOf(request, reply);
      if (user === undefined) return reply;
      const { state, messageIds } = request.body;
      let recorded = 0;
      for (const messageId of messageIds) {
        const message = queries.message.get(messageId.toLowerCase());
        if (
          message === undefined ||
          message.sender === user ||
          !isMember(queries, message.conversationId, user)
        )
          continue;
        queries.insertReceipt.run(message.id, user, state, now().toISOString());
        // Appended every time, not only when the row is new: an earlier append may have failed after
        // the insert, and the entry id makes a repeat harmless.
        await inboxes.append([message.sender], {
          id: entryIds.receipt(message.id, user, state),
          body: {
            type: "receipt",
            messageId: message.id,
            conversationId: message.conversationId,
            user,
            state,
          },
        });
        recorded += 1;
      }
      return { recorded };
    },
  );
}
