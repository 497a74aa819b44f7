/**
 * The Store contract for leases and acks: order, expiry, stale receipts, the in-flight ceiling, extend,
 * and calls that run at once.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { attributes, message, t0 } from "../conformance-fixtures.js";
import type { QueueSuite } from "./harness.js";
import { sendHandOffTests } from "./queue-send.js";

/** Leases, acks and extends, with the hand-off tests from queue-send.ts among them. */
export function leaseTests(suite: QueueSuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, send, lease } = suite;
  describe("leases", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("lease takes available messages in visibility order, up to max, with the message intact", async () => {
      const first = message({ publishedAt: t0, visibleAt: t0 + 5 });
      const second = message({ publishedAt: t0, visibleAt: t0 + 1 });
      const later = message({ publishedAt: t0, visibleAt: t0 + 100 });
      await send({ queue: "q", messages: [first, second, later] });
      const { messages } = await lease("q", t0 + 10, 5);
      assert.deepEqual(
        messages.map((m) => m.id),
        [second.id, first.id],
      );
      const leased = messages[0];
      assert.ok(leased);
      assert.equal(leased.body.toString(), second.body.toString());
      assert.deepEqual(leased.headers, { "x-test": "yes" });
      assert.equal(leased.contentType, "text/plain");
      assert.equal(leased.deliveryCount, 1);
      assert.equal(leased.firstDeliveredAt, t0 + 10);
      assert.notEqual(messages[0]?.receipt, messages[1]?.receipt);
      assert.equal((await lease("q", t0 + 10, 5)).messages.length, 0, "leased messages are not leased twice");
    });

    test("an expired lease makes the message available again with a new receipt and count + 1", async () => {
      await send({ queue: "q", messages: [message()] });
      const [first] = (await lease("q", t0)).messages;
      assert.equal((await lease("q", t0 + 29_999)).messages.length, 0);
      const [second] = (await lease("q", t0 + 30_000)).messages;
      assert.ok(first && second);
      assert.equal(second.id, first.id);
      assert.equal(second.deliveryCount, 2);
      assert.equal(second.firstDeliveredAt, t0);
      assert.notEqual(second.receipt, first.receipt);
      const queue = await store.queueGet({ name: "q" });
      assert.equal(queue?.counters.delivered, 2);
      assert.equal(queue?.counters.redelivered, 1);
    });

    test("a stale receipt cannot ack a message another consumer holds", async () => {
      await send({ queue: "q", messages: [message()] });
      const [first] = (await lease("q", t0)).messages;
      const [second] = (await lease("q", t0 + 30_000)).messages;
      assert.ok(first && second);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [first.receipt] }), [
        { error: "stale_receipt" },
      ]);
      assert.equal((await store.queueDepth({ name: "q", now: t0 + 30_001 })).inFlight, 1);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [second.receipt] }), [{ ok: true }]);
      assert.equal((await store.queueDepth({ name: "q", now: t0 + 30_001 })).inFlight, 0);
    });

    test("an acked message never comes back, and a second ack is stale", async () => {
      await send({ queue: "q", messages: [message()] });
      const [leased] = (await lease("q", t0)).messages;
      assert.ok(leased);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [leased.receipt] }), [{ ok: true }]);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [leased.receipt] }), [
        { error: "stale_receipt" },
      ]);
      assert.equal((await lease("q", t0 + 3_000_000)).messages.length, 0);
      assert.equal((await store.queueGet({ name: "q" }))?.counters.acked, 1);
    });

    test("a late ack succeeds while no one else has leased the message", async () => {
      await send({ queue: "q", messages: [message()] });
      const [leased] = (await lease("q", t0)).messages;
      assert.ok(leased);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [leased.receipt] }), [{ ok: true }]);
    });

    test("receipts are checked per item: malformed, from another queue, or valid", async () => {
      await store.queueUpsert({ name: "other", kind: "standard", attributes, now: t0 });
      await send({ queue: "q", messages: [message(), message()] });
      const [a, b] = (await lease("q", t0)).messages;
      assert.ok(a && b);
      assert.deepEqual(await store.queueAck({ queue: "other", receipts: [a.receipt] }), [
        { error: "stale_receipt" },
      ]);
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: ["not a receipt", b.receipt] }), [
        { error: "invalid_receipt" },
        { ok: true },
      ]);
      assert.equal((await store.queueDepth({ name: "q", now: t0 })).inFlight, 1);
    });

    test("a receipt given twice in one batch counts once; the repeat is stale", async () => {
      await send({ queue: "q", messages: [message(), message()] });
      const [a, b] = (await lease("q", t0, 2)).messages;
      assert.ok(a && b);
      const twice = [a.receipt, a.receipt];
      assert.deepEqual(
        await store.queueExtend({ queue: "q", receipts: twice, leaseExpiresAt: t0 + 60_000 }),
        [{ ok: true }, { error: "stale_receipt" }],
      );
      assert.deepEqual(await store.queueAck({ queue: "q", receipts: [b.receipt, b.receipt] }), [
        { ok: true },
        { error: "stale_receipt" },
      ]);
      assert.equal((await store.queueGet({ name: "q" }))?.counters.acked, 1);
    });

    test("concurrent sends into one queue each answer their own ids, and all are stored", async () => {
      const sends = Array.from({ length: 20 }, (_, i) =>
        Array.from({ length: 1 + (i % 3) }, () => message({ publishedAt: t0 + i, body: `s${i}` })),
      );
      const answers = await Promise.all(sends.map((messages) => send({ queue: "q", messages })));
      answers.forEach((ids, i) => {
        assert.deepEqual(
          ids,
          sends[i]?.map((m) => m.id),
          `send ${i} got its own ids`,
        );
      });
      const leased = (await lease("q", t0 + 100, 100)).messages.map((m) => m.body.toString());
      assert.deepEqual(
        leased,
        sends.flatMap((messages) => messages.map((m) => m.body.toString())),
        "every message, in visibility order",
      );
    });

    test("concurrent ack batches: each answers its own receipts, and a receipt in two counts once", async () => {
      await send({ queue: "q", messages: Array.from({ length: 12 }, () => message()) });
      const receipts = (await lease("q", t0, 12)).messages.map((m) => m.receipt);
      const batches = [receipts.slice(0, 4), receipts.slice(4, 8), receipts.slice(8, 12)];
      // In the second call and the last: on PostgreSQL both wait behind the first and share a statement.
      const shared = receipts[4] as string;
      const results = await Promise.all([
        ...batches.map((batch) => store.queueAck({ queue: "q", receipts: batch })),
        store.queueAck({ queue: "q", receipts: [shared, "not-a-receipt"] }),
      ]);
      const [first, second, third, repeat] = results;
      assert.deepEqual(
        [first?.slice(1), second, third],
        [Array(3).fill({ ok: true }), Array(4).fill({ ok: true }), Array(4).fill({ ok: true })],
      );
      const sharedOutcomes = [first?.[0], repeat?.[0]];
      assert.deepEqual(
        sharedOutcomes.filter((outcome) => outcome && "ok" in outcome).length,
        1,
        `the receipt in two calls is acked once: ${JSON.stringify(sharedOutcomes)}`,
      );
      assert.deepEqual(repeat?.[1], { error: "invalid_receipt" });
      const counters = (await store.queueGet({ name: "q" }))?.counters;
      assert.equal(counters?.acked, 12);
    });

    /** One send into `queue` with a hand-off of up to `max`, leased until t0 + 30 s. */

    sendHandOffTests(suite);

    test("lease respects the in-flight ceiling", async () => {
      await send({ queue: "q", messages: [message(), message(), message()] });
      const leaseCapped = (now: number) =>
        store.queueLease({
          queue: "q",
          max: 10,
          now,
          leaseExpiresAt: now + 30_000,
          expiredBefore: now - attributes.retentionMs,
          inFlightMax: 2,
          deadLetter: null,
        });
      const [first] = (await leaseCapped(t0)).messages;
      assert.ok(first);
      assert.equal((await leaseCapped(t0)).messages.length, 0);
      await store.queueAck({ queue: "q", receipts: [first.receipt] });
      assert.equal((await leaseCapped(t0)).messages.length, 1, "an ack frees its place");
      assert.equal((await leaseCapped(t0)).messages.length, 0);
      assert.equal((await leaseCapped(t0 + 30_000)).messages.length, 2, "ended leases free theirs");
    });

    test("a lease smaller than the ceiling still counts what is in flight once the depth could reach it", async () => {
      // Depth 4 (2 in flight), ceiling 3: a lease of 1 fits the ceiling but not beside the depth.
      await send({ queue: "q", messages: [message(), message(), message(), message()] });
      assert.equal((await lease("q", t0, 2)).messages.length, 2);
      const leaseOne = () =>
        store.queueLease({
          queue: "q",
          max: 1,
          now: t0,
          leaseExpiresAt: t0 + 30_000,
          expiredBefore: t0 - attributes.retentionMs,
          inFlightMax: 3,
          deadLetter: null,
        });
      assert.equal((await leaseOne()).messages.length, 1, "room for one more in flight");
      assert.equal((await leaseOne()).messages.length, 0, "the ceiling is reached");
    });

    test("the in-flight ceiling counts ended leases that an extend took back", async () => {
      await send({ queue: "q", messages: [message(), message(), message(), message()] });
      const leaseOne = async (now: number) =>
        (
          await store.queueLease({
            queue: "q",
            max: 1,
            now,
            leaseExpiresAt: now + 30_000,
            expiredBefore: now - attributes.retentionMs,
            inFlightMax: 3,
            deadLetter: null,
          })
        ).messages;
      const first = [...(await leaseOne(t0)), ...(await leaseOne(t0)), ...(await leaseOne(t0))];
      assert.equal(first.length, 3);
      assert.equal((await leaseOne(t0)).length, 0, "at the ceiling");
      // The three leases end; one new lease takes the fourth message.
      const later = t0 + 30_000;
      assert.equal((await leaseOne(later)).length, 1);
      // Extends take two ended leases back in flight: three again.
      const [a, b] = first;
      assert.ok(a && b);
      assert.deepEqual(
        await store.queueExtend({
          queue: "q",
          receipts: [a.receipt, b.receipt],
          leaseExpiresAt: later + 30_000,
        }),
        [{ ok: true }, { ok: true }],
      );
      assert.equal((await leaseOne(later)).length, 0, "the extended leases hold their places");
    });

    test("a lease that ends at once never hands one message out twice in one call", async () => {
      await send({ queue: "q", messages: [message(), message()] });
      const now = t0 + 1;
      const once = (autoAck: boolean) =>
        store.queueLease({
          queue: "q",
          max: 10,
          now,
          leaseExpiresAt: now,
          expiredBefore: 0,
          inFlightMax: 1000,
          deadLetter: null,
          autoAck,
        });
      const leased = await once(false);
      assert.equal(new Set(leased.messages.map((m) => m.id)).size, leased.messages.length);
      assert.equal(leased.messages.length, 2);
      const taken = await once(true);
      assert.deepEqual(
        taken.messages.map((m) => m.deliveryCount),
        [2, 2],
        "each once more, acked",
      );
      const counters = (await store.queueGet({ name: "q" }))?.counters;
      assert.deepEqual([counters?.delivered, counters?.acked], [4, 2]);
    });

    test("messages past retention are not leased", async () => {
      await send({ queue: "q", messages: [message({ publishedAt: t0 })] });
      const now = t0 + attributes.retentionMs;
      assert.equal((await lease("q", now)).messages.length, 0);
    });

    test("extend moves the lease's end; a stale receipt cannot extend", async () => {
      await send({ queue: "q", messages: [message()] });
      const [leased] = (await lease("q", t0)).messages;
      assert.ok(leased);
      assert.deepEqual(
        await store.queueExtend({ queue: "q", receipts: [leased.receipt], leaseExpiresAt: t0 + 90_000 }),
        [{ ok: true }],
      );
      assert.equal((await lease("q", t0 + 60_000)).messages.length, 0, "still leased after the original end");
      const [again] = (await lease("q", t0 + 90_000)).messages;
      assert.ok(again);
      assert.deepEqual(
        await store.queueExtend({ queue: "q", receipts: [leased.receipt], leaseExpiresAt: t0 + 1e6 }),
        [{ error: "stale_receipt" }],
      );
    });
  });
}

/** Concurrent leases, and a failing call inside a shared commit. */
export function atomicityTests(suite: QueueSuite): void {
  const { store, send, lease } = suite;
  describe("atomicity and concurrency", () => {
    test("concurrent leases never hand one message to two holders", async () => {
      await send({ queue: "q", messages: Array.from({ length: 50 }, () => message()) });
      const batches = await Promise.all(Array.from({ length: 10 }, () => lease("q", t0, 7)));
      const ids = batches.flatMap((batch) => batch.messages.map((m) => m.id));
      assert.equal(ids.length, 50);
      assert.equal(new Set(ids).size, 50);
    });

    test("a failing call in a shared commit leaves the others committed and itself unapplied", async () => {
      const results = await Promise.allSettled([
        send({ queue: "q", messages: [message()] }),
        send({ queue: "missing", messages: [message()] }),
        send({ queue: "q", messages: [message()] }),
      ]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      assert.equal((await store.queueDepth({ name: "q", now: t0 })).available, 2);
      assert.equal((await store.queueGet({ name: "q" }))?.counters.published, 2);
    });
  });
}
