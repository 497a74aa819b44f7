/** The wire form of messages to send or publish, decoded for the broker. */
import { decodeMessageBody } from "../../broker/message-body.js";
import type { OutgoingMessage } from "../../broker/queues.js";
import { HopperError } from "../../errors.js";
import type { SendBody } from "./schemas.js";

type WireMessage = Omit<SendBody["messages"][number], "delayMs" | "priority"> & {
  delayMs?: number;
  priority?: number;
};

/** Decodes one message; a malformed one fails the whole request, which then changes nothing. */
export function toOutgoing(message: WireMessage, index: number): OutgoingMessage {
  if (message.dedupId !== undefined || message.priority !== undefined) {
    throw new HopperError(
      "not_implemented",
      `messages[${index}]: dedupId and priority are not implemented yet.`,
      {
        index,
      },
    );
  }
  return {
    ...decodeMessageBody(message, `messages[${index}]`),
    ...(message.headers && { headers: message.headers }),
    ...(message.key !== undefined && { key: message.key }),
    ...(message.delayMs !== undefined && { delayMs: message.delayMs }),
  };
}
