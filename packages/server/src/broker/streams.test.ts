/**
 * The stream broker on a fake clock: partition choice (explicit, key hash, round robin), per-item
 * refusals that leave the rest of the call written, and retention run by its timer.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeClock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { partitionOfKey } from "../model/stream.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { attributes } from "../testing/conformance-fixtures.js";
import { StreamBroker } from "./streams.js";

function open() {
  const clock = new FakeClock();
  const store = new SqliteStore({ path: ":memory:", random: seededRandom(3) });
  const streams = new StreamBroker(store, clock);
  return { clock, store, streams };
}

test("the key hash is the CRC-32 of the key modulo the partitions, stable across versions", () => {
  assert.deepEqual(
    ["customer-1", "customer-2", "a", ""].map((key) => partitionOfKey(key, 7)),
    [3, 0, 4, 0],
  );
  // The standard CRC-32 (ISO-HDLC) of "a" is 0xe8b7be43, 3904355907 ≡ 4 (mod 7).
  assert.equal(partitionOfKey("a", 2 ** 32), 0xe8b7be43);
});

test("a record goes to its partition, else its key's, else round robin; a bad item alone is refused", async () => {
  const { store, streams } = open();
  try {
    await streams.putStream("s", { partitions: 4 });
    const results = await streams.append("s", [
      { key: "customer-1", body: 1 },
      { partition: 3, key: "customer-1", body: 2 },
      { body: 3 },
      { body: 4 },
      { partition: 9, body: 5 },
      { bodyBase64: "not base64!", body: 6 },
      { body: 7 },
    ]);
    const placed = results.map((result) => ("error" in result ? result.error.code : result.partition));
    assert.deepEqual(placed, [
      partitionOfKey("customer-1", 4),
      3,
      0,
      1,
      "partition_not_found",
      "invalid_request",
      2,
    ]);
    const { partitions } = await streams.getStream("s");
    assert.equal(
      partitions.reduce((sum, p) => sum + p.records, 0),
      5,
    );
    await assert.rejects(
      streams.append("s", []),
      (error: unknown) => error instanceof HopperError && error.code === "batch_too_large",
    );
  } finally {
    await store.close();
  }
});

test("an update keeps the partitions it does not name, and refuses to shrink them", async () => {
  const { store, streams } = open();
  try {
    await streams.putStream("s", { partitions: 3, retentionRecords: 10 });
    const { stream } = await streams.putStream("s", { retentionMs: null });
    assert.deepEqual(
      [stream.partitions.length, stream.attributes.retentionRecords, stream.attributes.retentionMs],
      [3, 10, null],
    );
    await assert.rejects(
      streams.putStream("s", { partitions: 1 }),
      (error: unknown) => error instanceof HopperError && error.code === "partitions_shrink",
    );
    await assert.rejects(
      streams.putStream("s", { retentionMs: 5 }),
      (error: unknown) => error instanceof HopperError && error.code === "invalid_attribute",
    );
  } finally {
    await store.close();
  }
});

test("retention runs on its timer: records past retentionMs go at the next pass, and reads below say so", async () => {
  const { clock, store, streams } = open();
  try {
    streams.start();
    await streams.putStream("s", { retentionMs: 2 * limits.streamSweepIntervalMs });
    await streams.append("s", [{ body: "old" }]);
    await clock.advance(limits.streamSweepIntervalMs);
    await streams.append("s", [{ body: "new" }]);
    assert.equal((await streams.getStream("s")).partitions[0]?.oldest, 0, "nothing is old enough yet");
    await clock.advance(limits.streamSweepIntervalMs);
    const [partition] = (await streams.getStream("s")).partitions;
    assert.deepEqual([partition?.oldest, partition?.next], [1, 2]);
    await assert.rejects(
      streams.read("s", 0, { from: 0 }),
      (error: unknown) => error instanceof HopperError && error.code === "offset_out_of_range",
    );
    const read = await streams.read("s", 0, {});
    assert.deepEqual(
      read.records.map((record) => record.offset),
      [1],
      "a read without from starts at oldest",
    );
    streams.stop();
  } finally {
    await store.close();
  }
});

test("a group fetch with waitMs waits for an append, and answers empty when the wait is over", async () => {
  const { clock, store, streams } = open();
  try {
    await streams.putStream("s", { partitions: 2 });
    const waiting = streams.groups.fetch("s", "g", "a", { waitMs: 5_000 });
    while (streams.wake.waitingOn("stream:s") === 0) await new Promise((resolve) => setImmediate(resolve));
    await streams.append("s", [{ partition: 1, body: "x" }]);
    const fetched = await waiting;
    assert.deepEqual(
      fetched.records.map((record) => [record.partition, record.offset]),
      [[1, 0]],
    );
    const empty = streams.groups.fetch("s", "g", "a", { waitMs: 5_000 });
    while (streams.wake.waitingOn("stream:s") === 0) await new Promise((resolve) => setImmediate(resolve));
    await clock.advance(5_000);
    assert.deepEqual((await empty).records, []);
    await assert.rejects(
      streams.groups.fetch("s", "g", "a", { max: 0 }),
      (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
    );
  } finally {
    await store.close();
  }
});

test("retention's pass also deletes groups idle past groupIdleExpiryMs", async () => {
  const { clock, store, streams } = open();
  try {
    streams.start();
    await streams.putStream("s", { groupIdleExpiryMs: limits.streamSweepIntervalMs });
    await streams.groups.fetch("s", "g", "a", {});
    assert.equal((await streams.groups.listGroups("s")).length, 1);
    await clock.advance(limits.streamSweepIntervalMs);
    assert.deepEqual(await streams.groups.listGroups("s"), []);
    streams.stop();
  } finally {
    await store.close();
  }
});

test("a share receive with waitMs wakes when the first lease in flight ends, and counts dead letters", {
  timeout: 10_000,
}, async () => {
  const { clock, store, streams } = open();
  try {
    await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: clock.now() });
    await streams.putStream("s", {});
    await streams.shares.putShare("s", "sh", {
      visibilityTimeoutMs: 10_000,
      deadLetter: { queue: "dlq", maxDeliveries: 1 },
    });
    await streams.append("s", [{ body: "x" }]);
    const [first] = await streams.shares.receive("s", "sh", {});
    assert.equal(first?.deliveries, 1);
    // Nothing to hand out until the lease ends at +10 s; the wait (20 s) ends there, not at its end.
    const waiting = streams.shares.receive("s", "sh", { waitMs: 20_000 });
    while (streams.wake.waitingOn("stream:s") === 0) await new Promise((resolve) => setImmediate(resolve));
    await clock.advance(10_000);
    // It looked again at +10 s: the record, past maxDeliveries, went to the dead-letter queue; the
    // receive waits out the rest of its 20 s.
    while (streams.shares.deadLettered.get("s") !== 1) await new Promise((resolve) => setImmediate(resolve));
    await clock.advance(10_000);
    assert.deepEqual(await waiting, [], "a dead letter is not delivered");
    assert.equal((await store.queueDepth({ name: "dlq", now: clock.now() })).available, 1);
  } finally {
    await store.close();
  }
});
