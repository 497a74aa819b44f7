/**
 * The native API's body convention, shared by every way in (HTTP, sendInTransaction): a JSON value in
 * `body` is stored as its JSON text with content type application/json; any other bytes come as
 * `bodyBase64` with their content type.
 */
import { HopperError } from "../errors.js";

export const jsonContentType = "application/json";

export interface MessageBodyInput {
  body?: unknown;
  bodyBase64?: string;
  contentType?: string;
}

const base64Pattern = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes one message's body; `where` names the item in the error ("messages[3]"). */
export function decodeMessageBody(
  message: MessageBodyInput,
  where: string,
): { body: Buffer; contentType: string } {
  const fail = (text: string) => new HopperError("invalid_request", `${where}: ${text}`, { where });
  const hasBody = message.body !== undefined;
  if (hasBody === (message.bodyBase64 !== undefined)) throw fail("give exactly one of body and bodyBase64.");
  if (hasBody) {
    if (message.contentType !== undefined && message.contentType !== jsonContentType) {
      throw fail(`a JSON body has contentType ${jsonContentType}; send other types as bodyBase64.`);
    }
    return { body: Buffer.from(JSON.stringify(message.body), "utf8"), contentType: jsonContentType };
  }
  const text = message.bodyBase64 as string;
  if (!base64Pattern.test(text)) throw fail("bodyBase64 is not base64.");
  const body = Buffer.from(text, "base64");
  const contentType = message.contentType ?? "application/octet-stream";
  if (contentType === jsonContentType) {
    try {
      JSON.parse(body.toString("utf8"));
    } catch {
      throw fail("bodyBase64 with contentType application/json must decode to valid JSON.");
    }
  }
  return { body, contentType };
}
