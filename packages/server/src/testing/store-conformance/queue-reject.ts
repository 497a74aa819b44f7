/**
 * The Store contract for a dead-lettering nack (`queueNack` with `deadLetterNow`, a message rejected
 * for good): moved at once whatever its delivery count, with its reason; refused per item, changing
 * nothing, in a queue with no dead-letter target; stale and invalid receipts as for ack.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { DeadLetterRoute } from "../../model/queue.js";
import { message, t0 } from "../conformance-fixtures.js";
import type { PolicySuite } from "./harness.js";

/** Dead-lettering nacks: to a queue, to a route of several or none, and with nowhere to go. */
export function rejectTests(suite: PolicySuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, create, send, lease, bodies, ack, assertDepthCounted } = suite;
  const reject = (
    queue: string,
    receipts: (string | undefined)[],
    now: number,
    deadLetter: DeadLetterRoute | null,
    reason = "rejected",
  ) =>
    store.queueNack({
      queue,
      receipts: receipts.map((r) => r ?? "missing"),
      now,
      retryDelayMs: () => assert.fail("a dead-lettering nack retries nothing"),
      deadLetter,
      deadLetterNow: { reason },
    });
  const toDlq = { queues: ["dlq"], maxDeliveries: 5 };
  const counters = async (queue: string) => (await store.queueGet({ name: queue }))?.counters;

  describe("dead-lettering nack", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("moves the message at once, below maxDeliveries, with its reason and the usual headers", async () => {
      await create("dlq");
      await create("q");
      const original = message({ headers: { "x-app": "kept" } });
      await send("q", [original, message()]);
      const [first, second] = (await lease("q", t0)).messages;
      const rejected = await reject("q", [first?.receipt], t0 + 7, toDlq);
      assert.deepEqual(rejected, { results: [{ ok: true }], deadLettered: 1 });
      const given = await reject("q", [second?.receipt], t0 + 8, toDlq, "token_revoked");
      assert.deepEqual(given, { results: [{ ok: true }], deadLettered: 1 });
      const dead = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 + 8 });
      assert.deepEqual(
        dead.map((m) => m.headers["x-dead-letter-reason"]),
        ["rejected", "token_revoked"],
      );
      const [copy] = dead;
      assert.ok(copy);
      assert.equal(copy.id, original.id);
      assert.equal(copy.body.toString(), original.body.toString());
      assert.equal(copy.headers["x-original-queue"], "q");
      assert.equal(copy.headers["x-delivery-count"], "1");
      assert.equal(copy.headers["x-app"], "kept");
      assert.equal(copy.deliveryCount, 0);
      assert.equal(copy.publishedAt, t0 + 7);
      const q = await counters("q");
      assert.deepEqual([q?.deadLettered, q?.nacked], [2, 2]);
      assert.equal((await counters("dlq"))?.published, 2);
      await assertDepthCounted("q", t0 + 8);
      await assertDepthCounted("dlq", t0 + 8);
    });

    test("copies the message into every queue of its route, and drops it, counted, when the route is empty", async () => {
      await create("a");
      await create("b");
      await create("q");
      await send("q", [message({ body: "routed" }), message({ body: "dropped" })]);
      const [routed, dropped] = (await lease("q", t0)).messages;
      assert.deepEqual(await reject("q", [routed?.receipt], t0, { queues: ["a", "b"], maxDeliveries: 5 }), {
        results: [{ ok: true }],
        deadLettered: 1,
      });
      assert.deepEqual(await reject("q", [dropped?.receipt], t0, { queues: [], maxDeliveries: 5 }), {
        results: [{ ok: true }],
        deadLettered: 1,
      });
      for (const target of ["a", "b"]) {
        const peeked = await store.queuePeek({ queue: target, state: "available", limit: 10, now: t0 });
        assert.deepEqual(bodies(peeked), ["routed"], target);
        assert.equal(peeked[0]?.headers["x-dead-letter-reason"], "rejected");
      }
      assert.equal((await counters("q"))?.deadLettered, 2);
      await assertDepthCounted("q");
    });

    test("with no dead-letter target each lease answers no_dead_letter_target and stays as it was", async () => {
      await create("q");
      await send("q", [message(), message()]);
      const leased = (await lease("q", t0)).messages;
      const receipts = leased.map((m) => m.receipt);
      const answer = await reject("q", receipts, t0 + 1, null);
      assert.deepEqual(answer, {
        results: [{ error: "no_dead_letter_target" }, { error: "no_dead_letter_target" }],
        deadLettered: 0,
      });
      const inFlight = await store.queuePeek({ queue: "q", state: "in-flight", limit: 10, now: t0 + 1 });
      assert.deepEqual(
        inFlight.map((m) => m.deliveryCount),
        [1, 1],
      );
      assert.equal((await lease("q", t0 + 29_999)).messages.length, 0, "the leases still run to their end");
      const q = await counters("q");
      assert.deepEqual([q?.nacked, q?.deadLettered], [0, 0]);
      // The receipts still name the leases.
      assert.deepEqual(await ack("q", receipts), [{ ok: true }, { ok: true }]);
    });

    test("answers a mixed batch per item, in order: stale, invalid and repeated receipts as for ack", async () => {
      await create("dlq");
      await create("q");
      await send("q", [message({ body: "gone" }), message({ body: "a" }), message({ body: "b" })]);
      const [gone] = (await lease("q", t0, 1)).messages;
      const [a, b] = (await lease("q", t0 + 1, 2)).messages;
      // Its lease ends and another takes it: the first receipt is stale.
      const [again] = (await lease("q", t0 + 30_000, 1)).messages;
      assert.equal(again?.id, gone?.id);
      const batch = [a?.receipt, gone?.receipt, "junk", b?.receipt, a?.receipt];
      assert.deepEqual(await reject("q", batch, t0 + 30_000, null), {
        results: [
          { error: "no_dead_letter_target" },
          { error: "stale_receipt" },
          { error: "invalid_receipt" },
          { error: "no_dead_letter_target" },
          { error: "stale_receipt" },
        ],
        deadLettered: 0,
      });
      assert.deepEqual(await reject("q", batch, t0 + 30_000, toDlq), {
        results: [
          { ok: true },
          { error: "stale_receipt" },
          { error: "invalid_receipt" },
          { ok: true },
          { error: "stale_receipt" },
        ],
        deadLettered: 2,
      });
      const dead = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 + 30_000 });
      assert.deepEqual(bodies(dead), ["a", "b"]);
      assert.deepEqual(
        bodies(await store.queuePeek({ queue: "q", state: "in-flight", limit: 10, now: t0 + 30_000 })),
        ["gone"],
      );
      assert.equal((await counters("q"))?.deadLettered, 2);
      await assertDepthCounted("q", t0 + 30_000);
    });

    test("a dead-lettered FIFO head hands its group to the next message; one refused keeps it", async () => {
      await create("dlq");
      await create("f", "fifo");
      await send("f", [
        message({ key: "g", body: "g1" }),
        message({ key: "g", body: "g2" }),
        message({ key: "g", body: "g3" }),
      ]);
      const [g1] = (await lease("f", t0)).messages;
      assert.deepEqual(await reject("f", [g1?.receipt], t0, null), {
        results: [{ error: "no_dead_letter_target" }],
        deadLettered: 0,
      });
      assert.deepEqual(bodies((await lease("f", t0)).messages), [], "the refused head still holds its group");
      assert.deepEqual(await reject("f", [g1?.receipt], t0, toDlq), {
        results: [{ ok: true }],
        deadLettered: 1,
      });
      const [g2] = (await lease("f", t0)).messages;
      assert.deepEqual(bodies([g2 ?? { body: "none" }]), ["g2"]);
      await ack("f", [g2?.receipt]);
      assert.deepEqual(bodies((await lease("f", t0)).messages), ["g3"], "the group goes on in order");
      await assertDepthCounted("f");
    });
  });
}
