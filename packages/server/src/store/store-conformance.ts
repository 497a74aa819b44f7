/**
 * The Store contract as one suite, run unchanged against every implementation (the River pattern:
 * one test body, many drivers). A store passes only if every guarantee the broker relies on holds.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { NewMessage } from "../model/message.js";
import { deadLetterHeaders, noSendPolicy, type SendPolicy } from "../model/policies.js";
import { attributes, message, rejectsWith, t0 } from "./conformance-fixtures.js";
import type { Store } from "./store.js";
import { exerciseQueuePolicies } from "./store-conformance-policies.js";

export interface StoreFactory {
  name: string;
  /** A fresh, empty store. */
  create(): Promise<Store>;
}

export function exerciseStore(factory: StoreFactory): void {
  describe(`Store conformance: ${factory.name}`, () => {
    let store: Store;
    /** One queue's send, with no policy unless given; answers the ids that stand for the messages. */
    const send = async (params: {
      queue: string;
      messages: NewMessage[];
      policy?: SendPolicy;
      now?: number;
    }) => {
      const [result] = await store.queueSendMany({
        sends: [{ queue: params.queue, messages: params.messages, policy: params.policy ?? noSendPolicy }],
        now: params.now ?? t0,
      });
      return result?.ids ?? [];
    };
    const lease = (
      queue: string,
      now: number,
      max = 10,
      extra: { deadLetterQueue?: string; maxDeliveries?: number } = {},
    ) =>
      store.queueLease({
        queue,
        max,
        now,
        leaseExpiresAt: now + 30_000,
        expiredBefore: now - attributes.retentionMs,
        inFlightMax: 1000,
        deadLetter: extra.deadLetterQueue
          ? { queues: [extra.deadLetterQueue], maxDeliveries: extra.maxDeliveries ?? 1 }
          : null,
      });

    beforeEach(async () => {
      store = await factory.create();
      await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
    });
    afterEach(async () => {
      await store.close();
    });

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

    describe("send and depth", () => {
      test("send to a missing queue stores nothing", async () => {
        await rejectsWith(send({ queue: "nope", messages: [message()] }), "queue_not_found");
      });

      test("depth counts available, delayed and in flight, and the oldest publish time", async () => {
        await send({
          queue: "q",
          messages: [
            message({ publishedAt: t0 }),
            message({ publishedAt: t0 + 1 }),
            message({ publishedAt: t0 + 2, visibleAt: t0 + 20_000 }),
          ],
        });
        await lease("q", t0 + 10, 1);
        assert.deepEqual(await store.queueDepth({ name: "q", now: t0 + 10 }), {
          available: 1,
          delayed: 1,
          inFlight: 1,
          corrupt: 0,
          oldestPublishedAt: t0,
        });
        assert.deepEqual(await store.queueDepth({ name: "q", now: t0 + 20_000 }), {
          available: 2,
          delayed: 0,
          inFlight: 1,
          corrupt: 0,
          oldestPublishedAt: t0,
        });
      });

      test("the listing with depths gives every queue, by name, with its record and depth as read alone", async () => {
        await store.queueUpsert({ name: "b-empty", kind: "standard", attributes, now: t0 });
        await store.queueUpsert({ name: "a-other", kind: "fifo", attributes, now: t0 });
        await send({
          queue: "q",
          messages: [
            message({ publishedAt: t0 + 3 }),
            message({ publishedAt: t0 + 4 }),
            message({ publishedAt: t0 + 5, visibleAt: t0 + 20_000 }),
          ],
        });
        await send({ queue: "a-other", messages: [message({ publishedAt: t0 + 1, key: "k" })] });
        await lease("q", t0 + 10, 1);
        for (const now of [t0 + 10, t0 + 20_000]) {
          const listed = await store.queueListWithDepth({ now });
          assert.deepEqual(
            listed.map(({ queue }) => queue.name),
            ["a-other", "b-empty", "q"],
          );
          for (const { queue, depth } of listed) {
            assert.deepEqual(queue, await store.queueGet({ name: queue.name }), `${queue.name}: record`);
            assert.deepEqual(
              depth,
              await store.queueDepth({ name: queue.name, now }),
              `${queue.name}: depth`,
            );
          }
        }
        const [other, empty, q] = (await store.queueListWithDepth({ now: t0 + 10 })).map(
          ({ depth }) => depth,
        );
        assert.deepEqual(other, {
          available: 1,
          delayed: 0,
          inFlight: 0,
          corrupt: 0,
          oldestPublishedAt: t0 + 1,
        });
        assert.deepEqual(empty, {
          available: 0,
          delayed: 0,
          inFlight: 0,
          corrupt: 0,
          oldestPublishedAt: null,
        });
        assert.deepEqual(q, { available: 1, delayed: 1, inFlight: 1, corrupt: 0, oldestPublishedAt: t0 + 3 });

        // Pages: the names after `after`, at most `limit`, and together the whole listing.
        const names = async (page: { after?: string; limit?: number }) =>
          (await store.queueListWithDepth({ now: t0 + 10, ...page })).map(({ queue }) => queue.name);
        assert.deepEqual(await names({ limit: 2 }), ["a-other", "b-empty"]);
        assert.deepEqual(await names({ after: "b-empty", limit: 2 }), ["q"]);
        assert.deepEqual(await names({ after: "a" }), ["a-other", "b-empty", "q"]);
        assert.deepEqual(await names({ after: "q" }), []);
        const [paged] = await store.queueListWithDepth({ now: t0 + 10, after: "b-empty", limit: 1 });
        assert.deepEqual(paged?.depth, q, "a page's depth is the listing's");
      });
    });

    describe("leases", () => {
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
        assert.equal(
          (await lease("q", t0 + 10, 5)).messages.length,
          0,
          "leased messages are not leased twice",
        );
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
      const sendHandingOff = async (
        queue: string,
        messages: NewMessage[],
        handoff: { max: number; inFlightMax?: number },
        policy: SendPolicy = noSendPolicy,
      ) => {
        const [result] = await store.queueSendMany({
          sends: [
            {
              queue,
              messages,
              policy,
              handoff: {
                max: handoff.max,
                leaseExpiresAt: t0 + 30_000,
                inFlightMax: handoff.inFlightMax ?? 1000,
              },
            },
          ],
          now: t0,
        });
        return result?.leased ?? [];
      };

      test("a send hands off its first messages visible now, higher priority first, leased as it writes", async () => {
        const leased = await sendHandingOff(
          "q",
          [
            message({ body: "low" }),
            message({ body: "delayed", priority: 9, visibleAt: t0 + 5_000 }),
            message({ body: "high", priority: 5 }),
            message({ body: "later" }),
          ],
          { max: 2 },
        );
        assert.deepEqual(
          leased.map((m) => [m.body.toString(), m.deliveryCount, m.firstDeliveredAt, m.visibleAt]),
          [
            ["high", 1, t0, t0 + 30_000],
            ["low", 1, t0, t0 + 30_000],
          ],
        );
        const depth = await store.queueDepth({ name: "q", now: t0 });
        assert.deepEqual([depth.available, depth.delayed, depth.inFlight], [1, 1, 2]);
        assert.deepEqual(
          (await lease("q", t0)).messages.map((m) => m.body.toString()),
          ["later"],
          "a lease takes only what the hand-off left",
        );
        const acked = await store.queueAck({ queue: "q", receipts: leased.map((m) => m.receipt) });
        assert.deepEqual(acked, [{ ok: true }, { ok: true }]);
        const counters = (await store.queueGet({ name: "q" }))?.counters;
        assert.deepEqual(
          [counters?.published, counters?.delivered, counters?.acked],
          [4, 3, 2],
          "handed-off messages count as delivered",
        );
      });

      test("bodies of many lengths in one batch keep their bytes and their order, sent, handed off or deduplicated", async () => {
        // Lengths around the edges of a store's packing of a batch: empty, one byte, odd, large.
        const lengths = [0, 1, 7, 1_000, 65_537, 0, 3];
        const bodies = lengths.map((length, i) =>
          Buffer.from(Array.from({ length }, (_, j) => (i * 131 + j * 7) % 256)),
        );
        const messages = () =>
          bodies.map((body) => ({ ...message(), body, contentType: "application/octet-stream" }));
        await send({ queue: "q", messages: messages() });
        const leased = (await lease("q", t0, 20)).messages;
        assert.deepEqual(
          leased.map((m) => Buffer.from(m.body).toString("hex")),
          bodies.map((body) => body.toString("hex")),
          "sent, then leased",
        );
        const handed = await sendHandingOff("q", messages(), { max: 4 });
        const rest = (await lease("q", t0, 20)).messages;
        assert.deepEqual(
          [...handed, ...rest].map((m) => Buffer.from(m.body).toString("hex")),
          bodies.map((body) => body.toString("hex")),
          "handed off (the first four), then leased",
        );
        // With dedupIds a send writes in a transaction of its own (the PostgreSQL store's other insert).
        const deduplicated = messages().map((m, i) => ({ ...m, dedupId: `d${i}` }));
        await send({ queue: "q", messages: deduplicated, policy: { dedupWindowMs: 60_000, overflow: null } });
        assert.deepEqual(
          (await lease("q", t0, 20)).messages.map((m) => Buffer.from(m.body).toString("hex")),
          bodies.map((body) => body.toString("hex")),
          "sent with dedupIds, then leased",
        );
      });

      test("a handed-off lease ends as any lease: the message comes back and the old receipt is stale", async () => {
        const [handed] = await sendHandingOff("q", [message({ body: "a" })], { max: 1 });
        assert.ok(handed);
        assert.equal((await lease("q", t0 + 29_999)).messages.length, 0, "in flight until its lease ends");
        const [again] = (await lease("q", t0 + 30_000)).messages;
        assert.deepEqual([again?.body.toString(), again?.deliveryCount], ["a", 2]);
        assert.deepEqual(await store.queueAck({ queue: "q", receipts: [handed.receipt] }), [
          { error: "stale_receipt" },
        ]);
      });

      test("a hand-off stays within the in-flight ceiling", async () => {
        await send({ queue: "q", messages: [message(), message()] });
        assert.equal((await lease("q", t0)).messages.length, 2);
        const leased = await sendHandingOff("q", [message(), message()], { max: 10, inFlightMax: 3 });
        assert.equal(leased.length, 1, "room for one more in flight");
        assert.equal((await store.queueDepth({ name: "q", now: t0 })).available, 1);
      });

      test("a hand-off smaller than the ceiling still counts what is in flight once the depth could reach it", async () => {
        // Depth 4 (2 in flight), ceiling 3: a hand-off of 1 fits the ceiling but not beside the depth.
        await send({ queue: "q", messages: [message(), message(), message(), message()] });
        assert.equal((await lease("q", t0, 2)).messages.length, 2);
        const handed = await sendHandingOff("q", [message()], { max: 1, inFlightMax: 3 });
        assert.equal(handed.length, 1, "room for one more in flight");
        const refused = await sendHandingOff("q", [message()], { max: 1, inFlightMax: 3 });
        assert.equal(refused.length, 0, "the ceiling is reached");
      });

      test("concurrent sends, some handing off: each answers its own ids and what it leased, under its own lease", async () => {
        // On PostgreSQL the first runs alone and the other three wait behind it and share one statement.
        const plan = [
          { bodies: ["a1", "a2", "a3"], handoff: { max: 2, leaseExpiresAt: t0 + 10_000 } },
          { bodies: ["b1"], handoff: undefined },
          { bodies: ["c1", "c2"], handoff: { max: 5, leaseExpiresAt: t0 + 20_000 } },
          { bodies: ["d1", "d2"], handoff: { max: 1, leaseExpiresAt: t0 + 30_000 } },
        ];
        const sends = plan.map(({ bodies, handoff }) => ({
          queue: "q",
          messages: bodies.map((body) => message({ body })),
          policy: noSendPolicy,
          ...(handoff ? { handoff: { ...handoff, inFlightMax: 1000 } } : {}),
        }));
        const outcomes = await Promise.all(
          sends.map((one) => store.queueSendMany({ sends: [one], now: t0 })),
        );
        outcomes.forEach(([outcome], i) => {
          assert.deepEqual(
            outcome?.ids,
            sends[i]?.messages.map((m) => m.id),
            `send ${i} got its own ids`,
          );
        });
        assert.deepEqual(
          outcomes.map(([outcome]) =>
            outcome?.leased.map((m) => [m.body.toString(), m.visibleAt, m.deliveryCount]),
          ),
          [
            [
              ["a1", t0 + 10_000, 1],
              ["a2", t0 + 10_000, 1],
            ],
            [],
            [
              ["c1", t0 + 20_000, 1],
              ["c2", t0 + 20_000, 1],
            ],
            [["d1", t0 + 30_000, 1]],
          ],
        );
        assert.deepEqual(
          (await lease("q", t0, 10)).messages.map((m) => m.body.toString()),
          ["a3", "b1", "d2"],
          "what no hand-off took is available",
        );
        const receipts = outcomes.flatMap(([outcome]) => outcome?.leased.map((m) => m.receipt) ?? []);
        assert.deepEqual(
          await store.queueAck({ queue: "q", receipts }),
          receipts.map(() => ({ ok: true })),
          "each handed-off receipt names its lease",
        );
      });

      test("no hand-off into a FIFO queue, nor for a send with a dedupId or an overflow policy", async () => {
        await store.queueUpsert({ name: "f", kind: "fifo", attributes, now: t0 });
        assert.deepEqual(await sendHandingOff("f", [message({ key: "k" })], { max: 10 }), []);
        const window = { dedupWindowMs: 60_000, overflow: null };
        assert.deepEqual(await sendHandingOff("q", [message({ dedupId: "d" })], { max: 10 }, window), []);
        const overflow: SendPolicy = {
          dedupWindowMs: 0,
          overflow: { maxDepth: 100, policy: "reject", deadLetter: null },
        };
        assert.deepEqual(await sendHandingOff("q", [message()], { max: 10 }, overflow), []);
        assert.equal((await lease("q", t0)).messages.length, 2, "their messages wait for a lease");
        assert.equal((await lease("f", t0)).messages.length, 1);
      });

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
        assert.equal(
          (await lease("q", t0 + 60_000)).messages.length,
          0,
          "still leased after the original end",
        );
        const [again] = (await lease("q", t0 + 90_000)).messages;
        assert.ok(again);
        assert.deepEqual(
          await store.queueExtend({ queue: "q", receipts: [leased.receipt], leaseExpiresAt: t0 + 1e6 }),
          [{ error: "stale_receipt" }],
        );
      });
    });

    describe("nack and dead letters", () => {
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

    describe("peek, purge, retention, schedule", () => {
      test("peek reads each state without leasing", async () => {
        await send({
          queue: "q",
          messages: [message(), message(), message({ visibleAt: t0 + 50_000 })],
        });
        await lease("q", t0, 1);
        const peek = async (state: "available" | "delayed" | "in-flight") =>
          (await store.queuePeek({ queue: "q", state, limit: 10, now: t0 })).length;
        assert.deepEqual(
          [await peek("available"), await peek("delayed"), await peek("in-flight")],
          [1, 1, 1],
        );
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

    describe("exchanges and copies", () => {
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
  });
  exerciseQueuePolicies(factory);
}
