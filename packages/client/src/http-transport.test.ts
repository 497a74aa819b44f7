/**
 * The client's HTTP transports against a bare `node:http` server that records what it is sent: the
 * `node:http` transport reuses one connection, sends bodies of any characters whole, reads answers
 * and Retry-After, aborts, closes idle connections and every connection on `close()`; and a client
 * built without `fetch` in Node sends through it, not through the global `fetch`.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { fetchTransport, type HttpTransport, nodeHttpTransport } from "./http-transport.js";

interface Recorded {
  method: string;
  url: string;
  body: string;
  contentType: string | undefined;
}

describe("HTTP transports", { timeout: 20_000 }, () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let server: Server;
  let url: string;
  const requests: Recorded[] = [];
  const connections: Socket[] = [];
  /** Answers held open by the `/hold` route until the test lets them go. */
  const held: ServerResponse[] = [];

  before(async () => {
    server = createServer((request: IncomingMessage, response: ServerResponse) => {
      let body = "";
      request.setEncoding("utf8");
      request.on("data", (chunk: string) => {
        body += chunk;
      });
      request.on("end", () => {
        requests.push({
          method: request.method ?? "",
          url: request.url ?? "",
          body,
          contentType: request.headers["content-type"],
        });
        if (request.url === "/hold") {
          held.push(response);
          return;
        }
        if (request.url?.endsWith("/busy")) {
          response.writeHead(503, { "content-type": "application/json", "retry-after": "7" });
          response.end(JSON.stringify({ error: { code: "overloaded", message: "try later" } }));
          return;
        }
        // Echoes the body it read, so a body cut short by a wrong content-length shows.
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ echo: body, queue: { name: "q" } }));
      });
    });
    // The server keeps idle connections for a minute, so any that closes sooner was closed by the client.
    server.keepAliveTimeout = 60_000;
    server.on("connection", (socket: Socket) => connections.push(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address && typeof address === "object");
    url = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    for (const response of held) response.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const post = (
    transport: HttpTransport,
    body: string,
    path = "/echo",
    signal = new AbortController().signal,
  ) =>
    transport.request({
      method: "POST",
      url: url + path,
      headers: { "content-type": "application/json" },
      body,
      signal,
    });

  const closed = (socket: Socket) =>
    socket.destroyed
      ? Promise.resolve()
      : new Promise<void>((resolve) => socket.once("close", () => resolve()));

  test("node:http: requests one after another share one connection", async () => {
    const transport = nodeHttpTransport();
    const before = connections.length;
    for (let i = 0; i < 20; i++) {
      const answer = await post(transport, JSON.stringify({ i }));
      assert.equal(answer.status, 200);
      assert.deepEqual(JSON.parse(answer.text).echo, JSON.stringify({ i }));
    }
    assert.equal(connections.length - before, 1);
    transport.close();
  });

  test("node:http: a body of multi-byte characters arrives whole, and so does the answer", async () => {
    const transport = nodeHttpTransport();
    const body = JSON.stringify({ text: "日本語 ✓ émoji 🐇".repeat(500) });
    const answer = await post(transport, body);
    assert.equal(requests.at(-1)?.body, body);
    assert.equal(requests.at(-1)?.contentType, "application/json");
    assert.equal(JSON.parse(answer.text).echo, body);
    transport.close();
  });

  test("node:http: a request without a body is sent as such", async () => {
    const transport = nodeHttpTransport();
    const answer = await transport.request({
      method: "GET",
      url: `${url}/echo`,
      headers: {},
      body: undefined,
      signal: new AbortController().signal,
    });
    assert.equal(answer.status, 200);
    assert.deepEqual(requests.at(-1), { method: "GET", url: "/echo", body: "", contentType: undefined });
    transport.close();
  });

  test("both transports read an error's status, text and Retry-After alike", async () => {
    const viaNode = nodeHttpTransport();
    const answers = [await post(viaNode, "{}", "/busy"), await post(fetchTransport(fetch), "{}", "/busy")];
    for (const answer of answers) {
      assert.equal(answer.status, 503);
      assert.equal(answer.retryAfter, "7");
      assert.equal(JSON.parse(answer.text).error.code, "overloaded");
    }
    viaNode.close();
  });

  test("node:http: an abort rejects the request under way and frees its connection", async () => {
    const transport = nodeHttpTransport();
    const controller = new AbortController();
    const heldBefore = held.length;
    const pending = post(transport, "{}", "/hold", controller.signal);
    while (held.length === heldBefore) await new Promise((resolve) => setImmediate(resolve));
    const socket = connections.at(-1) as Socket;
    controller.abort();
    await assert.rejects(pending, (error: Error) => error.name === "AbortError");
    await closed(socket);
    transport.close();
  });

  test("node:http: an idle connection is closed after idleMs, and the next request opens another", {
    timeout: 5_000,
  }, async () => {
    const transport = nodeHttpTransport({ idleMs: 50 });
    await post(transport, "{}");
    const first = connections.at(-1) as Socket;
    await closed(first);
    const before = connections.length;
    assert.equal((await post(transport, "{}")).status, 200);
    assert.equal(connections.length - before, 1);
    transport.close();
  });

  test("node:http: close() ends the connections kept open", { timeout: 2_000 }, async () => {
    const transport = nodeHttpTransport({ idleMs: 60_000 });
    await post(transport, "{}");
    const socket = connections.at(-1) as Socket;
    assert.equal(socket.destroyed, false);
    transport.close();
    await closed(socket);
  });

  test("a client made without fetch sends through node:http, not the global fetch, and reads its errors", async () => {
    const globalFetch = globalThis.fetch;
    let fetched = 0;
    globalThis.fetch = (input, init) => {
      fetched++;
      return globalFetch(input, init);
    };
    const seen: string[] = [];
    const client = new HopperClient({ url, onRequest: (method, path) => seen.push(`${method} ${path}`) });
    try {
      const before = requests.length;
      await client.getQueue("q");
      await client.getQueue("q");
      assert.equal(requests.length - before, 2);
      assert.equal(fetched, 0);
      assert.deepEqual(seen, ["GET /v1/queues/q", "GET /v1/queues/q"], "onRequest saw each request");
      await assert.rejects(client.getQueue("busy"), (error: unknown) => {
        assert.ok(error instanceof HopperError);
        assert.deepEqual([error.code, error.status, error.retryAfterMs], ["overloaded", 503, 7000]);
        return true;
      });
    } finally {
      globalThis.fetch = globalFetch;
      await client.close();
    }
  });
});
