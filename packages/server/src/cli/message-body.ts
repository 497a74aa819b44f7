/**
 * How `hopper send` turns what it is given into message bodies: JSON when the text parses as JSON,
 * UTF-8 text otherwise, and raw bytes (base64 on the wire) for a file that is not UTF-8.
 */
import { open } from "node:fs/promises";
import { createInterface } from "node:readline";
import { HopperError, type SendMessage } from "@hopper/client";
import { limits } from "../limits.js";
import { UsageError } from "./flags.js";

export const textContentType = "text/plain";
const bytesContentType = "application/octet-stream";

type Body = Pick<SendMessage, "body" | "bodyBase64" | "contentType">;

/** A JSON body if `text` parses as JSON (unless `asText`), otherwise the text as text/plain. */
export function bodyFromText(text: string, asText = false): Body {
  if (!asText) {
    try {
      return { body: JSON.parse(text) };
    } catch {
      // Not JSON: it is sent as the text it is.
    }
  }
  return { bodyBase64: Buffer.from(text, "utf8").toString("base64"), contentType: textContentType };
}

/** As `bodyFromText` for UTF-8 bytes; other bytes go as they are, since decoding would change them. */
export function bodyFromBytes(bytes: Uint8Array, asText = false): Body {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { bodyBase64: Buffer.from(bytes).toString("base64"), contentType: bytesContentType };
  }
  return bodyFromText(text, asText);
}

/**
 * The body of a command that takes it as an argument or from `--file` (exactly one of them), as JSON
 * when it parses unless `asText`.
 */
export async function bodyFromArgumentOrFile(
  text: string | undefined,
  flags: { file?: string | undefined; text?: boolean | undefined },
): Promise<Body> {
  if ((text === undefined) === (flags.file === undefined))
    throw new UsageError("give the body as an argument or with --file, not both and not neither.");
  return text !== undefined
    ? bodyFromText(text, flags.text === true)
    : bodyFromBytes(await readBody(flags.file as string), flags.text === true);
}

/** Opens `--file` for reading, "-" being stdin; a path that cannot be opened is a usage error. */
async function openInput(path: string): Promise<NodeJS.ReadableStream> {
  if (path === "-") return process.stdin;
  try {
    const handle = await open(path, "r");
    return handle.createReadStream();
  } catch (error) {
    throw new UsageError(`cannot read --file ${path}: ${(error as Error).message}`);
  }
}

/**
 * Reads a whole file as one body. It stops past the largest body the server takes, so a mistaken
 * path to a huge file fails at once instead of filling memory.
 */
export async function readBody(path: string): Promise<Buffer> {
  const input = await openInput(path);
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of input) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    bytes += buffer.length;
    if (bytes > limits.messageBytesMax) {
      const message = `--file ${path} holds more than the ${limits.messageBytesMax} bytes a message may hold.`;
      throw new HopperError({ code: "message_too_large", message, status: 0 });
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

export interface NumberedLine {
  text: string;
  /** Counted from 1, blank lines included, so an error can point at the line in the file. */
  number: number;
}

/** The lines of `--file` without their line ends (\n or \r\n); blank lines hold no message. */
export async function* readLines(path: string): AsyncGenerator<NumberedLine> {
  const lines = createInterface({ input: await openInput(path), crlfDelay: Number.POSITIVE_INFINITY });
  let number = 0;
  for await (const text of lines) {
    number += 1;
    if (text.trim() !== "") yield { text, number };
  }
}
