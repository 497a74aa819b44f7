/**
 * Answers for requests that never reach Fastify's router: those Node's HTTP parser refuses (an unknown
 * method, a bad Content-Length, headers too large) and those that time out. Fastify's default answers
 * them with its own body, `{statusCode, error, message}`; these get the catalog's, as every answer does.
 */
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { HopperError } from "../../errors.js";

/**
 * Answers a request Node's HTTP parser refused or that timed out, as Fastify's default handler does
 * (write the answer, then destroy the socket: the connection's state is unknown), with the catalog's
 * body instead of Fastify's.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  // A reset connection has no one to answer.
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const hopperError = clientErrorFor(error);
  const body = JSON.stringify({ error: hopperError.toJSON() });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${hopperError.status} ${STATUS_CODES[hopperError.status]}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/** The catalog error for a `clientError` of Node's HTTP server. */
export function clientErrorFor(error: Error & { code?: string }): HopperError {
  switch (error.code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new HopperError("request_timeout");
    case "HPE_HEADER_OVERFLOW":
      return new HopperError("headers_too_large");
    default:
      // Node's parser names what it refused: an unknown method, a bad header or Content-Length.
      return new HopperError("invalid_request", `The request is not valid HTTP: ${error.message}`, {
        ...(error.code !== undefined && { reason: error.code }),
      });
  }
}
