/**
 * The integrations worker: two effects per MessageCreated event, each failing on its own.
 *
 * - the **search index** (SQLite FTS5 in the chat database): written with processOnce, so the row
 *   and its claim commit together and a redelivery writes nothing;
 * - the **outgoing webhook**: a POST to the receiver with the event id in `x-event-id`, recorded once
 *   the receiver answered 2xx, so a redelivery skips it (a crash between the answer and the record
 *   repeats the POST, which the receiver dedupes by that id).
 *
 * Both are tried on every delivery; if either failed the handler throws, the queue's retry policy
 * brings the event back, and only the effect that failed runs again. Neither holds up the page: this
 * queue is not on the path of the bubble.
 */
import type { HandlerContext, ReceivedMessage } from "@hopper/client";
import { processedMessageId, processOnce } from "@hopper/outbox";
import type Database from "better-sqlite3";
import type { MessageCreated } from "../api/messages.js";
import type { ChatQueries } from "../db.js";

/** A webhook receiver that has not answered by then counts as failed; the retry policy takes over. */
const webhookTimeoutMs = 5_000;

export function integrationsHandler(db: Database.Database, queries: ChatQueries, webhookUrl: string) {
  return async (message: ReceivedMessage, context: HandlerContext): Promise<void> => {
    const event = message.body as MessageCreated;
    const failures: unknown[] = [];
    try {
      await processOnce(db, { consumer: "search-index", message }, () => {
        const row = queries.message.get(event.messageId);
        if (row !== undefined) queries.insertSearchRow.run(row.id, row.conversationId, row.text);
      });
    } catch (error) {
      failures.push(error);
    }
    if (webhookUrl !== "" && queries.webhookDelivered.get(event.messageId) === undefined) {
      try {
        const response = await fetch(webhookUrl, {
          method: "POST",
          headers: { "content-type": "application/json", "x-event-id": processedMessageId(message) },
          body: JSON.stringify(event),
          signal: AbortSignal.any([context.signal, AbortSignal.timeout(webhookTimeoutMs)]),
        });
        if (!response.ok) throw new Error(`webhook answered ${response.status}`);
        queries.insertWebhookDelivery.run(event.messageId, new Date().toISOString());
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0)
      throw new AggregateError(failures, `integrations: ${failures.length} effect(s) failed`);
  };
}
