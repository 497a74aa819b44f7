/**
 * `POST /v1/queues/{queue}/nack` with `deadLetter: true` through the real server process, on every
 * store: to a dead-letter queue and through a dead-letter exchange, with its reason, counted in the
 * stats and /metrics; refused per item, the lease kept, in a queue with no target; a FIFO group
 * handed on to a long poll waiting for it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { e2eStores, type OpenedStore } from "../testing/e2e-stores.js";
import {
  call,
  hourMs,
  itemErrorCode,
  putQueue,
  queuePath,
  receive,
  results,
  send,
  stats,
} from "../testing/http-calls.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

interface PeekedMessage {
  id: string;
  body: unknown;
  headers: Record<string, string>;
}

for (const store of e2eStores)
  describe(`dead-lettering nack over HTTP (${store.name})`, { skip: store.skip }, () => {
    // Over 80 lines: one describe block of short tests sharing a server process.
    let opened: OpenedStore | undefined;
    let server: ServerProcess;

    const nack = async (queue: string, body: object) => {
      const answer = await call(server, "POST", queuePath(queue, "/nack"), body);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return results(answer).map((item) =>
        (item as { ok?: true }).ok === true ? "ok" : itemErrorCode(item),
      );
    };
    const peek = async (queue: string) => {
      const answer = await call(server, "GET", queuePath(queue, "/messages?state=available&limit=100"));
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return (answer.body as { messages: PeekedMessage[] }).messages;
    };

    before(async () => {
      opened = await store.open("dead_letter_nack");
      server = await startServerProcess(opened.options);
    });

    after(async () => {
      await server?.stop();
      await opened?.close();
    });

    test("moves the messages to the dead-letter queue at once, with the reason, counted", async () => {
      await putQueue(server, "push.dlq");
      await putQueue(server, "push", { deadLetter: { queue: "push.dlq", maxDeliveries: 10 } });
      await send(server, "push", [{ body: { token: "t1" } }, { body: { token: "t2" } }]);
      const [first, second] = await receive(server, "push", 2);
      assert.deepEqual(await nack("push", { receipts: [first], deadLetter: true }), ["ok"]);
      assert.deepEqual(
        await nack("push", { receipts: [second], deadLetter: true, reason: "token_revoked" }),
        ["ok"],
      );
      const dead = await peek("push.dlq");
      assert.deepEqual(
        dead.map((m) => [m.body, m.headers["x-dead-letter-reason"], m.headers["x-original-queue"]]),
        [
          [{ token: "t1" }, "rejected", "push"],
          [{ token: "t2" }, "token_revoked", "push"],
        ],
      );
      assert.equal(dead[0]?.headers["x-delivery-count"], "1");
      const pushStats = await stats(server, "push");
      assert.deepEqual(
        [pushStats.deadLettered, pushStats.inFlight, pushStats.available, pushStats.delayed],
        [2, 0, 0, 0],
      );
      const metrics = await fetch(`${server.url}/metrics`).then((response) => response.text());
      assert.match(metrics, /^hopper_queue_messages_total\{queue="push",event="deadLettered"\} 2$/m);
    });

    test("goes through a dead-letter exchange to every queue its routing key reaches", async () => {
      assert.equal((await call(server, "PUT", "/v1/exchanges/dlx", { type: "topic" })).status, 201);
      for (const queue of ["dead.audit", "dead.retry"]) {
        await putQueue(server, queue);
        const bound = await call(server, "PUT", "/v1/exchanges/dlx/bindings", { queue, pattern: "dead.#" });
        assert.equal(bound.status, 201, JSON.stringify(bound.body));
      }
      await putQueue(server, "work", {
        deadLetter: { exchange: "dlx", routingKey: "dead.work", maxDeliveries: 10 },
      });
      const [id] = await send(server, "work", [{ body: "job" }]);
      const [receipt] = await receive(server, "work", 1);
      assert.deepEqual(await nack("work", { receipts: [receipt], deadLetter: true }), ["ok"]);
      for (const queue of ["dead.audit", "dead.retry"]) {
        const [copy] = await peek(queue);
        assert.deepEqual([copy?.id, copy?.headers["x-dead-letter-reason"]], [id, "rejected"], queue);
      }
      assert.equal((await stats(server, "work")).deadLettered, 1);
    });

    test("with no dead-letter target each lease answers no_dead_letter_target and stays leased", async () => {
      await putQueue(server, "plain");
      await send(server, "plain", [{ body: 1 }, { body: 2 }]);
      const [a, b] = await receive(server, "plain", 2);
      const gone = "1.1";
      assert.deepEqual(await nack("plain", { receipts: [a, gone, b], deadLetter: true }), [
        "no_dead_letter_target",
        "stale_receipt",
        "no_dead_letter_target",
      ]);
      const plainStats = await stats(server, "plain");
      assert.deepEqual(
        [plainStats.inFlight, plainStats.nacked, plainStats.deadLettered, plainStats.delivered],
        [2, 0, 0, 2],
      );
      const acked = await call(server, "POST", queuePath("plain", "/ack"), { receipts: [a, b] });
      assert.deepEqual(results(acked), [{ ok: true }, { ok: true }]);
    });

    test("a dead-lettered FIFO head hands its group to a long poll waiting for it", async () => {
      await putQueue(server, "orders.dlq");
      await putQueue(server, "orders", {
        kind: "fifo",
        deadLetter: { queue: "orders.dlq", maxDeliveries: 10 },
      });
      await send(server, "orders", [
        { body: "o1", key: "customer-7" },
        { body: "o2", key: "customer-7" },
      ]);
      const [head] = await receive(server, "orders", 10);
      // The group's head is in flight, so this long poll waits until the head leaves.
      const waiting = call(server, "POST", queuePath("orders", "/receive"), {
        max: 10,
        waitMs: 20_000,
        visibilityTimeoutMs: hourMs,
      });
      // Its wait is under way once the server counts it as the queue's consumer.
      while ((await stats(server, "orders")).consumers === 0) await delay(10);
      assert.deepEqual(await nack("orders", { receipts: [head], deadLetter: true }), ["ok"]);
      const answer = await waiting;
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      const next = (answer.body as { messages: { body: unknown }[] }).messages.map((m) => m.body);
      assert.deepEqual(next, ["o2"]);
      assert.deepEqual(
        (await peek("orders.dlq")).map((m) => m.body),
        ["o1"],
      );
    });
  });
