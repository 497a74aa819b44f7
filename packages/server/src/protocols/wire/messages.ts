/** The wire form of messages to send or publish, decoded for the broker. */
import type { SendMessage } from "@hopper/wire";

import type { OutgoingMessage } from "../../broker/queues.js";
import { invariant } from "../../errors.js";
import { decodeMessageBody } from "../../model/message-body.js";
import { sendBodySpans } from "./body-spans.js";

type WireMessage = Omit<SendMessage, "delayMs" | "priority"> & {
  delayMs?: number;
  priority?: number;
};

/**
 * Decodes one message; a malformed one fails the whole request, which then changes nothing. `sentAs`
 * is its JSON body's bytes as sent, if known (decodeMessageBody).
 */
function toOutgoing(message: WireMessage, index: number, sentAs?: Buffer): OutgoingMessage {
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
 * Decodes the messages of a send or publish, each JSON body taken as the bytes its producer sent:
 * views into `request`, the request's bytes, which parsed as JSON into `messages` (body-spans.ts). A
 * store that keeps a body in memory copies it (the log store).
 */
export function decodeMessages(messages: WireMessage[], request: Buffer | undefined): OutgoingMessage[] {
  invariant(request, "a send's bytes");
  const spans = sendBodySpans(request);
  invariant(spans?.length === messages.length, "a body span for each message");
  return messages.map((message, index) => {
    const span = spans[index];
    return toOutgoing(message, index, span && request.subarray(span.start, span.end));
  });
}
