/**
 * The Store contract for a queue's record and its upkeep: create, update, list and delete; peek, purge,
 * retention and the schedule of next events.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { attributes, message, rejectsWith, t0 } from "../conformance-fixtures.js";
import type { QueueSuite } from "./harness.js";

/** Queues: create once, update attributes, list, get and delete. */
export function queueRecordTests(suite: QueueSuite): void {
  const { store, send } = suite;
  describe("queues", () => {
    test("upsert creates once, then updates attributes and keeps counters", async () => {
      await send({ queue: "q", messages: [message()] });
      const updated = await store.queueUpsert({
        name: "q",
        kind: "standard",
        attributes: { ...attributes, visibilityTimeoutMs: 5000 },
        now: t0 + 1,
      });
      assert.equal(updated.created, false);
      assert.equal(updated.queue.attributes.visibilityTimeoutMs, 5000);
      assert.equal(updated.queue.createdAt, t0);
      assert.equal(updated.queue.counters.published, 1);
    });

    test("kind cannot change", async () => {
      await rejectsWith(
        store.queueUpsert({ name: "q", kind: "fifo", attributes, now: t0 }),
        "queue_kind_mismatch",
      );
      assert.equal((await store.queueGet({ name: "q" }))?.kind, "standard");
    });

    test("a dead-letter target must exist, and nothing is created when it does not", async () => {
      const withDlq = { ...attributes, deadLetter: { queue: "missing", maxDeliveries: 3 } };
      await rejectsWith(
        store.queueUpsert({ name: "q2", kind: "standard", attributes: withDlq, now: t0 }),
        "dead_letter_queue_not_found",
      );
      assert.equal(await store.queueGet({ name: "q2" }), undefined);
    });

    test("list is sorted by name; get of a missing queue is undefined", async () => {
      await store.queueUpsert({ name: "b", kind: "standard", attributes, now: t0 });
      await store.queueUpsert({ name: "a", kind: "standard", attributes, now: t0 });
      assert.deepEqual(
        (await store.queueList()).map((queue) => queue.name),
        ["a", "b", "q"],
      );
      assert.equal(await store.queueGet({ name: "nope" }), undefined);
    });

    test("delete removes the queue with its messages and says how many", async () => {
      await send({ queue: "q", messages: [message(), message()] });
      assert.deepEqual(await store.queueDelete({ name: "q" }), { removed: 2 });
      assert.equal(await store.queueGet({ name: "q" }), undefined);
      await rejectsWith(store.queueDelete({ name: "q" }), "queue_not_found");
      // A queue of the same name starts empty.
      await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
      assert.equal((await store.queueDepth({ name: "q", now: t0 })).available, 0);
    });

    test("a queue that is a dead-letter target cannot be deleted", async () => {
      await store.queueUpsert({
        name: "src",
        kind: "standard",
        attributes: { ...attributes, deadLetter: { queue: "q", maxDeliveries: 2 } },
        now: t0,
      });
      await rejectsWith(store.queueDelete({ name: "q" }), "queue_in_use");
      assert.ok(await store.queueGet({ name: "q" }));
    });
  });
}

/** Peek, purge, retention and the next events a queue has scheduled. */
export function queueUpkeepTests(suite: QueueSuite): void {
  const { store, send, lease } = suite;
  describe("peek, purge, retention, schedule", () => {
    test("peek reads each state without leasing", async () => {
      await send({
        queue: "q",
        messages: [message(), message(), message({ visibleAt: t0 + 50_000 })],
      });
      await lease("q", t0, 1);
      const peek = async (state: "available" | "delayed" | "in-flight") =>
        (await store.queuePeek({ queue: "q", state, limit: 10, now: t0 })).length;
      assert.deepEqual([await peek("available"), await peek("delayed"), await peek("in-flight")], [1, 1, 1]);
      assert.equal((await lease("q", t0, 10)).messages.length, 1, "peek took no lease");
    });

    test("purge removes every message and counts them", async () => {
      await send({
        queue: "q",
        messages: [message(), message(), message({ visibleAt: t0 + 9 })],
      });
      await lease("q", t0, 1);
      assert.deepEqual(await store.queuePurge({ queue: "q" }), { purged: 3 });
      assert.equal((await store.queueGet({ name: "q" }))?.counters.purged, 3);
      const depth = await store.queueDepth({ name: "q", now: t0 });
      assert.deepEqual([depth.available, depth.delayed, depth.inFlight], [0, 0, 0]);
    });

    test("expire deletes only what is past retention, at most max at a time, and counts it", async () => {
      await send({
        queue: "q",
        messages: [
          message({ publishedAt: t0 }),
          message({ publishedAt: t0 + 1 }),
          message({ publishedAt: t0 + 2 }),
        ],
      });
      assert.deepEqual(await store.queueExpire({ queue: "q", expiredBefore: t0 + 1, max: 1, now: t0 }), {
        expired: 1,
      });
      assert.deepEqual(await store.queueExpire({ queue: "q", expiredBefore: t0 + 1, max: 10, now: t0 }), {
        expired: 1,
      });
      assert.deepEqual(await store.queueExpire({ queue: "q", expiredBefore: t0 + 1, max: 10, now: t0 }), {
        expired: 0,
      });
      assert.equal((await store.queueGet({ name: "q" }))?.counters.expired, 2);
      assert.equal((await store.queueDepth({ name: "q", now: t0 })).oldestPublishedAt, t0 + 2);
    });

    test("next events give the next visibility and the oldest publish time", async () => {
      assert.deepEqual(await store.queueNextEvents({ queue: "q", now: t0 }), {
        nextVisibleAt: null,
        oldestPublishedAt: null,
      });
      await send({
        queue: "q",
        messages: [message({ publishedAt: t0, visibleAt: t0 + 500 }), message({ publishedAt: t0 + 1 })],
      });
      assert.deepEqual(await store.queueNextEvents({ queue: "q", now: t0 + 1 }), {
        nextVisibleAt: t0 + 500,
        oldestPublishedAt: t0,
      });
      await lease("q", t0 + 1, 1);
      assert.deepEqual(await store.queueNextEvents({ queue: "q", now: t0 + 2 }), {
        nextVisibleAt: t0 + 500,
        oldestPublishedAt: t0,
      });
      assert.equal((await store.queueNextEvents({ queue: "q", now: t0 + 600 })).nextVisibleAt, t0 + 30_001);
    });
  });
}
