/**
 * The Store contract for the order of leases: FIFO groups (one in flight per group, in order) and
 * priorities.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { message, t0 } from "../conformance-fixtures.js";
import type { PolicySuite } from "./harness.js";

/** FIFO groups: each group's head only, handed on by every way a message leaves. */
export function fifoGroupTests(suite: PolicySuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, create, send, lease, bodies, ack, nack, assertDepthCounted } = suite;
  describe("FIFO groups", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("only each group's oldest message is leased, so groups flow in order, one in flight each", async () => {
      await create("f", "fifo");
      await send("f", [
        message({ key: "a", body: "a1" }),
        message({ key: "b", body: "b1" }),
        message({ key: "a", body: "a2" }),
        message({ body: "n1" }),
        message({ key: "a", body: "a3" }),
        message({ key: "b", body: "b2" }),
        message({ body: "n2" }),
      ]);
      const first = await lease("f", t0);
      assert.deepEqual(
        bodies(first.messages).sort(),
        ["a1", "b1", "n1"],
        "one head per group; keyless is a group",
      );
      assert.equal((await lease("f", t0)).messages.length, 0, "every group has a message in flight");
      const [a1, b1, n1] = ["a1", "b1", "n1"].map((b) => first.messages.find((m) => m.body.toString() === b));
      await ack("f", [a1?.receipt, n1?.receipt]);
      assert.deepEqual(bodies((await lease("f", t0)).messages).sort(), ["a2", "n2"]);
      await nack("f", [b1?.receipt], t0);
      const again = await lease("f", t0);
      assert.deepEqual(
        bodies(again.messages),
        ["b1"],
        "a nacked head is retried before the rest of its group",
      );
      assert.equal(again.messages[0]?.deliveryCount, 2);
      await assertDepthCounted("f");
    });

    test("a head whose lease ends is leased again before the rest of its group", async () => {
      await create("f", "fifo");
      await send("f", [message({ key: "a", body: "a1" }), message({ key: "a", body: "a2" })]);
      assert.deepEqual(bodies((await lease("f", t0)).messages), ["a1"]);
      assert.deepEqual(bodies((await lease("f", t0 + 29_999)).messages), []);
      assert.deepEqual(bodies((await lease("f", t0 + 30_000)).messages), ["a1"]);
    });

    test("an exhausted head is dead-lettered and its group goes on in order", async () => {
      await create("dlq", "standard");
      await create("f", "fifo");
      const deadLetter = { queues: ["dlq"], maxDeliveries: 1 };
      await send("f", [
        message({ key: "a", body: "a1" }),
        message({ key: "a", body: "a2" }),
        message({ key: "a", body: "a3" }),
        message({ key: "b", body: "b1" }),
      ]);
      const first = await lease("f", t0, 10, { deadLetter });
      const a1 = first.messages.find((m) => m.body.toString() === "a1");
      // By a nack of its last delivery ...
      assert.deepEqual(await nack("f", [a1?.receipt], t0, deadLetter), {
        results: [{ ok: true }],
        deadLettered: 1,
      });
      const second = await lease("f", t0, 10, { deadLetter });
      assert.deepEqual(bodies(second.messages), ["a2"]);
      // ... or by a lease that finds the head's last lease over: a3 is leased in the same call.
      const third = await lease("f", t0 + 30_000, 10, { deadLetter });
      assert.equal(third.deadLettered, 2, "a2 and b1 used their one delivery");
      assert.deepEqual(bodies(third.messages), ["a3"]);
      const dead = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 + 30_000 });
      assert.deepEqual(bodies(dead).sort(), ["a1", "a2", "b1"]);
      assert.equal(dead[0]?.headers["x-dead-letter-reason"], "max_deliveries");
      assert.equal(dead[0]?.headers["x-original-queue"], "f");
      await assertDepthCounted("f", t0 + 30_000);
    });

    test("retention, purge-free removal and the exhausted sweep hand the group to its next message", async () => {
      await create("dlq", "standard");
      await create("f", "fifo");
      await send("f", [message({ key: "a", body: "a1", publishedAt: t0 - 10 })]);
      await send("f", [message({ key: "a", body: "a2" }), message({ key: "a", body: "a3" })]);
      assert.deepEqual(await store.queueExpire({ queue: "f", expiredBefore: t0 - 5, max: 10, now: t0 }), {
        expired: 1,
      });
      const leased = await lease("f", t0);
      assert.deepEqual(bodies(leased.messages), ["a2"]);
      const swept = await store.queueDeadLetterExhausted({
        queue: "f",
        visibleFrom: t0,
        now: t0 + 30_000,
        max: 10,
        deadLetter: { queues: ["dlq"], maxDeliveries: 1 },
      });
      assert.deepEqual(swept, { deadLettered: 1 });
      assert.deepEqual(bodies((await lease("f", t0 + 30_000)).messages), ["a3"]);
    });

    test("messages dead-lettered or sent into a FIFO queue join their groups in arrival order", async () => {
      await create("fdlq", "fifo");
      await create("src", "standard");
      const deadLetter = { queues: ["fdlq"], maxDeliveries: 1 };
      await send("src", [message({ key: "k", body: "k1" }), message({ key: "k", body: "k2" })]);
      const leased = await lease("src", t0);
      await nack(
        "src",
        leased.messages.map((m) => m.receipt),
        t0,
        deadLetter,
      );
      await send("fdlq", [message({ key: "k", body: "k3" })]);
      const order: string[] = [];
      for (let i = 0; i < 4; i++) {
        const { messages } = await lease("fdlq", t0);
        order.push(...bodies(messages));
        await ack(
          "fdlq",
          messages.map((m) => m.receipt),
        );
      }
      assert.deepEqual(order, ["k1", "k2", "k3"]);
    });
  });
}

/** Priorities in a standard queue. */
export function priorityTests(suite: PolicySuite): void {
  const { create, send, lease, bodies, assertDepthCounted } = suite;
  describe("priorities", () => {
    test("a standard queue leases higher priorities first, each in order of visibility", async () => {
      await create("p");
      await send("p", [
        message({ body: "0a", priority: 0 }),
        message({ body: "5a", priority: 5 }),
        message({ body: "9a", priority: 9 }),
        message({ body: "5b", priority: 5, visibleAt: t0 + 1 }),
        message({ body: "0b", priority: 0 }),
        message({ body: "9late", priority: 9, visibleAt: t0 + 20_000 }),
        message({ body: "5c", priority: 5 }),
      ]);
      assert.deepEqual(bodies((await lease("p", t0 + 1, 3)).messages), ["9a", "5a", "5c"]);
      assert.deepEqual(bodies((await lease("p", t0 + 1, 10)).messages), ["5b", "0a", "0b"]);
      assert.deepEqual(bodies((await lease("p", t0 + 20_000, 10)).messages), ["9late"]);
      await assertDepthCounted("p", t0 + 20_000);
    });
  });
}
