/** The wire form of messages to send or publish, decoded for the broker. */
import { decodeMessageBody } from "../../broker/message-body.js";
import type { OutgoingMessage } from "../../broker/queues.js";
import { invariant } from "../../errors.js";
import { sendBodySpans } from "../body-spans.js";
import type { SendBody } from "./schemas.js";

type WireMessage = Omit<SendBody["messages"][number], "delayMs" | "priority"> & {
  delayMs?: number;
  priority?: number;
};

/**
 * Decodes one message; a malformed one fails the whole request, which then changes nothing. `sentAs`
 * is its JSON body's bytes as sent, if known (decodeMessageBody).
 */
export function toOutgoing(message: WireMessage, index: number, sentAs?: Buffer): OutgoingMessage {
  return {
    ...decodeMessageBody(message, `messages[${index}]`, sentAs),
    ...(message.headers && { headers: message.headers }),
    ...(message.key !== undefined && { key: message.key }),
    ...(message.delayMs !== undefined && { delayMs: message.delayMs }),
    ...(message.priority !== undefined && { priority: message.priority }),
    ...(message.dedupId !== undefined && { dedupId: message.dedupId }),
  };
}

/**
 * Each message's JSON body as the bytes its producer sent, in message order: views into the request,
 * which `text` must be, parsed as JSON. A store that keeps a body in memory copies it (the log store).
 */
export function bodiesAsSent(text: Buffer | undefined, messageCount: number): (Buffer | undefined)[] {
  invariant(text, "a send's bytes");
  const spans = sendBodySpans(text);
  invariant(spans?.length === messageCount, "a body span for each message");
  return spans.map((span) => span && text.subarray(span.start, span.end));
}
