/**
 * The Store contract for what goes beyond a plain queue: FIFO groups, priorities, deduplication,
 * overflow, at-most-once leases and redrive moves. Part of the conformance suite (exerciseStore runs
 * it), so every store implementation passes the same tests.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { MessageState, NewMessage } from "../model/message.js";
import { noSendPolicy, type SendPolicy } from "../model/policies.js";
import { type DeadLetterRoute, depthOf, type QueueAttributes, type QueueKind } from "../model/queue.js";
import { attributes, message, rejectsWith, t0 } from "./conformance-fixtures.js";
import type { Store } from "./store.js";
import type { StoreFactory } from "./store-conformance.js";

export function exerciseQueuePolicies(factory: StoreFactory): void {
  describe(`Store conformance, queue policies: ${factory.name}`, () => {
    let store: Store;

    const create = (name: string, kind: QueueKind = "standard", extra: Partial<QueueAttributes> = {}) =>
      store.queueUpsert({ name, kind, attributes: { ...attributes, ...extra }, now: t0 });
    const send = async (
      queue: string,
      messages: NewMessage[],
      policy: SendPolicy = noSendPolicy,
      now = t0,
    ) => {
      const [result] = await store.queueSendMany({ sends: [{ queue, messages, policy }], now });
      return result?.ids ?? [];
    };
    const lease = (
      queue: string,
      now: number,
      max = 10,
      extra: { deadLetter?: DeadLetterRoute; autoAck?: boolean } = {},
    ) =>
      store.queueLease({
        queue,
        max,
        now,
        leaseExpiresAt: now + 30_000,
        expiredBefore: now - attributes.retentionMs,
        inFlightMax: 1000,
        deadLetter: extra.deadLetter ?? null,
        ...(extra.autoAck !== undefined && { autoAck: extra.autoAck }),
      });
    const bodies = (messages: { body: Buffer | string }[]) => messages.map((m) => m.body.toString());
    const ack = (queue: string, receipts: (string | undefined)[]) =>
      store.queueAck({ queue, receipts: receipts.map((r) => r ?? "missing") });
    const nack = (
      queue: string,
      receipts: (string | undefined)[],
      now: number,
      deadLetter: DeadLetterRoute | null = null,
    ) =>
      store.queueNack({
        queue,
        receipts: receipts.map((r) => r ?? "missing"),
        now,
        retryDelayMs: () => 0,
        deadLetter,
      });
    /**
     * Every message of the queue is accounted for by its counters (DESIGN.md §1: counted removal): the
     * rows read back in each state add up to the counters' depth, and queueDepth and the listing with
     * depths report those rows.
     */
    const assertDepthCounted = async (queue: string, now = t0) => {
      const record = await store.queueGet({ name: queue });
      assert.ok(record);
      const peeked = async (state: MessageState) =>
        await store.queuePeek({ queue, state, limit: 10_000, now });
      // A message marked corrupt is visible and unleased, so peek lists it as available, flagged.
      const visible = await peeked("available");
      const rows = {
        available: visible.filter((message) => !message.corrupt).length,
        delayed: (await peeked("delayed")).length,
        inFlight: (await peeked("in-flight")).length,
        corrupt: visible.filter((message) => message.corrupt).length,
      };
      assert.equal(
        depthOf(record.counters),
        rows.available + rows.delayed + rows.inFlight + rows.corrupt,
        `${queue} counted`,
      );
      const { oldestPublishedAt: _, ...depth } = await store.queueDepth({ name: queue, now });
      assert.deepEqual(depth, rows, `${queue}: its depth by state is its rows by state`);
      const listed = (await store.queueListWithDepth({ now })).find((entry) => entry.queue.name === queue);
      const { oldestPublishedAt: __, ...listedDepth } = listed?.depth ?? { oldestPublishedAt: null };
      assert.deepEqual(listedDepth, rows, `${queue}: the listing's depth by state is its rows by state`);
    };

    beforeEach(async () => {
      store = await factory.create();
    });
    afterEach(async () => {
      await store.close();
    });

    describe("FIFO groups", () => {
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
        const [a1, b1, n1] = ["a1", "b1", "n1"].map((b) =>
          first.messages.find((m) => m.body.toString() === b),
        );
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

    describe("overflow", () => {
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

    describe("redrive moves", () => {
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
          (await store.queueMove({ queue: "fdlq", to: null, max: 1, now: t0, policies: policies("f") }))
            .moved,
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
  });
}
