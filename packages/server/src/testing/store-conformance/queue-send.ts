/**
 * The Store contract for sends: depth after a send, and a send that hands off its first messages as
 * leases (the fast path to a waiting consumer).
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { NewMessage } from "../../model/message.js";
import { noSendPolicy, type SendPolicy } from "../../model/policies.js";
import { attributes, message, rejectsWith, t0 } from "../conformance-fixtures.js";
import type { QueueSuite } from "./harness.js";

/** Sends and the depth they leave, alone and in the listing with depths. */
export function sendAndDepthTests(suite: QueueSuite): void {
  // Over 80 lines: one describe block of short tests, kept whole so their names keep its prefix.
  const { store, send, lease } = suite;
  describe("send and depth", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
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
          assert.deepEqual(depth, await store.queueDepth({ name: queue.name, now }), `${queue.name}: depth`);
        }
      }
      const [other, empty, q] = (await store.queueListWithDepth({ now: t0 + 10 })).map(({ depth }) => depth);
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
}

/** Sends that hand off leases; part of the "leases" section, so their names keep its prefix. */
export function sendHandOffTests(suite: QueueSuite): void {
  // Over 80 lines: a run of short tests that sits inside the "leases" describe, kept in its order.
  const { store, send, lease } = suite;
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
    const outcomes = await Promise.all(sends.map((one) => store.queueSendMany({ sends: [one], now: t0 })));
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
}
