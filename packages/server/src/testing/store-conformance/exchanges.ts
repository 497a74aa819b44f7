/**
 * The Store contract for exchanges and bindings, and for sends and dead letters copied to many queues.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { noSendPolicy } from "../../model/policies.js";
import { attributes, message, rejectsWith, t0 } from "../conformance-fixtures.js";
import type { QueueSuite } from "./harness.js";

/** Exchanges, bindings, and copies to every queue of a route. */
export function exchangeTests(suite: QueueSuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, send, lease } = suite;
  describe("exchanges and copies", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("an exchange is created once; its type cannot change; its alternate can", async () => {
      const first = await store.exchangeUpsert({ name: "events", type: "topic", alternate: null, now: t0 });
      assert.equal(first.created, true);
      assert.deepEqual(
        {
          type: first.exchange.type,
          alternate: first.exchange.alternate,
          bindings: first.exchange.bindings,
        },
        { type: "topic", alternate: null, bindings: [] },
      );
      const again = await store.exchangeUpsert({
        name: "events",
        type: "topic",
        alternate: "other",
        now: t0,
      });
      assert.deepEqual(
        [again.created, again.exchange.alternate, again.exchange.createdAt],
        [false, "other", t0],
      );
      await rejectsWith(
        store.exchangeUpsert({ name: "events", type: "fanout", alternate: null, now: t0 }),
        "exchange_type_mismatch",
      );
      assert.deepEqual(
        (await store.exchangeList()).map((exchange) => exchange.name),
        ["events"],
      );
    });

    test("bindings are idempotent, need both ends, and go with a deleted queue or exchange", async () => {
      await store.exchangeUpsert({ name: "events", type: "topic", alternate: null, now: t0 });
      await store.exchangeUpsert({ name: "audit", type: "fanout", alternate: null, now: t0 });
      const toQueue = {
        exchange: "events",
        destination: { kind: "queue" as const, name: "q" },
        pattern: "a.*",
      };
      assert.deepEqual(await store.bindingUpsert(toQueue), { created: true });
      assert.deepEqual(await store.bindingUpsert(toQueue), { created: false });
      await store.bindingUpsert({
        exchange: "events",
        destination: { kind: "exchange", name: "audit" },
        pattern: "#",
      });
      await rejectsWith(
        store.bindingUpsert({
          exchange: "events",
          destination: { kind: "queue", name: "nope" },
          pattern: "x",
        }),
        "queue_not_found",
      );
      await rejectsWith(
        store.bindingUpsert({ exchange: "nope", destination: { kind: "queue", name: "q" }, pattern: "x" }),
        "exchange_not_found",
      );
      assert.deepEqual((await store.exchangeGet({ name: "events" }))?.bindings, [
        { destination: { kind: "exchange", name: "audit" }, pattern: "#" },
        { destination: { kind: "queue", name: "q" }, pattern: "a.*" },
      ]);
      await store.queueDelete({ name: "q" });
      await store.exchangeDelete({ name: "audit" });
      assert.deepEqual((await store.exchangeGet({ name: "events" }))?.bindings, []);
      assert.deepEqual(await store.bindingDelete(toQueue), { deleted: false });
    });

    test("an exchange that a queue dead-letters through cannot be deleted", async () => {
      await store.exchangeUpsert({ name: "dlx", type: "fanout", alternate: null, now: t0 });
      const withDlx = { ...attributes, deadLetter: { exchange: "dlx", routingKey: "q", maxDeliveries: 2 } };
      await store.queueUpsert({ name: "src", kind: "standard", attributes: withDlx, now: t0 });
      await rejectsWith(store.exchangeDelete({ name: "dlx" }), "exchange_in_use");
      const missing = {
        ...attributes,
        deadLetter: { exchange: "absent", routingKey: "q", maxDeliveries: 2 },
      };
      await rejectsWith(
        store.queueUpsert({ name: "src2", kind: "standard", attributes: missing, now: t0 }),
        "dead_letter_exchange_not_found",
      );
    });

    test("a send to many queues is all or none", async () => {
      await store.queueUpsert({ name: "r", kind: "standard", attributes, now: t0 });
      const shared = message();
      await store.queueSendMany({
        sends: [
          { queue: "q", messages: [shared], policy: noSendPolicy },
          { queue: "r", messages: [shared], policy: noSendPolicy },
        ],
        now: t0,
      });
      const [inQ] = await store.queuePeek({ queue: "q", state: "available", limit: 10, now: t0 });
      const [inR] = await store.queuePeek({ queue: "r", state: "available", limit: 10, now: t0 });
      assert.equal(inQ?.id, shared.id);
      assert.equal(inR?.id, shared.id);
      await rejectsWith(
        store.queueSendMany({
          sends: [
            { queue: "q", messages: [message()], policy: noSendPolicy },
            { queue: "gone", messages: [message()], policy: noSendPolicy },
          ],
          now: t0,
        }),
        "queue_not_found",
      );
      assert.equal(
        (await store.queueDepth({ name: "q", now: t0 })).available,
        1,
        "the first send was undone",
      );
      assert.equal((await store.queueGet({ name: "q" }))?.counters.published, 1);
    });

    test("dead letters go to every queue of the route; none left means dropped, still counted", async () => {
      await store.queueUpsert({ name: "d1", kind: "standard", attributes, now: t0 });
      await store.queueUpsert({ name: "d2", kind: "standard", attributes, now: t0 });
      await send({ queue: "q", messages: [message(), message()] });
      const [a, b] = (await lease("q", t0, 2)).messages;
      assert.ok(a && b);
      const nack = (receipt: string, queues: string[]) =>
        store.queueNack({
          queue: "q",
          receipts: [receipt],
          now: t0 + 1,
          retryDelayMs: () => 0,
          deadLetter: { queues, maxDeliveries: 1 },
        });
      await nack(a.receipt, ["d1", "d2", "deleted-meanwhile"]);
      await nack(b.receipt, []);
      assert.equal((await store.queueDepth({ name: "d1", now: t0 + 1 })).available, 1);
      assert.equal((await store.queueDepth({ name: "d2", now: t0 + 1 })).available, 1);
      const source = await store.queueGet({ name: "q" });
      assert.equal(source?.counters.deadLettered, 2);
      assert.equal((await store.queueDepth({ name: "q", now: t0 + 1 })).available, 0);
    });
  });
}
