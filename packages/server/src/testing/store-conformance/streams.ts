/**
 * The Store contract for streams (StreamStore, DESIGN.md §5): streams whose partitions grow and never
 * shrink, contiguous offsets per partition, dedupIds within a window, reads from an offset or a time
 * that refuse what is not retained, retention by age, bytes and count, and bindings from exchanges
 * whose publishes append in the send's transaction.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe } from "node:test";
import { HopperError } from "../../errors.js";
import { noSendPolicy } from "../../model/policies.js";
import { zeroStreamCounters } from "../../model/stream.js";
import { attributes, message, rejectsWith, t0 } from "../conformance-fixtures.js";
import type { StoreFactory } from "./harness.js";
import { streamGroupTests } from "./stream-groups.js";
import { bodyText, streamAttributes, streamRecord, streamSuite } from "./stream-harness.js";
import { streamShareTests } from "./stream-shares.js";

/** Every stream section, against the stores `factory` opens, a fresh one per test. */
export function streamTests(factory: StoreFactory): void {
  describe(`Store conformance, streams: ${factory.name}`, () => {
    const suite = streamSuite(factory);
    streamRecordTests(suite);
    streamAppendTests(suite);
    streamReadTests(suite);
    streamRetentionTests(suite);
    streamBindingTests(suite);
    streamGroupTests(suite);
    streamShareTests(suite);
  });
}

async function rejectsWithDetails(
  promise: Promise<unknown>,
  code: string,
  details: Record<string, unknown>,
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof HopperError, `a HopperError, not ${String(error)}`);
    assert.equal(error.code, code);
    assert.deepEqual(error.details, { ...error.details, ...details });
    return true;
  });
}

function streamRecordTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append, record } = suite;

  streamTest("upsert creates empty partitions; an update grows them and keeps createdAt", async () => {
    const created = await store.streamUpsert({
      name: "s",
      attributes: streamAttributes,
      partitions: 2,
      now: t0,
    });
    assert.equal(created.created, true);
    assert.deepEqual(created.stream, {
      name: "s",
      attributes: streamAttributes,
      createdAt: t0,
      counters: zeroStreamCounters,
      partitions: [
        { partition: 0, oldest: 0, next: 0, records: 0, bytes: 0 },
        { partition: 1, oldest: 0, next: 0, records: 0, bytes: 0 },
      ],
    });
    await append([streamRecord(1, { body: Buffer.from("abc") })]);
    const changed = { ...streamAttributes, retentionRecords: 5 };
    const updated = await store.streamUpsert({ name: "s", attributes: changed, partitions: 4, now: t0 + 5 });
    assert.equal(updated.created, false);
    assert.deepEqual(
      [updated.stream.createdAt, updated.stream.attributes, updated.stream.partitions.length],
      [t0, changed, 4],
    );
    assert.deepEqual(updated.stream.partitions[1], {
      partition: 1,
      oldest: 0,
      next: 1,
      records: 1,
      bytes: 3,
    });
    assert.deepEqual(updated.stream.partitions[3], {
      partition: 3,
      oldest: 0,
      next: 0,
      records: 0,
      bytes: 0,
    });
  });

  streamTest("fewer partitions than the stream has is partitions_shrink, and nothing changes", async () => {
    await create("s", 3);
    const changed = { ...streamAttributes, dedupWindowMs: 0 };
    await rejectsWith(
      store.streamUpsert({ name: "s", attributes: changed, partitions: 2, now: t0 }),
      "partitions_shrink",
    );
    const kept = await record();
    assert.deepEqual([kept.partitions.length, kept.attributes], [3, streamAttributes]);
  });

  streamTest("list is sorted by name; get of a missing stream is undefined", async () => {
    await create("orders");
    await create("audit", 2);
    assert.deepEqual(
      (await store.streamList()).map((stream) => [stream.name, stream.partitions.length]),
      [
        ["audit", 2],
        ["orders", 1],
      ],
    );
    assert.equal(await store.streamGet({ name: "nope" }), undefined);
  });

  streamTest("delete answers the records removed; created again the stream starts at offset 0", async () => {
    await create("s", 2);
    await append([streamRecord(0), streamRecord(1), streamRecord(1)]);
    assert.deepEqual(await store.streamDelete({ name: "s" }), { removed: 3 });
    assert.equal(await store.streamGet({ name: "s" }), undefined);
    await rejectsWith(store.streamDelete({ name: "s" }), "stream_not_found");
    await create("s", 2);
    assert.deepEqual(await append([streamRecord(1, { body: "12345678" })]), [
      { partition: 1, offset: 0, duplicate: false },
    ]);
    assert.deepEqual((await record()).counters, { ...zeroStreamCounters, appended: 1, appendedBytes: 8 });
  });
}

function streamAppendTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append, contents, record } = suite;

  streamTest("offsets are contiguous per partition, in the order of the call and across calls", async () => {
    await create("s", 2);
    const first = await append([streamRecord(0), streamRecord(1), streamRecord(0)]);
    assert.deepEqual(first, [
      { partition: 0, offset: 0, duplicate: false },
      { partition: 1, offset: 0, duplicate: false },
      { partition: 0, offset: 1, duplicate: false },
    ]);
    const second = await append([streamRecord(0), streamRecord(1)]);
    assert.deepEqual(
      second.map((result) => [result.partition, result.offset]),
      [
        [0, 2],
        [1, 1],
      ],
    );
    const { partitions, counters } = await record();
    assert.deepEqual(
      partitions.map((p) => [p.oldest, p.next, p.records]),
      [
        [0, 3, 3],
        [0, 2, 2],
      ],
    );
    assert.equal(counters.appended, 5);
  });

  streamTest("a record for a partition the stream lacks refuses the whole call", async () => {
    await create("s", 2);
    await rejectsWith(
      store.streamAppend({ name: "s", records: [streamRecord(0), streamRecord(2)], now: t0 }),
      "partition_not_found",
    );
    await rejectsWith(
      store.streamAppend({ name: "s", records: [streamRecord(-1)], now: t0 }),
      "partition_not_found",
    );
    assert.deepEqual(await contents(0), []);
    assert.equal((await record()).counters.appended, 0);
    await rejectsWith(
      store.streamAppend({ name: "nope", records: [streamRecord(0)], now: t0 }),
      "stream_not_found",
    );
  });

  streamTest("a dedupId within the window answers the first append's place and writes nothing", async () => {
    await create("s", 2);
    const [first] = await append([streamRecord(1, { dedupId: "d1" })]);
    const again = await append(
      [
        streamRecord(0, { dedupId: "d1" }),
        streamRecord(0, { dedupId: "d2" }),
        streamRecord(0, { dedupId: "d2" }),
      ],
      {
        now: t0 + 60_000,
      },
    );
    assert.deepEqual(first, { partition: 1, offset: 0, duplicate: false });
    assert.deepEqual(again, [
      { partition: 1, offset: 0, duplicate: true },
      { partition: 0, offset: 0, duplicate: false },
      { partition: 0, offset: 0, duplicate: true },
    ]);
    const { partitions, counters } = await record();
    assert.deepEqual([partitions[0]?.next, partitions[1]?.next], [1, 1]);
    assert.deepEqual([counters.appended, counters.duplicates], [2, 2]);
    // Past the window the id is new again.
    const late = await append([streamRecord(1, { dedupId: "d1" })], { now: t0 + 10 * 60_000 });
    assert.deepEqual(late, [{ partition: 1, offset: 1, duplicate: false }]);
  });

  streamTest("with a dedup window of 0 dedupIds are not remembered", async () => {
    await create("s", 1, { dedupWindowMs: 0 });
    const results = await append([streamRecord(0, { dedupId: "d" }), streamRecord(0, { dedupId: "d" })]);
    assert.deepEqual(
      results.map((result) => [result.offset, result.duplicate]),
      [
        [0, false],
        [1, false],
      ],
    );
  });

  streamTest("a record keeps its key, headers, content type and body, text or bytes", async () => {
    await create("s");
    const bytes = Buffer.from([0, 1, 2, 255, 254]);
    await append([
      streamRecord(0, {
        key: "k1",
        body: '{"a":[1,2]}',
        contentType: "application/json",
        headers: { h: "1", g: "2" },
      }),
      streamRecord(0, { body: bytes, contentType: "application/octet-stream", headers: {} }),
    ]);
    const { records } = await suite.read(0);
    assert.deepEqual(
      records.map((r) => [r.partition, r.offset, r.key, r.contentType, r.headers, r.timestamp]),
      [
        [0, 0, "k1", "application/json", { h: "1", g: "2" }, t0],
        [0, 1, null, "application/octet-stream", {}, t0],
      ],
    );
    assert.equal(bodyText(records[0]?.body as string), '{"a":[1,2]}');
    assert.deepEqual(Buffer.from(records[1]?.body as Buffer), bytes);
    const { partitions, counters } = await record();
    assert.deepEqual([partitions[0]?.bytes, counters.appendedBytes], [16, 16]);
  });

  streamTest("timestamps never go back within a partition", async () => {
    await create("s", 2);
    await append([streamRecord(0)], { now: t0 + 1000 });
    await append([streamRecord(0), streamRecord(1)], { now: t0 + 10 });
    const [p0, p1] = await Promise.all([suite.read(0), suite.read(1)]);
    assert.deepEqual(
      p0.records.map((r) => r.timestamp),
      [t0 + 1000, t0 + 1000],
    );
    assert.deepEqual(
      p1.records.map((r) => r.timestamp),
      [t0 + 10],
    );
  });
}

function streamReadTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append, read, contents } = suite;

  streamTest("a read from 0 replays the partition exactly; limit and bytesMax page it", async () => {
    await create("s", 2);
    const records = Array.from({ length: 10 }, (_, i) => streamRecord(i % 2, { body: Buffer.from(`r${i}`) }));
    await append(records.slice(0, 4));
    await append(records.slice(4));
    assert.deepEqual(
      await contents(0),
      [0, 1, 2, 3, 4].map((offset) => [offset, `r${offset * 2}`]),
    );
    assert.deepEqual(await contents(1, 3), [
      [3, "r7"],
      [4, "r9"],
    ]);
    const paged = await read(0, 1, 2);
    assert.deepEqual([paged.records.map((r) => r.offset), paged.oldest, paged.next], [[1, 2], 0, 5]);
    const byBytes = await store.streamRead({
      name: "s",
      partition: 0,
      position: { offset: 0 },
      limit: 100,
      bytesMax: 5,
    });
    assert.deepEqual(
      byBytes.records.map((r) => r.offset),
      [0, 1],
      "two 2-byte bodies fit in 5 bytes, a third does not",
    );
    const tiny = await store.streamRead({
      name: "s",
      partition: 0,
      position: { offset: 0 },
      limit: 100,
      bytesMax: 1,
    });
    assert.deepEqual(
      tiny.records.map((r) => r.offset),
      [0],
      "the first record always comes",
    );
  });

  streamTest("a read at next is empty; beyond next or below oldest is offset_out_of_range", async () => {
    await create("s");
    await append([streamRecord(0), streamRecord(0)]);
    assert.deepEqual(await read(0, 2), { records: [], oldest: 0, next: 2 });
    await rejectsWithDetails(read(0, 3), "offset_out_of_range", { oldest: 0, next: 2 });
    await rejectsWithDetails(read(0, -1), "offset_out_of_range", { oldest: 0, next: 2 });
    await rejectsWith(read(1, 0), "partition_not_found");
    await rejectsWith(read(0, 0, 10, "nope"), "stream_not_found");
  });

  streamTest("a read from a time starts at the first record appended at or after it", async () => {
    await create("s");
    await append([streamRecord(0, { body: "a" })], { now: t0 + 100 });
    await append([streamRecord(0, { body: "b" }), streamRecord(0, { body: "c" })], { now: t0 + 200 });
    await append([streamRecord(0, { body: "d" })], { now: t0 + 300 });
    const at = (time: number) =>
      store.streamRead({ name: "s", partition: 0, position: { time }, limit: 10, bytesMax: 1024 });
    const texts = async (time: number) => (await at(time)).records.map((r) => [r.offset, bodyText(r.body)]);
    assert.deepEqual(await texts(t0), [
      [0, "a"],
      [1, "b"],
      [2, "c"],
      [3, "d"],
    ]);
    assert.deepEqual(await texts(t0 + 150), [
      [1, "b"],
      [2, "c"],
      [3, "d"],
    ]);
    assert.deepEqual(await texts(t0 + 300), [[3, "d"]]);
    assert.deepEqual(await at(t0 + 301), { records: [], oldest: 0, next: 4 });
  });
}

function streamRetentionTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append, read, contents, record } = suite;
  const sweep = (now = t0) => store.streamSweep({ name: "s", now, max: 1000 });

  streamTest("retention by count keeps the newest records; a read below oldest says so", async () => {
    await create("s", 2, { retentionRecords: 3 });
    await append(Array.from({ length: 5 }, (_, i) => streamRecord(0, { body: `r${i}` })));
    await append([streamRecord(1, { body: "12345678" })]);
    assert.deepEqual(await sweep(), { expired: 2 });
    assert.deepEqual(await contents(0, 2), [
      [2, "r2"],
      [3, "r3"],
      [4, "r4"],
    ]);
    await rejectsWithDetails(read(0, 1), "offset_out_of_range", { offset: 1, oldest: 2, next: 5 });
    const { partitions, counters } = await record();
    assert.deepEqual(
      partitions.map((p) => [p.oldest, p.next, p.records, p.bytes]),
      [
        [2, 5, 3, 6],
        [0, 1, 1, 8],
      ],
    );
    assert.equal(counters.expired, 2);
    assert.deepEqual(await sweep(), { expired: 0 }, "a second sweep finds nothing past a limit");
  });

  streamTest("retention by bytes removes the oldest until the rest fits", async () => {
    await create("s", 1, { retentionBytes: 10 });
    await append([streamRecord(0, { body: "aaaa" }), streamRecord(0, { body: "bbbb" })]);
    await append([streamRecord(0, { body: "cccc" }), streamRecord(0, { body: "dd" })]);
    assert.deepEqual(await sweep(), { expired: 1 });
    assert.deepEqual(
      (await contents(0, 1)).map(([offset]) => offset),
      [1, 2, 3],
    );
    assert.equal((await record()).partitions[0]?.bytes, 10);
  });

  streamTest("retention by age removes records appended at or before now - retentionMs", async () => {
    await create("s", 1, { retentionMs: 60_000 });
    await append([streamRecord(0)], { now: t0 });
    await append([streamRecord(0)], { now: t0 + 30_000 });
    assert.deepEqual(await sweep(t0 + 59_999), { expired: 0 });
    assert.deepEqual(await sweep(t0 + 60_000), { expired: 1 });
    assert.deepEqual(await read(0, 1).then((r) => [r.oldest, r.records.length]), [1, 1]);
    assert.deepEqual(await sweep(t0 + 90_000), { expired: 1 });
    assert.deepEqual(await read(0, 2), { records: [], oldest: 2, next: 2 });
  });

  streamTest("a record goes once it is past any one limit, and only then", async () => {
    await create("s", 1, { retentionRecords: 4, retentionBytes: 100, retentionMs: 60_000 });
    await append([streamRecord(0, { body: "x".repeat(60) })], { now: t0 });
    await append([streamRecord(0, { body: "y".repeat(30) }), streamRecord(0, { body: "z" })], {
      now: t0 + 50_000,
    });
    // 91 bytes, 3 records, none old enough: nothing goes.
    assert.deepEqual(await sweep(t0 + 50_000), { expired: 0 });
    // Past the byte limit only: the oldest goes (60 + 30 + 1 + 20 = 111 > 100).
    await append([streamRecord(0, { body: "w".repeat(20) })], { now: t0 + 55_000 });
    assert.deepEqual(await sweep(t0 + 55_000), { expired: 1 });
    // Past the age limit only: the two of t0 + 50 s go at t0 + 110 s.
    assert.deepEqual(await sweep(t0 + 110_000), { expired: 2 });
    assert.deepEqual(
      (await contents(0, 3)).map(([offset]) => offset),
      [3],
    );
  });

  streamTest("the sweep forgets dedupIds whose window ended", async () => {
    await create("s", 1, { dedupWindowMs: 60_000 });
    await append([streamRecord(0, { dedupId: "d" })], { now: t0 });
    await sweep(t0 + 60_000);
    const [again] = await append([streamRecord(0, { dedupId: "d" })], { now: t0 + 60_000 });
    assert.deepEqual(again, { partition: 0, offset: 1, duplicate: false });
  });
}

/** Bindings from an exchange to a stream, and a publish's appends in the send's transaction. */
export function streamBindingTests(suite: ReturnType<typeof streamSuite>): void {
  const { store, streamTest, create, contents } = suite;
  const bindToStream = (stream: string) =>
    store.bindingUpsert({ exchange: "x", destination: { kind: "stream", name: stream }, pattern: "#" });

  streamTest("a binding to a stream needs the stream, and goes when the stream is deleted", async () => {
    await store.exchangeUpsert({ name: "x", type: "topic", alternate: null, now: t0 });
    await rejectsWith(bindToStream("s"), "stream_not_found");
    await create("s");
    assert.deepEqual(await bindToStream("s"), { created: true });
    assert.deepEqual(await bindToStream("s"), { created: false });
    assert.deepEqual((await store.exchangeGet({ name: "x" }))?.bindings, [
      { destination: { kind: "stream", name: "s" }, pattern: "#" },
    ]);
    await store.streamDelete({ name: "s" });
    assert.deepEqual((await store.exchangeGet({ name: "x" }))?.bindings, []);
  });

  streamTest("a send's appends to streams commit with its queue copies, all or none", async () => {
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
    await create("s", 2);
    const send = (records: ReturnType<typeof streamRecord>[]) =>
      store.queueSendMany({
        sends: [{ queue: "q", messages: [message()], policy: noSendPolicy }],
        now: t0,
        appends: [{ stream: "s", records }],
      });
    await send([streamRecord(1, { body: "a" }), streamRecord(1, { body: "b" })]);
    assert.deepEqual(await contents(1), [
      [0, "a"],
      [1, "b"],
    ]);
    assert.equal((await store.queueDepth({ name: "q", now: t0 })).available, 1);
    await rejectsWith(send([streamRecord(0), streamRecord(5)]), "partition_not_found");
    assert.equal(
      (await store.queueDepth({ name: "q", now: t0 })).available,
      1,
      "the queue copy was not kept",
    );
    assert.deepEqual(await contents(0), []);
    // Appends alone, with no queue, are a send too (a publish whose bindings lead only to streams).
    await store.queueSendMany({
      sends: [],
      now: t0,
      appends: [{ stream: "s", records: [streamRecord(0, { body: "c" })] }],
    });
    assert.deepEqual(await contents(0), [[0, "c"]]);
  });
}
