/**
 * Exchanges on a fake clock with the SQLite store: fan-out to every bound queue in one transaction,
 * all or none; mandatory and alternate for unroutable messages; exchange-to-exchange bindings;
 * dead-letter exchanges.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FakeClock } from "../clock.js";
import { HopperError } from "../errors.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { ExchangeBroker } from "./exchanges.js";
import { type OutgoingMessage, QueueBroker } from "./queues.js";

const silent = { info() {}, warn() {}, error() {} };

function json(value: unknown): OutgoingMessage {
  return { body: Buffer.from(JSON.stringify(value)), contentType: "application/json" };
}

describe("exchange broker", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: SqliteStore;
  let queues: QueueBroker;
  let exchanges: ExchangeBroker;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new SqliteStore({ path: ":memory:", random: seededRandom(9) });
    queues = new QueueBroker(store, clock, seededRandom(9), silent);
    await queues.start();
    exchanges = new ExchangeBroker(store, clock, queues.router, queues);
  });

  afterEach(async () => {
    queues.stop();
    await store.close();
  });

  const depth = async (queue: string) => (await queues.stats(queue)).available;

  test("one publish to chat.events lands in realtime, push and integrations with one id", async () => {
    await exchanges.putExchange("chat.events", { type: "topic" });
    for (const queue of ["realtime", "push", "integrations"]) {
      await queues.putQueue(queue, {});
      await exchanges.bind("chat.events", { kind: "queue", name: queue }, "message.committed");
    }
    await queues.putQueue("audit", {});
    await exchanges.bind("chat.events", { kind: "queue", name: "audit" }, "message.deleted");
    const [result] = await exchanges.publish(
      "chat.events",
      [{ routingKey: "message.committed", message: json({ text: "hi" }) }],
      false,
    );
    assert.ok(result && "id" in result && result.id);
    assert.equal(result.routed, 3);
    for (const queue of ["realtime", "push", "integrations"]) {
      const [message] = await queues.receive(queue, {});
      assert.equal(message?.id, result.id, `${queue} got the copy`);
    }
    assert.equal(await depth("audit"), 0);
  });

  test("all or none: when one destination refuses, no destination holds the message", async () => {
    await exchanges.putExchange("fan", { type: "fanout" });
    await queues.putQueue("roomy", {});
    await queues.putQueue("tiny", { maxMessageBytes: 8 });
    await exchanges.bind("fan", { kind: "queue", name: "roomy" }, "");
    await exchanges.bind("fan", { kind: "queue", name: "tiny" }, "");
    const results = await exchanges.publish(
      "fan",
      [
        { routingKey: "", message: json("this body is too long for tiny") },
        { routingKey: "", message: json(1) },
      ],
      false,
    );
    assert.ok(results[0] && "error" in results[0] && results[0].error.code === "message_too_large");
    assert.ok(results[1] && "id" in results[1] && results[1].routed === 2, "the next item is unaffected");
    assert.deepEqual([await depth("roomy"), await depth("tiny")], [1, 1]);
    assert.equal((await queues.stats("roomy")).published, 1);
  });

  test("a mandatory publish with no route fails; otherwise it is counted and not stored", async () => {
    await exchanges.putExchange("direct", { type: "direct" });
    await queues.putQueue("orders", {});
    await exchanges.bind("direct", { kind: "queue", name: "orders" }, "orders");
    const [mandatory] = await exchanges.publish(
      "direct",
      [{ routingKey: "refunds", message: json(1) }],
      true,
    );
    assert.ok(mandatory && "error" in mandatory && mandatory.error.code === "unroutable");
    const [optional] = await exchanges.publish(
      "direct",
      [{ routingKey: "refunds", message: json(1) }],
      false,
    );
    assert.deepEqual(optional, { id: null, routed: 0, duplicate: false });
    assert.equal(exchanges.unroutable.get("direct"), 1);
    assert.equal(await depth("orders"), 0);
  });

  test("the alternate exchange catches what matches no binding", async () => {
    await exchanges.putExchange("unrouted", { type: "fanout" });
    await queues.putQueue("lost-and-found", {});
    await exchanges.bind("unrouted", { kind: "queue", name: "lost-and-found" }, "");
    await exchanges.putExchange("main", { type: "direct", alternate: "unrouted" });
    await exchanges.putExchange("main", { type: "direct" });
    assert.equal(
      (await exchanges.getExchange("main")).alternate,
      "unrouted",
      "an update without it keeps it",
    );
    await queues.putQueue("known", {});
    await exchanges.bind("main", { kind: "queue", name: "known" }, "known");
    await exchanges.publish(
      "main",
      [
        { routingKey: "known", message: json(1) },
        { routingKey: "unknown", message: json(2) },
      ],
      true,
    );
    assert.deepEqual([await depth("known"), await depth("lost-and-found")], [1, 1]);
  });

  test("exchange-to-exchange bindings route on, each queue gets one copy, and cycles end", async () => {
    await exchanges.putExchange("a", { type: "topic" });
    await exchanges.putExchange("b", { type: "fanout" });
    await queues.putQueue("q", {});
    await exchanges.bind("a", { kind: "exchange", name: "b" }, "x.#");
    await exchanges.bind("a", { kind: "queue", name: "q" }, "x.*");
    await exchanges.bind("b", { kind: "queue", name: "q" }, "");
    await exchanges.bind("b", { kind: "exchange", name: "a" }, "");
    const [result] = await exchanges.publish("a", [{ routingKey: "x.y", message: json(1) }], true);
    assert.ok(result && "routed" in result);
    assert.equal(result.routed, 1);
    assert.equal(await depth("q"), 1);
  });

  test("publishing to a missing exchange answers exchange_not_found; deleting a queue drops its bindings", async () => {
    await assert.rejects(
      exchanges.publish("nope", [{ routingKey: "", message: json(1) }], false),
      (error: unknown) => error instanceof HopperError && error.code === "exchange_not_found",
    );
    await exchanges.putExchange("fan", { type: "fanout" });
    await queues.putQueue("q1", {});
    await queues.putQueue("q2", {});
    await exchanges.bind("fan", { kind: "queue", name: "q1" }, "");
    await exchanges.bind("fan", { kind: "queue", name: "q2" }, "");
    await exchanges.publish("fan", [{ routingKey: "", message: json(0) }], true);
    await queues.deleteQueue("q2");
    const [result] = await exchanges.publish("fan", [{ routingKey: "", message: json(1) }], true);
    assert.ok(result && "routed" in result && result.routed === 1);
    assert.deepEqual((await exchanges.getExchange("fan")).bindings, [
      { destination: { kind: "queue", name: "q1" }, pattern: "" },
    ]);
  });

  test("a dead-letter exchange routes a poison message by its routing key", async () => {
    await exchanges.putExchange("dlx", { type: "topic" });
    await queues.putQueue("poison.orders", {});
    await queues.putQueue("poison.all", {});
    await exchanges.bind("dlx", { kind: "queue", name: "poison.orders" }, "orders");
    await exchanges.bind("dlx", { kind: "queue", name: "poison.all" }, "#");
    await queues.putQueue("orders", { deadLetter: { exchange: "dlx", maxDeliveries: 1 } });
    await queues.send("orders", [json("bad")]);
    const [leased] = await queues.receive("orders", {});
    assert.ok(leased);
    await queues.nack("orders", [leased.receipt], { delayMs: 0 });
    const [inOrders] = await queues.peek("poison.orders", "available", 10);
    const [inAll] = await queues.peek("poison.all", "available", 10);
    assert.equal(inOrders?.id, leased.id);
    assert.equal(inAll?.id, leased.id);
    assert.equal(inOrders?.headers["x-original-queue"], "orders");
    // A dead-letter exchange that routes back to the source never returns the message there.
    await exchanges.bind("dlx", { kind: "queue", name: "orders" }, "#");
    await queues.send("orders", [json("bad again")]);
    const [again] = await queues.receive("orders", {});
    assert.ok(again);
    await queues.nack("orders", [again.receipt], { delayMs: 0 });
    assert.equal(await depth("orders"), 0, "not put back into its own queue");
    assert.equal(await depth("poison.all"), 2);
    await assert.rejects(
      exchanges.deleteExchange("dlx"),
      (error: unknown) => error instanceof HopperError && error.code === "exchange_in_use",
    );
  });
});
