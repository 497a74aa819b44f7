/**
 * The Store contract for a stream's share groups (model/stream-share.ts), on the times the calls name:
 * per-record leases by receipt that two consumers never share, redelivery once a lease ends, ack,
 * nack, extend, the in-flight bound, the pending listing, and a record nacked past maxDeliveries
 * copied to the dead-letter queue once while the log keeps it. Part of the Store conformance suite
 * (streams.ts registers it).
 */
import assert from "node:assert/strict";
import type { ShareAttributes } from "../../model/stream-share.js";
import { attributes, rejectsWith, t0 } from "../conformance-fixtures.js";
import { bodyText, streamRecord, type streamSuite } from "./stream-harness.js";

const leaseMs = 30_000;
const shareAttributes: ShareAttributes = {
  visibilityTimeoutMs: leaseMs,
  deadLetter: { queue: "dlq", maxDeliveries: 2 },
  start: "earliest",
};

export function streamShareTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append, contents } = suite;
  let ids = 0;
  const newId = () => `dl-${++ids}`;
  const share = async (extra: Partial<ShareAttributes> = {}) => {
    await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
    return store.streamShareUpsert({
      name: "s",
      group: "sh",
      attributes: { ...shareAttributes, ...extra },
      now: t0,
    });
  };
  const receive = (now = t0, max = 10, inFlightMax = 1000) =>
    store.streamShareReceive({ name: "s", group: "sh", max, leaseMs, inFlightMax, newId, now });
  const texts = (records: { body: Buffer | string; deliveries: number }[]) =>
    records.map((record) => [bodyText(record.body), record.deliveries]);
  const codes = (results: ({ ok: true } | { error: string })[]) =>
    results.map((result) => ("ok" in result ? "ok" : result.error));
  const fill = async () => {
    await create("s", 2);
    await append([0, 1, 0, 1].map((partition, i) => streamRecord(partition, { body: `r${i}` })));
  };

  streamTest("a share group needs its stream and its dead-letter queue", async () => {
    await create("s");
    await rejectsWith(
      store.streamShareUpsert({ name: "s", group: "sh", attributes: shareAttributes, now: t0 }),
      "dead_letter_queue_not_found",
    );
    const { created, share: info } = await share();
    assert.deepEqual([created, info.inFlight, info.counters.delivered], [true, 0, 0]);
    assert.equal((await share({ visibilityTimeoutMs: 5 })).created, false);
    await rejectsWith(
      store.streamShareReceive({
        name: "s",
        group: "nope",
        max: 1,
        leaseMs,
        inFlightMax: 10,
        newId,
        now: t0,
      }),
      "group_not_found",
    );
  });

  streamTest(
    "two consumers never hold one record; a lease that ends makes it deliverable again",
    async () => {
      await fill();
      await share();
      const first = await receive(t0, 3);
      const second = await receive(t0 + 1, 3);
      assert.deepEqual(texts(first.records), [
        ["r0", 1],
        ["r2", 1],
        ["r1", 1],
      ]);
      assert.deepEqual(texts(second.records), [["r3", 1]], "only what nobody holds");
      assert.deepEqual((await receive(t0 + 2)).records, []);
      const [r0, r2] = first.records;
      assert.deepEqual(
        codes(
          await store.streamShareAck({
            name: "s",
            group: "sh",
            receipts: [r0?.receipt as string],
            now: t0 + 3,
          }),
        ),
        ["ok"],
      );
      const extended = await store.streamShareExtend({
        name: "s",
        group: "sh",
        receipts: [r2?.receipt as string],
        leaseMs,
        now: t0 + leaseMs - 1,
      });
      assert.deepEqual(codes(extended), ["ok"]);
      // After t0 + 1 + leaseMs the leases of r1 and r3 have ended; r2's was extended; r0 was acked.
      const again = await receive(t0 + leaseMs + 1);
      assert.deepEqual(texts(again.records), [
        ["r1", 2],
        ["r3", 2],
      ]);
      const stale = await store.streamShareAck({
        name: "s",
        group: "sh",
        receipts: [first.records[2]?.receipt as string, "junk"],
        now: t0 + leaseMs + 1,
      });
      assert.deepEqual(codes(stale), ["stale_receipt", "invalid_receipt"]);
      const { pending, share: info } = await store.streamSharePending({
        name: "s",
        group: "sh",
        limit: 10,
        now: t0 + leaseMs + 1,
      });
      assert.deepEqual(
        pending.map((p) => [p.partition, p.offset, p.deliveries, p.leased]),
        [
          [0, 1, 1, true],
          [1, 0, 2, true],
          [1, 1, 2, true],
        ],
      );
      assert.deepEqual([info.inFlight, info.counters.acked, info.counters.delivered], [3, 1, 6]);
    },
  );

  streamTest(
    "a record nacked past maxDeliveries goes to the dead-letter queue once; the log keeps it",
    async () => {
      await create("s");
      await append([streamRecord(0, { body: "poison", headers: { h: "1" } })]);
      await share();
      const nackAll = async (now: number) => {
        const { records } = await receive(now);
        return store.streamShareNack({
          name: "s",
          group: "sh",
          receipts: records.map((r) => r.receipt),
          delayMs: 0,
          newId,
          now,
        });
      };
      assert.deepEqual(await nackAll(t0), { results: [{ ok: true }], deadLettered: 0 });
      assert.deepEqual(await nackAll(t0 + 1), { results: [{ ok: true }], deadLettered: 1 });
      assert.deepEqual((await receive(t0 + 2)).records, [], "it is not delivered again");
      const { messages } = await store.queueLease({
        queue: "dlq",
        max: 10,
        now: t0 + 3,
        leaseExpiresAt: t0 + 60_000,
        expiredBefore: 0,
        inFlightMax: 100,
        deadLetter: null,
      });
      assert.equal(messages.length, 1, "one copy");
      assert.equal(bodyText(messages[0]?.body as Buffer), "poison");
      assert.deepEqual(
        [
          messages[0]?.headers.h,
          messages[0]?.headers["x-original-stream"],
          messages[0]?.headers["x-delivery-count"],
        ],
        ["1", "s", "2"],
      );
      const { share: info } = await store.streamSharePending({
        name: "s",
        group: "sh",
        limit: 10,
        now: t0 + 3,
      });
      assert.deepEqual([info.counters.deadLettered, info.counters.nacked, info.inFlight], [1, 2, 0]);
      assert.deepEqual(await contents(0), [[0, "poison"]], "the stream still holds it");
    },
  );

  streamTest(
    "a record whose leases keep ending is dead-lettered at the receive past maxDeliveries",
    async () => {
      await create("s");
      await append([streamRecord(0, { body: "slow" })]);
      await share();
      assert.equal((await receive(t0)).records.length, 1);
      assert.equal((await receive(t0 + leaseMs)).records[0]?.deliveries, 2);
      const third = await receive(t0 + 2 * leaseMs);
      assert.deepEqual([third.records.length, third.deadLettered], [0, 1]);
      assert.equal((await store.queueDepth({ name: "dlq", now: t0 + 2 * leaseMs })).available, 1);
    },
  );

  streamTest("new records are leased only while fewer than inFlightMax are in flight", async () => {
    await fill();
    await share({ deadLetter: null });
    assert.equal((await receive(t0, 10, 2)).records.length, 2);
    assert.equal((await receive(t0, 10, 2)).records.length, 0);
    // Without a dead-letter queue a record is delivered again for ever.
    for (let round = 1; round <= 3; round++)
      assert.equal((await receive(t0 + round * leaseMs, 10, 2)).records[0]?.deliveries, round + 1);
  });
}
