/**
 * The Store contract for nacks and dead letters: retry delays, the last allowed delivery, exhausted
 * candidates and the exhausted sweep, and bodies that keep their bytes on the way.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deadLetterHeaders, noSendPolicy } from "../../model/policies.js";
import { attributes, message, t0 } from "../conformance-fixtures.js";
import type { QueueSuite } from "./harness.js";

/** Nacks, dead-lettering and the headers a dead letter carries. */
export function deadLetterTests(suite: QueueSuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, send, lease } = suite;
  describe("nack and dead letters", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("nack ends the lease and retries after the delay it is given for the delivery count", async () => {
      await send({ queue: "q", messages: [message()] });
      const [leased] = (await lease("q", t0)).messages;
      assert.ok(leased);
      const seen: number[] = [];
      const { results, deadLettered } = await store.queueNack({
        queue: "q",
        receipts: [leased.receipt],
        now: t0 + 5,
        retryDelayMs: (deliveryCount) => {
          seen.push(deliveryCount);
          return 1000;
        },
        deadLetter: null,
      });
      assert.deepEqual(results, [{ ok: true }]);
      assert.equal(deadLettered, 0);
      assert.deepEqual(seen, [1]);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [leased.receipt] }), [
        { error: "stale_receipt" },
      ]);
      const depth = await store.queueDepth({ name: "q", now: t0 + 6 });
      assert.deepEqual([depth.delayed, depth.inFlight, depth.available], [1, 0, 0]);
      assert.equal((await lease("q", t0 + 1004)).messages.length, 0);
      assert.equal((await lease("q", t0 + 1005)).messages[0]?.deliveryCount, 2);
      assert.equal((await store.queueGet({ name: "q" }))?.counters.nacked, 1);
    });

    test("a JSON body, as bytes or as text, keeps its bytes through a lease, a peek, a dead-letter copy and a move", async () => {
      await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
      const text = JSON.stringify({
        text: "naïve café 日本 🐇",
        n: [1, 2.5, null],
        nested: { "\u0000": "\\" },
      });
      const json = { ...message(), body: Buffer.from(text, "utf8"), contentType: "application/json" };
      const binary = { ...message(), body: Buffer.from([0xff, 0x00, 0xc3, 0x28, 0x80]) };
      // A JSON body sent as a JSON value reaches the store as its text (NewMessage.body).
      const jsonText = { ...message(), body: text, contentType: "application/json" };
      await send({ queue: "q", messages: [json, binary, jsonText] });
      const bytesOf = (body: Buffer | string) =>
        typeof body === "string" ? Buffer.from(body, "utf8") : body;
      const sameBytes = (got: Buffer | string | undefined, want: Buffer, where: string) =>
        assert.ok(got !== undefined && bytesOf(got).equals(want), `${where}: ${String(got)}`);
      const peeked = await store.queuePeek({ queue: "q", state: "available", limit: 10, now: t0 });
      sameBytes(peeked[0]?.body, json.body, "peek, JSON");
      sameBytes(peeked[1]?.body, binary.body, "peek, bytes");
      sameBytes(peeked[2]?.body, json.body, "peek, JSON sent as text");
      const leased = (await lease("q", t0, 3)).messages;
      sameBytes(leased[0]?.body, json.body, "lease, JSON");
      sameBytes(leased[1]?.body, binary.body, "lease, bytes");
      sameBytes(leased[2]?.body, json.body, "lease, JSON sent as text");
      await store.queueNack({
        queue: "q",
        receipts: leased.map((m) => m.receipt),
        now: t0 + 1,
        retryDelayMs: () => 0,
        deadLetter: { queues: ["dlq"], maxDeliveries: 1 },
      });
      const dead = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 + 1 });
      sameBytes(dead.find((m) => m.id === json.id)?.body, json.body, "dead-letter copy, JSON");
      sameBytes(dead.find((m) => m.id === binary.id)?.body, binary.body, "dead-letter copy, bytes");
      sameBytes(
        dead.find((m) => m.id === jsonText.id)?.body,
        json.body,
        "dead-letter copy, JSON sent as text",
      );
      const moved = await store.queueMove({
        queue: "dlq",
        to: "q",
        max: 10,
        now: t0 + 2,
        policies: new Map([["q", noSendPolicy]]),
      });
      assert.equal(moved.moved, 3);
      const back = (await lease("q", t0 + 2, 3)).messages;
      sameBytes(back.find((m) => m.id === json.id)?.body, json.body, "moved, JSON");
      sameBytes(back.find((m) => m.id === binary.id)?.body, binary.body, "moved, bytes");
      sameBytes(back.find((m) => m.id === jsonText.id)?.body, json.body, "moved, JSON sent as text");
    });

    test("a nack of the last allowed delivery dead-letters the message with the headers", async () => {
      await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
      const original = message();
      await send({ queue: "q", messages: [original] });
      const [leased] = (await lease("q", t0)).messages;
      assert.ok(leased);
      const nacked = await store.queueNack({
        queue: "q",
        receipts: [leased.receipt],
        now: t0 + 7,
        retryDelayMs: () => 0,
        deadLetter: { queues: ["dlq"], maxDeliveries: 1 },
      });
      assert.deepEqual(nacked, { results: [{ ok: true }], deadLettered: 1 });
      assert.equal((await store.queueDepth({ name: "q", now: t0 + 7 })).available, 0);
      const [dead] = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 + 7 });
      assert.ok(dead);
      assert.equal(dead.id, original.id);
      assert.equal(dead.body.toString(), original.body.toString());
      assert.equal(dead.headers["x-dead-letter-reason"], "max_deliveries");
      assert.equal(dead.headers["x-original-queue"], "q");
      assert.equal(dead.headers["x-delivery-count"], "1");
      assert.equal(dead.headers["x-test"], "yes");
      assert.equal(dead.deliveryCount, 0);
      assert.equal((await store.queueGet({ name: "q" }))?.counters.deadLettered, 1);
      assert.equal((await store.queueGet({ name: "dlq" }))?.counters.published, 1);
    });

    test("lease dead-letters an exhausted candidate instead of delivering it", async () => {
      await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
      await send({ queue: "q", messages: [message(), message()] });
      const policy = { deadLetterQueue: "dlq", maxDeliveries: 1 };
      const first = await lease("q", t0, 1, policy);
      assert.equal(first.messages.length, 1);
      // The lease ends; the next lease meets the exhausted message among its candidates and moves it.
      const second = await lease("q", t0 + 30_000, 2, policy);
      assert.equal(second.deadLettered, 1);
      assert.equal(second.messages.length, 1);
      assert.notEqual(second.messages[0]?.id, first.messages[0]?.id);
      assert.equal((await store.queueDepth({ name: "dlq", now: t0 + 30_000 })).available, 1);
    });

    test("the exhausted sweep moves only leases that ended inside its window", async () => {
      await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
      await send({ queue: "q", messages: [message(), message()] });
      await lease("q", t0, 1); // ends at t0 + 30 000
      await lease("q", t0 + 10, 1); // ends at t0 + 30 010
      const deadLetter = { queues: ["dlq"], maxDeliveries: 1 };
      const sweep = (visibleFrom: number, now: number) =>
        store.queueDeadLetterExhausted({ queue: "q", visibleFrom, now, max: 100, deadLetter });
      assert.deepEqual(await sweep(t0, t0 + 29_999), { deadLettered: 0 });
      assert.deepEqual(await sweep(t0 + 29_999, t0 + 30_005), { deadLettered: 1 });
      assert.deepEqual(await sweep(t0 + 30_011, t0 + 40_000), { deadLettered: 0 }, "outside the window");
      assert.deepEqual(
        await sweep(t0 + 30_010, t0 + 40_000),
        { deadLettered: 1 },
        "the window's start is in it",
      );
    });

    test("dead-letter headers keep the original ones and say why", () => {
      const headers = deadLetterHeaders(
        { ...message(), deliveryCount: 3, firstDeliveredAt: t0 },
        "orders",
        "max_deliveries",
      );
      assert.equal(headers["x-delivery-count"], "3");
      assert.equal(headers["x-original-queue"], "orders");
      assert.equal(headers["x-test"], "yes");
    });
  });
}
