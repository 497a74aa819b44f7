/**
 * Exchanges through HTTP and the typed client, on both stores. With PostgreSQL, two broker nodes
 * share one schema: a consumer waiting on one node gets what is published through the other.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HopperClient, HopperError } from "@hopper/client";
import pg from "pg";
import { type RunningServer, startServer } from "../server.js";
import { TestSocket } from "../testing/ws-test-client.js";

const pgUrl = process.env.HOPPER_TEST_PG_URL;

describe("exchanges over HTTP (SQLite)", () => {
  let server: RunningServer;
  let client: HopperClient;

  before(async () => {
    server = await startServer({ dataPath: ":memory:", port: 0, logLevel: false });
    client = new HopperClient({ url: server.url });
  });
  after(() => server?.close());

  test("the chat example: one publish lands in realtime, push and integrations", async () => {
    await client.putExchange("chat.events", { type: "topic" });
    for (const queue of ["realtime", "push", "integrations"]) {
      await client.putQueue(`${queue}.dlq`);
      await client.putQueue(queue, { deadLetter: { queue: `${queue}.dlq`, maxDeliveries: 5 } });
      assert.deepEqual(await client.bind("chat.events", { queue, pattern: "message.committed" }), {
        created: true,
      });
    }
    const [result] = await client.publishTo("chat.events", [
      { routingKey: "message.committed", body: { messageId: "m1" } },
    ]);
    assert.ok(result && "routed" in result && result.routed === 3);
    for (const queue of ["realtime", "push", "integrations"]) {
      const [message] = await client.receive(queue);
      assert.deepEqual(message?.body, { messageId: "m1" });
      assert.equal(message?.id, result.id);
    }
  });

  test("bad input changes nothing: a binding to a missing queue, a type change, an unknown field", async () => {
    await client.putExchange("strict", { type: "direct" });
    const refused = async (call: Promise<unknown>, code: string) =>
      assert.rejects(call, (error: unknown) => error instanceof HopperError && error.code === code);
    await refused(client.bind("strict", { queue: "absent", pattern: "x" }), "queue_not_found");
    await refused(client.putExchange("strict", { type: "fanout" }), "exchange_type_mismatch");
    await refused(
      client.publishTo("strict", [{ routingKey: "x", body: 1, extra: true } as never]),
      "invalid_request",
    );
    const exchange = await client.getExchange("strict");
    assert.deepEqual([exchange.type, exchange.bindings], ["direct", []]);
  });
});

if (!pgUrl) {
  test("exchanges across PostgreSQL nodes", {
    skip: "HOPPER_TEST_PG_URL is not set: no PostgreSQL to test against",
  }, () => {});
} else {
  describe("exchanges across PostgreSQL nodes", () => {
    const schema = `hopper_ex_${process.pid}`;
    let nodeA: RunningServer;
    let nodeB: RunningServer;

    before(async () => {
      const options = {
        dataPath: ":memory:",
        postgresUrl: pgUrl,
        postgresSchema: schema,
        port: 0,
        logLevel: false,
      } as const;
      nodeA = await startServer(options);
      nodeB = await startServer(options);
    });
    after(async () => {
      await nodeA?.close();
      await nodeB?.close();
      const admin = new pg.Client({ connectionString: pgUrl });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    });

    test("a consumer waiting on node B gets what is published through node A", async () => {
      const a = new HopperClient({ url: nodeA.url });
      const b = new HopperClient({ url: nodeB.url });
      // Node B looks first, so it caches a world without the exchange; node A's changes must reach it.
      await assert.rejects(
        b.publishTo("events", [{ routingKey: "", body: 0 }]),
        (error: unknown) => error instanceof HopperError && error.code === "exchange_not_found",
      );
      await a.putExchange("events", { type: "fanout" });
      await a.putQueue("workers");
      await a.bind("events", { queue: "workers", pattern: "" });
      const waiting = b.receive("workers", { waitMs: 10_000 });
      const startedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const [result] = await a.publishTo("events", [{ routingKey: "", body: "cross-node" }]);
      const [message] = await waiting;
      assert.ok(result && "id" in result);
      assert.equal(message?.id, result.id);
      assert.ok(Date.now() - startedAt < 5_000, "woken by the commit, not by the end of the wait");
      // Node B routes with the exchange and binding made on node A: NOTIFY dropped its stale cache.
      const [viaB] = await b.publishTo("events", [{ routingKey: "", body: "via b" }], { mandatory: true });
      assert.ok(viaB && "routed" in viaB && viaB.routed === 1);
    });

    test("a signal published through node A reaches a subscriber of node B, and nothing is stored", async () => {
      // Queue names and what each holds, without the ages that change with time alone.
      const storedState = async () =>
        (await new HopperClient({ url: nodeA.url }).listQueues()).map(({ name, stats }) => ({
          name,
          published: stats.published,
          held: stats.available + stats.delayed + stats.inFlight,
        }));
      const before = await storedState();
      const subscriber = await TestSocket.open(nodeB.url);
      const publisher = await TestSocket.open(nodeA.url);
      try {
        await subscriber.request({ op: "signal.subscribe", channel: "room.42" });
        await publisher.request({ op: "signal.publish", channel: "room.42", data: { typing: "ada" } });
        const signal = await subscriber.waitFor((frame) => frame.op === "signal");
        assert.deepEqual([signal.channel, signal.data], ["room.42", { typing: "ada" }]);
        assert.deepEqual(await storedState(), before);
      } finally {
        subscriber.close();
        publisher.close();
      }
    });
  });
}
