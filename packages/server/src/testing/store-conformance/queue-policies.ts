/**
 * The Store contract for send and lease policies: deduplication, overflow and at-most-once leases.
 *
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { noSendPolicy } from "../../model/policies.js";
import { message, rejectsWith, t0 } from "../conformance-fixtures.js";
import type { PolicySuite } from "./harness.js";

/** Deduplication within a window, per queue, forgotten by the sweep. */
export function deduplicationTests(suite: PolicySuite): void {
  const { store, create, send, lease, ack, assertDepthCounted } = suite;
  describe("deduplication", () => {
    const window = { dedupWindowMs: 60_000, overflow: null };

    test("a dedupId seen within the window answers the first id, stored once, even after its ack", async () => {
      await create("d");
      const first = message({ dedupId: "order-1" });
      assert.deepEqual(await send("d", [first], window), [first.id]);
      assert.deepEqual(await send("d", [message({ dedupId: "order-1" })], window, t0 + 10), [first.id]);
      assert.equal((await store.queueDepth({ name: "d", now: t0 + 10 })).available, 1);
      const leased = await lease("d", t0 + 10);
      await ack("d", [leased.messages[0]?.receipt]);
      assert.deepEqual(await send("d", [message({ dedupId: "order-1" })], window, t0 + 59_999), [first.id]);
      assert.equal(
        (await store.queueDepth({ name: "d", now: t0 + 59_999 })).available,
        0,
        "acked, not stored again",
      );
      const after = message({ dedupId: "order-1" });
      assert.deepEqual(await send("d", [after], window, t0 + 60_000), [after.id], "the window ended");
      assert.equal((await store.queueGet({ name: "d" }))?.counters.published, 2);
      await assertDepthCounted("d", t0 + 60_000);
    });

    test("within one batch a repeat is a duplicate of the earlier item; without a window nothing is", async () => {
      await create("d");
      const [a, b, c] = [message({ dedupId: "x" }), message({ dedupId: "x" }), message({ dedupId: "y" })];
      assert.deepEqual(await send("d", [a, b, c], window), [a.id, a.id, c.id]);
      const [d, e] = [message({ dedupId: "x" }), message({ dedupId: "x" })];
      await create("plain");
      assert.deepEqual(await send("plain", [d, e]), [d.id, e.id]);
    });

    test("dedupIds are per queue, and forgotten by the sweep once their window ends", async () => {
      await create("d1");
      await create("d2");
      const [a, b] = [message({ dedupId: "x" }), message({ dedupId: "x" })];
      assert.deepEqual(await send("d1", [a], window), [a.id]);
      assert.deepEqual(await send("d2", [b], window), [b.id]);
      await store.queueExpire({ queue: "d1", expiredBefore: 0, max: 10, now: t0 + 60_000 });
      const c = message({ dedupId: "x" });
      assert.deepEqual(await send("d1", [c], window, t0 + 60_000), [c.id]);
    });
  });
}

