/**
 * The Store contract for redrive moves: dead letters moved back, in order, counted on both sides.
 *
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { noSendPolicy } from "../../model/policies.js";
import { message, t0 } from "../conformance-fixtures.js";
import type { PolicySuite } from "./harness.js";

/** Redrive moves out of a dead-letter queue and into their queues. */
export function redriveTests(suite: PolicySuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, create, send, lease, bodies, ack, assertDepthCounted } = suite;
  describe("redrive moves", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const policies = (...names: string[]) => new Map(names.map((name) => [name, noSendPolicy]));
    const fromQueue = (name: string, body: string, key?: string) =>
      message({ body, headers: { "x-original-queue": name }, ...(key !== undefined && { key }) });

    test("moves the oldest messages back to their queues, in order, counted on both sides", async () => {
      await create("dlq");
      await create("a");
      await create("b");
      await send("dlq", [
        fromQueue("a", "1", "k"),
        fromQueue("b", "2"),
        fromQueue("a", "3", "k"),
        fromQueue("a", "4"),
      ]);
      // The oldest is in flight: it stays, and holds back "3", the next of its key k.
      const inFlight = await lease("dlq", t0, 1);
      const result = await store.queueMove({
        queue: "dlq",
        to: null,
        max: 2,
        now: t0 + 5,
        policies: policies("a", "b"),
      });
      assert.deepEqual(
        { ...result, targets: result.targets.sort() },
        { moved: 2, held: 1, targets: ["a", "b"], stoppedBy: null },
      );
      const inA = await store.queuePeek({ queue: "a", state: "available", limit: 10, now: t0 + 5 });
      assert.deepEqual(bodies(inA), ["4"]);
      assert.equal(inA[0]?.deliveryCount, 0);
      assert.equal(inA[0]?.publishedAt, t0 + 5);
      assert.equal(inFlight.messages[0]?.body.toString(), "1");
      assert.equal((await store.queueGet({ name: "dlq" }))?.counters.redriven, 2);
      assert.equal((await store.queueGet({ name: "a" }))?.counters.published, 1);
      await assertDepthCounted("dlq", t0 + 5);
      await assertDepthCounted("a", t0 + 5);
      // Once the held message is acked, its key moves on, in order.
      await ack("dlq", [inFlight.messages[0]?.receipt]);
      const rest = await store.queueMove({
        queue: "dlq",
        to: null,
        max: 10,
        now: t0 + 6,
        policies: policies("a", "b"),
      });
      assert.deepEqual([rest.moved, rest.held], [1, 0]);
      const moved = await store.queuePeek({ queue: "a", state: "available", limit: 10, now: t0 + 6 });
      assert.deepEqual(bodies(moved), ["4", "3"]);
      assert.equal(moved[1]?.key, "k");
    });

    test("a message moved back into the queue it is in (its x-original-queue) leaves the depth exact, whatever the queue's overflow", async () => {
      // Over 80 lines: one scenario over both overflow policies, each step checking the depth.
      // A queue that dead-letters through an exchange routing back to itself holds such messages.
      const trim = (maxDepth: number, policy: "drop-oldest" | "reject") =>
        new Map([["q", { dedupWindowMs: 0, overflow: { maxDepth, policy, deadLetter: null } }]]);
      await create("q");
      const [id] = await send("q", [fromQueue("q", "1")]);
      const dropping = await store.queueMove({
        queue: "q",
        to: null,
        max: 1,
        now: t0 + 5,
        policies: trim(1, "drop-oldest"),
      });
      assert.deepEqual(dropping, { moved: 1, held: 0, targets: ["q"], stoppedBy: null });
      // Full at maxDepth 1 and refusing more: the move takes one out before it puts one in.
      const refusing = await store.queueMove({
        queue: "q",
        to: null,
        max: 1,
        now: t0 + 6,
        policies: trim(1, "reject"),
      });
      assert.deepEqual(refusing, { moved: 1, held: 0, targets: ["q"], stoppedBy: null });
      const [moved] = await store.queuePeek({ queue: "q", state: "available", limit: 10, now: t0 + 6 });
      assert.deepEqual([moved?.id, moved?.body.toString(), moved?.publishedAt], [id, "1", t0 + 6]);
      const counters = (await store.queueGet({ name: "q" }))?.counters;
      assert.deepEqual([counters?.published, counters?.redriven, counters?.dropped], [3, 2, 0]);
      await assertDepthCounted("q", t0 + 6);

      // Past its maxDepth already (sends without a policy put it there), a queue moving its messages into
      // itself takes them all out, puts them all back, then trims: the trim never takes one being moved.
      await create("over");
      await send(
        "over",
        ["1", "2", "3"].map((body) => fromQueue("over", body)),
      );
      const twoAtMost = new Map([
        [
          "over",
          { dedupWindowMs: 0, overflow: { maxDepth: 2, policy: "drop-oldest" as const, deadLetter: null } },
        ],
      ]);
      const trimmed = await store.queueMove({
        queue: "over",
        to: null,
        max: 3,
        now: t0 + 6,
        policies: twoAtMost,
      });
      assert.deepEqual(trimmed, { moved: 3, held: 0, targets: ["over"], stoppedBy: null });
      const left = await store.queuePeek({ queue: "over", state: "available", limit: 10, now: t0 + 6 });
      assert.deepEqual(bodies(left), ["2", "3"]);
      const over = (await store.queueGet({ name: "over" }))?.counters;
      assert.deepEqual([over?.published, over?.redriven, over?.dropped], [6, 3, 1]);
      await assertDepthCounted("over", t0 + 6);

      // In a FIFO queue the moved message joins the end of its group, behind the one that was next.
      await create("g", "fifo");
      await send("g", [fromQueue("g", "a", "k"), fromQueue("g", "b", "k")]);
      const twoDeep = new Map([
        [
          "g",
          { dedupWindowMs: 0, overflow: { maxDepth: 2, policy: "drop-oldest" as const, deadLetter: null } },
        ],
      ]);
      await store.queueMove({ queue: "g", to: null, max: 1, now: t0 + 7, policies: twoDeep });
      await assertDepthCounted("g", t0 + 7);
      const first = await lease("g", t0 + 7);
      assert.deepEqual(bodies(first.messages), ["b"]);
      await ack(
        "g",
        first.messages.map((m) => m.receipt),
      );
      const second = await lease("g", t0 + 8);
      assert.deepEqual(bodies(second.messages), ["a"]);
      await ack(
        "g",
        second.messages.map((m) => m.receipt),
      );
      await assertDepthCounted("g", t0 + 8);
    });

    test("a keyless message in flight holds nothing back; a FIFO group's does", async () => {
      await create("dlq");
      await create("a");
      await send("dlq", [fromQueue("a", "1"), fromQueue("a", "2")]);
      await lease("dlq", t0, 1);
      const standard = await store.queueMove({
        queue: "dlq",
        to: null,
        max: 10,
        now: t0,
        policies: policies("a"),
      });
      assert.deepEqual([standard.moved, standard.held], [1, 0]);
      await create("fdlq", "fifo");
      await send("fdlq", [fromQueue("a", "x1"), fromQueue("a", "x2"), fromQueue("a", "y1", "y")]);
      await lease("fdlq", t0, 1); // x1, the head of the keyless group
      const fifo = await store.queueMove({
        queue: "fdlq",
        to: null,
        max: 10,
        now: t0,
        policies: policies("a"),
      });
      assert.equal(fifo.moved, 1, "only y1 moves");
      const inA = await store.queuePeek({ queue: "a", state: "available", limit: 10, now: t0 });
      assert.deepEqual(bodies(inA), ["2", "y1"]);
    });

    test("a move keeps the message's id, headers and priority; `to` overrides the source", async () => {
      await create("dlq");
      await create("elsewhere");
      const original = { ...fromQueue("a", "1"), priority: 4 };
      await send("dlq", [original]);
      const result = await store.queueMove({
        queue: "dlq",
        to: "elsewhere",
        max: 10,
        now: t0,
        policies: policies("elsewhere"),
      });
      assert.equal(result.moved, 1);
      const [moved] = await store.queuePeek({ queue: "elsewhere", state: "available", limit: 10, now: t0 });
      assert.equal(moved?.id, original.id);
      assert.equal(moved?.priority, 4);
      assert.equal(moved?.headers["x-original-queue"], "a");
    });

    test("a move stops before the first message it cannot move, and keeps the rest in order", async () => {
      await create("dlq");
      await create("a");
      await send("dlq", [
        fromQueue("a", "1"),
        message({ body: "no-target", headers: {} }),
        fromQueue("a", "3"),
      ]);
      const stopped = await store.queueMove({
        queue: "dlq",
        to: null,
        max: 10,
        now: t0,
        policies: policies("a"),
      });
      assert.equal(stopped.moved, 1);
      assert.equal(stopped.stoppedBy?.code, "invalid_request");
      const missing = await store.queueMove({
        queue: "dlq",
        to: "gone",
        max: 10,
        now: t0,
        policies: policies("gone"),
      });
      assert.deepEqual([missing.moved, missing.stoppedBy?.code], [0, "queue_not_found"]);
      await create("full");
      const full = {
        dedupWindowMs: 0,
        overflow: { maxDepth: 1, policy: "reject" as const, deadLetter: null },
      };
      const refused = await store.queueMove({
        queue: "dlq",
        to: "full",
        max: 10,
        now: t0,
        policies: new Map([["full", full]]),
      });
      assert.deepEqual([refused.moved, refused.stoppedBy?.code], [1, "queue_full"]);
      const left = await store.queuePeek({ queue: "dlq", state: "available", limit: 10, now: t0 });
      assert.deepEqual(bodies(left), ["3"]);
    });

    test("moving into a FIFO queue joins groups in order; moving out of one hands groups on", async () => {
      await create("fdlq", "fifo");
      await create("f", "fifo");
      await send("fdlq", [fromQueue("f", "k1", "k"), fromQueue("f", "k2", "k")]);
      await send("f", [message({ key: "k", body: "k0" })]);
      assert.equal(
        (await store.queueMove({ queue: "fdlq", to: null, max: 1, now: t0, policies: policies("f") })).moved,
        1,
      );
      assert.deepEqual(bodies((await lease("fdlq", t0)).messages), ["k2"], "k2 became the head in fdlq");
      const order: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { messages } = await lease("f", t0);
        order.push(...bodies(messages));
        await ack(
          "f",
          messages.map((m) => m.receipt),
        );
      }
      assert.deepEqual(order, ["k0", "k1"]);
    });
  });
}
