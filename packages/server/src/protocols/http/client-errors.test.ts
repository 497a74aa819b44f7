import assert from "node:assert/strict";
import { once } from "node:events";
import { createConnection, createServer, type Socket } from "node:net";
import { test } from "node:test";
import { answerClientError, clientErrorFor } from "./client-errors.js";

/** What a client reads when the server answers its connection's `clientError` with `error`. */
async function answerRead(error: Error & { code?: string }): Promise<string> {
  const server = createServer((socket: Socket) => {
    // Destroyed with the error, as Node's HTTP server's sockets are, which listen for it.
    socket.on("error", () => {});
    answerClientError(error, socket);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const client = createConnection({ host: "127.0.0.1", port });
  client.on("error", () => {});
  let text = "";
  client.setEncoding("utf8").on("data", (chunk: string) => {
    text += chunk;
  });
  await once(client, "close");
  server.close();
  return text;
}

test("a request timeout is answered 408 request_timeout in the catalog's body, and the socket closed", async () => {
  const text = await answerRead(Object.assign(new Error("timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" }));
  const [head = "", body = ""] = text.split("\r\n\r\n");
  assert.match(head, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  assert.match(head, /\r\nContent-Type: application\/json; charset=utf-8\r\n/);
  assert.match(head, new RegExp(`\\r\\nContent-Length: ${Buffer.byteLength(body)}\\r\\n`));
  assert.deepEqual(JSON.parse(body), {
    error: { code: "request_timeout", message: "The request did not arrive in full in time." },
  });
});

test("each clientError maps to a catalog code", () => {
  const codeOf = (code: string) => clientErrorFor(Object.assign(new Error(code), { code }));
  assert.deepEqual(
    [
      "ERR_HTTP_REQUEST_TIMEOUT",
      "HPE_HEADER_OVERFLOW",
      "HPE_INVALID_METHOD",
      "HPE_INVALID_CONTENT_LENGTH",
    ].map((code) => [codeOf(code).status, codeOf(code).code]),
    [
      [408, "request_timeout"],
      [431, "headers_too_large"],
      [400, "invalid_request"],
      [400, "invalid_request"],
    ],
  );
  assert.deepEqual(codeOf("HPE_INVALID_METHOD").details, { reason: "HPE_INVALID_METHOD" });
});

test("a reset connection gets no answer and is left alone", () => {
  let written = false;
  const socket = {
    destroyed: false,
    writable: true,
    write: () => {
      written = true;
    },
    destroy: () => {
      written = true;
    },
  } as unknown as Socket;
  answerClientError(Object.assign(new Error("reset"), { code: "ECONNRESET" }), socket);
  assert.equal(written, false);
});