/** Overflow: reject, drop-oldest and dead-letter-oldest at maxDepth. */
export function overflowTests(suite: PolicySuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, create, send, lease, bodies, nack, assertDepthCounted } = suite;
  describe("overflow", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const limit = (policy: "reject" | "drop-oldest" | "dead-letter-oldest", maxDepth: number) => ({
      dedupWindowMs: 0,
      overflow: {
        maxDepth,
        policy,
        deadLetter: policy === "dead-letter-oldest" ? { queues: ["dlq"], maxDeliveries: 5 } : null,
      },
    });

    test("reject refuses a send that does not fit, whole, and counts in-flight messages in the depth", async () => {
      await create("o");
      await send("o", [message(), message()], limit("reject", 3));
      await lease("o", t0, 1);
      await rejectsWith(send("o", [message(), message()], limit("reject", 3)), "queue_full");
      const depth = await store.queueDepth({ name: "o", now: t0 });
      assert.equal(depth.available + depth.inFlight, 2, "nothing of the refused send was stored");
      await send("o", [message()], limit("reject", 3));
      await rejectsWith(send("o", [message()], limit("reject", 3)), "queue_full");
      assert.equal((await store.queueGet({ name: "o" }))?.counters.published, 3);
      await assertDepthCounted("o");
    });

    test("a refused send in a multi-queue send stores nothing anywhere", async () => {
      await create("o");
      await create("other");
      await send("o", [message()], limit("reject", 1));
      await rejectsWith(
        store.queueSendMany({
          sends: [
            { queue: "other", messages: [message()], policy: noSendPolicy },
            { queue: "o", messages: [message()], policy: limit("reject", 1) },
          ],
          now: t0,
        }),
        "queue_full",
      );
      assert.equal((await store.queueDepth({ name: "other", now: t0 })).available, 0);
    });

    test("drop-oldest keeps the newest maxDepth messages and counts what it dropped", async () => {
      await create("o");
      await send("o", [message({ body: "1" }), message({ body: "2" })], limit("drop-oldest", 3));
      await send(
        "o",
        [message({ body: "3" }), message({ body: "4" }), message({ body: "5" })],
        limit("drop-oldest", 3),
      );
      const left = await store.queuePeek({ queue: "o", state: "available", limit: 10, now: t0 });
      assert.deepEqual(bodies(left), ["3", "4", "5"]);
      assert.equal((await store.queueGet({ name: "o" }))?.counters.dropped, 2);
      await assertDepthCounted("o");
    });

    test("dead-letter-oldest moves the oldest to the dead-letter queue, saying why", async () => {
      await create("dlq");
      await create("o");
      await send(
        "o",
        [message({ body: "1" }), message({ body: "2" }), message({ body: "3" })],
        limit("dead-letter-oldest", 2),
      );
      const dead = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 });
      assert.deepEqual(bodies(dead), ["1"]);
      assert.equal(dead[0]?.headers["x-dead-letter-reason"], "max_depth");
      assert.equal((await store.queueGet({ name: "o" }))?.counters.deadLettered, 1);
      await assertDepthCounted("o");
      await assertDepthCounted("dlq");
    });

    test("dropping a FIFO group's head hands the group to its next message", async () => {
      await create("f", "fifo");
      await send("f", [message({ key: "a", body: "a1" }), message({ key: "a", body: "a2" })]);
      await send("f", [message({ key: "b", body: "b1" })], limit("drop-oldest", 2));
      assert.deepEqual(bodies((await lease("f", t0)).messages).sort(), ["a2", "b1"]);
    });

    test("a send of duplicates only is answered even when dead letters filled the queue past maxDepth", async () => {
      await create("dlq");
      await create("src");
      const policy = {
        dedupWindowMs: 60_000,
        overflow: { maxDepth: 1, policy: "reject" as const, deadLetter: null },
      };
      const first = message({ dedupId: "x" });
      await send("dlq", [first], policy);
      await send("src", [message()]);
      const leased = await lease("src", t0);
      await nack("src", [leased.messages[0]?.receipt], t0, { queues: ["dlq"], maxDeliveries: 1 });
      assert.equal(
        (await store.queueDepth({ name: "dlq", now: t0 })).available,
        2,
        "dead letters are never refused",
      );
      assert.deepEqual(await send("dlq", [message({ dedupId: "x" })], policy), [first.id]);
      await rejectsWith(send("dlq", [message()], policy), "queue_full");
    });

    test("duplicates take no room", async () => {
      await create("o");
      const policy = {
        dedupWindowMs: 60_000,
        overflow: { maxDepth: 1, policy: "reject" as const, deadLetter: null },
      };
      const first = message({ dedupId: "x" });
      await send("o", [first], policy);
      assert.deepEqual(await send("o", [message({ dedupId: "x" })], policy), [first.id]);
    });
  });
}

/** autoAck leases, deleted as they are handed out. */
export function atMostOnceTests(suite: PolicySuite): void {
  const { store, create, send, lease, bodies, assertDepthCounted } = suite;
  describe("at-most-once leases", () => {
    test("autoAck deletes what it leases, counts it acked, and moves a FIFO group on", async () => {
      await create("f", "fifo");
      await send("f", [message({ key: "a", body: "a1" }), message({ key: "a", body: "a2" })]);
      const first = await lease("f", t0, 10, { autoAck: true });
      assert.deepEqual(bodies(first.messages), ["a1"]);
      assert.equal(first.messages[0]?.deliveryCount, 1);
      assert.deepEqual(bodies((await lease("f", t0, 10, { autoAck: true })).messages), ["a2"]);
      const counters = (await store.queueGet({ name: "f" }))?.counters;
      assert.equal(counters?.acked, 2);
      assert.equal(counters?.delivered, 2);
      assert.equal(
        (await store.queueDepth({ name: "f", now: t0 + 60_000 })).available,
        0,
        "nothing comes back",
      );
      await assertDepthCounted("f", t0 + 60_000);
    });
  });
}
