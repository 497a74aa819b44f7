/**
 * Enqueue inside the application's transaction, against a real broker node over PostgreSQL: commit
 * delivers (and wakes a waiting consumer), rollback never delivers, bad input writes nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HopperClient } from "@hopper/client";
import pg from "pg";
import { HopperError } from "../../errors.js";
import { type RunningServer, startServer } from "../../server.js";
import { sendInTransaction } from "./send-in-transaction.js";

const url = process.env.HOPPER_TEST_PG_URL;

if (!url) {
  test("sendInTransaction", {
    skip: "HOPPER_TEST_PG_URL is not set: no PostgreSQL to test against",
  }, () => {});
} else {
  describe("sendInTransaction", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const schema = `hopper_tx_${process.pid}`;
    let server: RunningServer;
    let client: HopperClient;
    let app: pg.Client;

    before(async () => {
      server = await startServer({
        dataPath: ":memory:",
        postgresUrl: url,
        postgresSchema: schema,
        port: 0,
        logLevel: false,
      });
      client = new HopperClient({ url: server.url });
      await client.putQueue("emails", { maxMessageBytes: 64 });
      app = new pg.Client({ connectionString: url });
      await app.connect();
      await app.query("CREATE TEMP TABLE orders (id int)");
    });

    after(async () => {
      await app?.end();
      await server?.close();
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    });

    test("commit makes the message visible and wakes a consumer already waiting", async () => {
      await app.query("BEGIN");
      await app.query("INSERT INTO orders VALUES (1)");
      const [sent] = await sendInTransaction(
        app,
        "emails",
        [{ body: { orderId: 1 }, headers: { traceparent: "00-a-b-01" } }],
        {
          schema,
        },
      );
      assert.ok(sent);
      assert.deepEqual(await client.receive("emails", { waitMs: 0 }), [], "invisible before commit");
      const waiting = client.receive("emails", { waitMs: 10_000 });
      const startedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await app.query("COMMIT");
      const [received] = await waiting;
      assert.ok(received, "delivered after commit");
      assert.ok(Date.now() - startedAt < 5_000, "woken by the commit, not by the end of the wait");
      assert.equal(received.id, sent.id);
      assert.deepEqual(received.body, { orderId: 1 });
      assert.equal(received.headers.traceparent, "00-a-b-01");
      await client.ack("emails", [received.receipt]);
    });

    test("rollback never delivers and counts nothing", async () => {
      const before = (await client.getQueue("emails")).stats.published;
      await app.query("BEGIN");
      await sendInTransaction(
        app,
        "emails",
        [{ body: "never" }, { bodyBase64: "aGk=", contentType: "text/plain" }],
        {
          schema,
        },
      );
      await app.query("ROLLBACK");
      assert.deepEqual(await client.receive("emails", { waitMs: 300 }), []);
      const { stats } = await client.getQueue("emails");
      assert.equal(stats.published, before);
      assert.equal(stats.available + stats.delayed + stats.inFlight, 0);
    });

    test("an invalid message throws and writes nothing; the application's transaction goes on", async () => {
      await app.query("BEGIN");
      await app.query("INSERT INTO orders VALUES (2)");
      await assert.rejects(
        sendInTransaction(app, "emails", [{ body: "fine" }, { body: "x".repeat(100) }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "message_too_large",
      );
      await assert.rejects(
        sendInTransaction(app, "missing", [{ body: 1 }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "queue_not_found",
      );
      await app.query("COMMIT");
      const { rows } = await app.query("SELECT count(*)::int AS n FROM orders WHERE id = 2");
      assert.equal(rows[0].n, 1, "the application's own write committed");
      const { stats } = await client.getQueue("emails");
      assert.equal(stats.available, 0, "the valid neighbour of the invalid message was not stored");
    });

    test("in a FIFO queue messages join their groups in order; only heads are delivered", async () => {
      await client.putQueue("orders", { kind: "fifo" });
      await client.send("orders", [{ body: "a0", key: "a" }]);
      await app.query("BEGIN");
      await sendInTransaction(
        app,
        "orders",
        [
          { body: "a1", key: "a" },
          { body: "b1", key: "b" },
          { body: "b2", key: "b" },
        ],
        { schema },
      );
      await app.query("COMMIT");
      const delivered: string[][] = [];
      for (let round = 0; round < 4; round++) {
        const received = await client.receive("orders", { max: 10, waitMs: 0 });
        delivered.push(received.map((message) => message.body as string).sort());
        if (received.length > 0) {
          await client.ack(
            "orders",
            received.map((message) => message.receipt),
          );
        }
      }
      assert.deepEqual(delivered, [["a0", "b1"], ["a1", "b2"], [], []]);
      await assert.rejects(
        sendInTransaction(app, "orders", [{ body: "x", key: "a", priority: 3 }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
        "a FIFO queue has no priorities",
      );
    });

    test("a dedupId stored within the window answers the first id, marked duplicate", async () => {
      await client.putQueue("charges", { dedupWindowMs: 60_000 });
      await app.query("BEGIN");
      const [first, repeat] = await sendInTransaction(
        app,
        "charges",
        [
          { body: 1, dedupId: "charge-1" },
          { body: 1, dedupId: "charge-1" },
        ],
        { schema },
      );
      await app.query("COMMIT");
      assert.ok(first && repeat);
      assert.deepEqual(repeat, { id: first.id, duplicate: true });
      assert.equal(first.duplicate, false);
      await app.query("BEGIN");
      const [later] = await sendInTransaction(app, "charges", [{ body: 1, dedupId: "charge-1" }], { schema });
      await app.query("COMMIT");
      assert.deepEqual(later, { id: first.id, duplicate: true });
      const viaBroker = await client.send("charges", [{ body: 1, dedupId: "charge-1" }]);
      assert.deepEqual(viaBroker[0], { id: first.id, duplicate: true }, "the broker sees the same entry");
      const { stats } = await client.getQueue("charges");
      assert.equal(stats.published, 1);
    });

    test("a full queue refuses with queue_full and leaves the application's transaction as it was", async () => {
      await client.putQueue("bounded", { maxDepth: 1, overflow: "reject", dedupWindowMs: 60_000 });
      await client.send("bounded", [{ body: "first" }]);
      await app.query("BEGIN");
      await app.query("INSERT INTO orders VALUES (3)");
      await assert.rejects(
        sendInTransaction(app, "bounded", [{ body: "second", dedupId: "d-2" }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "queue_full",
      );
      await app.query("COMMIT");
      const { rows } = await app.query("SELECT count(*)::int AS n FROM orders WHERE id = 3");
      assert.equal(rows[0].n, 1, "the application's own write committed");
      const [held] = await client.receive("bounded", { waitMs: 0 });
      assert.ok(held);
      await client.ack("bounded", [held.receipt]);
      await app.query("BEGIN");
      const [second] = await sendInTransaction(app, "bounded", [{ body: "second", dedupId: "d-2" }], {
        schema,
      });
      await app.query("COMMIT");
      assert.equal(second?.duplicate, false, "the refused send claimed no dedupId");
      await assert.rejects(
        sendInTransaction(app, "bounded", [{ body: "outside" }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
        "outside a transaction there is no savepoint to undo a refusal",
      );
    });

    test("a queue over its pushback limits refuses the send with backpressure, as through the broker", async () => {
      await client.putQueue("pushed", { pushbackDepth: 2, pushbackAgeMs: 3_600_000 });
      await app.query("BEGIN");
      await sendInTransaction(app, "pushed", [{ body: 1 }, { body: 2 }], { schema });
      await app.query("COMMIT");
      await app.query("BEGIN");
      await assert.rejects(
        sendInTransaction(app, "pushed", [{ body: 3 }], { schema }),
        (error: unknown) =>
          error instanceof HopperError && error.code === "backpressure" && error.details?.depth === 2,
      );
      await app.query("ROLLBACK");
      const later = { now: () => Date.now() + 3_600_000, setTimer: () => () => {} };
      await client.putQueue("pushed", { pushbackDepth: null });
      await app.query("BEGIN");
      await assert.rejects(
        sendInTransaction(app, "pushed", [{ body: 3 }], { schema, clock: later }),
        (error: unknown) => error instanceof HopperError && error.code === "backpressure",
        "an hour later the oldest message is too old",
      );
      await app.query("ROLLBACK");
    });

    test("drop-oldest makes room; a dead-letter exchange is refused, since only the broker routes", async () => {
      await client.putQueue("newest", { maxDepth: 2, overflow: "drop-oldest" });
      await app.query("BEGIN");
      await sendInTransaction(app, "newest", [{ body: 1 }, { body: 2 }, { body: 3 }], { schema });
      await app.query("COMMIT");
      const kept = await client.peek("newest", { limit: 10 });
      assert.deepEqual(
        kept.map((message) => message.body),
        [2, 3],
      );
      await client.putExchange("dead", { type: "fanout" });
      await client.putQueue("routed", {
        maxDepth: 1,
        overflow: "dead-letter-oldest",
        deadLetter: { exchange: "dead", routingKey: "routed", maxDeliveries: 5 },
      });
      await assert.rejects(
        sendInTransaction(app, "routed", [{ body: 1 }], { schema }),
        (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
      );
    });
  });
}
