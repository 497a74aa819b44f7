/** The wire form of messages to send or publish, decoded for the broker. */
import { decodeMessageBody } from "../../broker/message-body.js";
import type { OutgoingMessage } from "../../broker/queues.js";
import type { SendBody } from "./schemas.js";

type WireMessage = Omit<SendBody["messages"][number], "delayMs" | "priority"> & {
  delayMs?: number;
  priority?: number;
};

/** Decodes one message; a malformed one fails the whole request, which then changes nothing. */
export function toOutgoing(message: WireMessage, index: number): OutgoingMessage {
  return {
    ...decodeMessageBody(message, `messages[${index}]`),
    ...(message.headers && { headers: message.headers }),
    ...(message.key !== undefined && { key: message.key }),
    ...(message.delayMs !== undefined && { delayMs: message.delayMs }),
    ...(message.priority !== undefined && { priority: message.priority }),
    ...(message.dedupId !== undefined && { dedupId: message.dedupId }),
  };
}
