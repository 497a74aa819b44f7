/**
 * `publishOver: "websocket"` against a real `hopper serve`: publish() sends its batches as `send`
 * frames, with the same answers, refusals and per-item errors as over HTTP, and what it confirms is
 * what the server holds.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { startTestServer, type TestServer } from "./testing/server-process.js";

describe("publish over the WebSocket", () => {
  let server: TestServer;
  let client: HopperClient;
  /** HTTP requests that sent messages: none may, when publishing over the socket. */
  let httpSends = 0;

  before(async () => {
    server = await startTestServer();
    const countingFetch: typeof fetch = (input, init) => {
      if (init?.method === "POST" && String(input).endsWith("/messages")) httpSends++;
      return globalThis.fetch(input, init);
    };
    client = new HopperClient({ url: server.url, publishOver: "websocket", fetch: countingFetch });
  });

  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test("250 publishes in one turn are confirmed with their ids, and the server holds exactly them", async () => {
    await client.putQueue("ws-sends", {});
    const sent = await Promise.all(
      Array.from({ length: 250 }, (_, n) => client.publish("ws-sends", { body: { n }, key: `k${n % 3}` })),
    );
    const ids = new Set(sent.map((result) => result.id));
    assert.equal(ids.size, 250);
    assert.ok(sent.every((result) => result.duplicate === false));
    const stats = (await client.getQueue("ws-sends")).stats;
    assert.deepEqual([stats.published, stats.available], [250, 250]);
    const peeked = await client.peek("ws-sends", { limit: 1000 });
    assert.deepEqual(new Set(peeked.map((message) => message.id)), ids);
    assert.equal(httpSends, 0, "every batch went over the WebSocket");
  });

  test("a batch too large for one frame goes over HTTP, and every message of it is stored", async () => {
    await client.putQueue("ws-large", {});
    const before = httpSends;
    const big = "x".repeat(10_000);
    const sent = await Promise.all(
      Array.from({ length: 30 }, (_, n) => client.publish("ws-large", { body: { n, big } })),
    );
    assert.equal(new Set(sent.map((result) => result.id)).size, 30);
    assert.equal(httpSends, before + 1, "one HTTP request carried the 300 KB batch");
    assert.equal((await client.getQueue("ws-large")).stats.published, 30);
  });

  test("the frame limit counts UTF-8 bytes: 70,000 three-byte characters go over HTTP, 100,000 ASCII ones do not", async () => {
    await client.putQueue("ws-utf8", {});
    const before = httpSends;
    await client.publish("ws-utf8", { body: { text: "日".repeat(70_000) } });
    assert.equal(httpSends, before + 1, "210 KB in 70,000 characters is over the 192 KiB frame limit");
    await client.publish("ws-utf8", { body: { text: "a".repeat(100_000) } });
    assert.equal(httpSends, before + 1, "100 KB of ASCII fits in one frame");
    assert.equal((await client.getQueue("ws-utf8")).stats.published, 2);
  });

  test("a duplicate answers the first id; a full queue and a bad item are refused as over HTTP", async () => {
    await client.putQueue("ws-policies", { dedupWindowMs: 60_000, maxDepth: 2 });
    const first = await client.publish("ws-policies", { body: 1, dedupId: "once" });
    const again = await client.publish("ws-policies", { body: 2, dedupId: "once" });
    assert.deepEqual(again, { id: first.id, duplicate: true });
    await client.publish("ws-policies", { body: 3 });
    await assert.rejects(
      client.publish("ws-policies", { body: 4 }),
      (error: unknown) => error instanceof HopperError && error.code === "queue_full",
    );
    await assert.rejects(
      client.publish("missing-queue", { body: 5 }),
      (error: unknown) => error instanceof HopperError && error.code === "queue_not_found",
    );
    assert.equal((await client.getQueue("ws-policies")).stats.published, 2);
  });
});
