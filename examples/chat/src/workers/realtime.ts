/**
 * The realtime worker: for each MessageCreated event, appends the message to the `chat` inbox of
 * every member of its conversation (the sender too, for their other devices), with the message's own
 * id as the entry id, so a redelivered event lands once. The worker acks only after Hopper answered
 * the append, which it does once the append is durable: a crash between the two redelivers the event,
 * and the second append is answered `duplicate`.
 */
import type { ReceivedMessage } from "@hopper/client";
import type { MessageCreated } from "../api/messages.js";
import { type ChatEnv, entryIds, pausePoint } from "../config.js";
import type { ChatQueries } from "../db.js";
import type { HopperInboxes } from "../hopper-inboxes.js";

export function realtimeHandler(env: ChatEnv, queries: ChatQueries, inboxes: HopperInboxes) {
  return async (message: ReceivedMessage): Promise<void> => {
    const event = message.body as MessageCreated;
    // The event follows the commit, so the row is there; the entry carries the whole message, which a
    // page can show at once, where the event has only a preview.
    const row = queries.message.get(event.messageId);
    if (row === undefined) throw new Error(`message ${event.messageId} is not in the database`);
    const members = queries.members.all(row.conversationId).map((member) => member.userId);
    const results = await inboxes.append(members, {
      id: entryIds.message(row.id),
      body: { type: "message", message: row },
    });
    // Test-only: a kill -9 here leaves the entries appended and the event unacked.
    await pausePoint(env, "realtime-after-append", { id: row.id, results });
  };
}
