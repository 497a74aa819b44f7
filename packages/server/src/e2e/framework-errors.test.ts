/**
 * Requests that Fastify or Node's HTTP parser would answer on their own, through the real server: each
 * gets its exact status and the catalog's body `{error: {code, message, details?}}`, never Fastify's
 * `{statusCode, error, message}`. Requests no fetch would send (an unknown method, a bad
 * Content-Length, a request line that is not HTTP) are written to a raw socket.
 */
import assert from "node:assert/strict";
import { createConnection } from "node:net";
import { after, before, describe, test } from "node:test";
import { announceBody, call, mebibyte, queuePath, requestTimeoutMs } from "../testing/http-calls.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

interface RawAnswer {
  status: number;
  body: unknown;
}

/** Writes `request` as is to a new connection and reads the one answer until the server closes it
 * (a request that reaches the router asks for that with `Connection: close`). */
async function rawCall(server: ServerProcess, request: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(server.url);
  const socket = createConnection({ host: hostname, port: Number(port) });
  socket.setTimeout(requestTimeoutMs, () => socket.destroy(new Error("no answer")));
  let text = "";
  socket.setEncoding("utf8").on("data", (chunk: string) => {
    text += chunk;
  });
  await new Promise<void>((resolve, reject) => {
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // The server destroys the socket after its answer; a reset then is no failure.
      if (error.code === "ECONNRESET" && text !== "") resolve();
      else reject(error);
    });
    socket.on("close", () => resolve());
    socket.write(request);
  });
  const split = text.indexOf("\r\n\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1]);
  const body = text.slice(split + 4);
  return { status, body: body === "" ? undefined : JSON.parse(body) };
}

/** Checks the catalog's shape, and that nothing of Fastify's own error body is in it. */
function assertCatalogError(answer: RawAnswer, status: number, code: string, label: string): void {
  const text = JSON.stringify(answer.body);
  assert.equal(answer.status, status, `${label}: status of ${text}`);
  const body = answer.body as Record<string, unknown>;
  assert.deepEqual(Object.keys(body ?? {}), ["error"], `${label}: Fastify's shape? ${text}`);
  const error = body.error as Record<string, unknown>;
  assert.equal(typeof error, "object", `${label}: ${text}`);
  assert.equal(error.code, code, `${label}: ${text}`);
  assert.equal(typeof error.message, "string", `${label}: ${text}`);
  assert.equal(error.statusCode, undefined, `${label}: ${text}`);
}

describe("answers Fastify would give on its own, through the real server", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let dir: TempDir;
  let server: ServerProcess;

  before(async () => {
    dir = createTempDir();
    server = await startServerProcess({ dataFile: dir.file("hopper.db") });
    assert.equal((await call(server, "PUT", queuePath("q"), {})).status, 201);
  });

  after(async () => {
    await server?.stop();
    dir?.remove();
  });

  test("every bad request gets its status and code in the catalog's body", async () => {
    const send = queuePath("q", "/messages");
    const host = new URL(server.url).host;
    const cases: [label: string, answer: () => Promise<RawAnswer>, status: number, code: string][] = [
      [
        "text/plain body",
        () => call(server, "POST", send, undefined, { raw: "hi", headers: { "content-type": "text/plain" } }),
        415,
        "unsupported_media_type",
      ],
      [
        "body without a content type",
        () =>
          rawCall(
            server,
            `POST ${send} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}`,
          ),
        415,
        "unsupported_media_type",
      ],
      ["body over 10 MiB", () => announceBody(server, send, 10 * mebibyte + 1), 413, "request_too_large"],
      [
        "truncated JSON",
        () => call(server, "POST", send, undefined, { raw: '{"messages": [' }),
        400,
        "invalid_json",
      ],
      ["unknown route", () => call(server, "GET", "/v2/nothing"), 404, "not_found"],
      ["a method no route has", () => call(server, "PATCH", queuePath("q")), 404, "not_found"],
      ["an unregistered method", () => call(server, "PROPFIND", queuePath("q")), 404, "not_found"],
      ["bad percent-encoding", () => call(server, "GET", "/v1/queues/%zz"), 400, "invalid_name"],
      [
        "a name too long for the router",
        () => call(server, "GET", queuePath("a".repeat(500))),
        400,
        "invalid_name",
      ],
      [
        "a method HTTP does not know",
        () => rawCall(server, `FOO ${queuePath("q")} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
        400,
        "invalid_request",
      ],
      [
        "a Content-Length that is not a number",
        () =>
          rawCall(
            server,
            `POST ${send} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}`,
          ),
        400,
        "invalid_request",
      ],
      ["a request line that is not HTTP", () => rawCall(server, "HELLO\r\n\r\n"), 400, "invalid_request"],
      [
        "headers over Node's 16 KiB",
        () =>
          rawCall(
            server,
            `GET /v1/queues HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
          ),
        431,
        "headers_too_large",
      ],
    ];
    for (const [label, answer, status, code] of cases) {
      assertCatalogError(await answer(), status, code, label);
    }
  });

  test("the 415 says to send content-type: application/json, and names what was sent", async () => {
    const answer = await call(server, "POST", queuePath("q", "/messages"), undefined, {
      raw: "a=1",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    const error = (answer.body as { error: { message: string; details: unknown } }).error;
    assert.match(error.message, /Content-Type: application\/json/);
    assert.deepEqual(error.details, { contentType: "application/x-www-form-urlencoded" });
  });

  test("the 413 carries details.bytes and details.bytesMax", async () => {
    const answer = await announceBody(server, queuePath("q", "/messages"), 10 * mebibyte + 1);
    const error = (answer.body as { error: { details: unknown } }).error;
    assert.deepEqual(error.details, { bytes: 10 * mebibyte + 1, bytesMax: 10 * mebibyte });
  });

  test("the server still serves after the connections it cut", async () => {
    assert.equal((await call(server, "GET", queuePath("q"))).status, 200);
  });
});
