/**
 * `hopper.streams` against a real `hopper serve`: appends and reads, a group consumer that commits
 * after its handler (so a second consumer of the group resumes after what the first handled), and a
 * share group's receive and ack. What the client answers is checked against what the server holds.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { StreamRecordOut } from "@hopper/wire";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { startTestServer, type TestServer } from "./testing/server-process.js";

describe("hopper.streams against a real server", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let server: TestServer;
  let client: HopperClient;
  before(async () => {
    server = await startTestServer();
    client = new HopperClient({ url: server.url });
  });
  after(async () => {
    await client.close();
    await server.stop();
  });

  test("append, read from an offset and a time, and the offset_out_of_range refusal", async () => {
    const { created } = await client.streams.put("events", { partitions: 2 });
    assert.equal(created, true);
    const results = await client.streams.append("events", [
      { key: "a", body: { n: 1 } },
      { partition: 1, body: { n: 2 } },
    ]);
    // The CRC-32 of "a" is odd: partition 1 of 2, where the second record goes too.
    assert.deepEqual(
      results.map((result) => ("error" in result ? "error" : [result.partition, result.offset])),
      [
        [1, 0],
        [1, 1],
      ],
    );
    const read = await client.streams.read("events", 1, { from: 0 });
    assert.deepEqual(
      read.records.map((record) => record.body),
      [{ n: 1 }, { n: 2 }],
    );
    assert.equal(
      (await client.streams.read("events", 1, { fromTime: new Date(Date.now() + 60_000) })).records.length,
      0,
    );
    const refused = await client.streams.read("events", 1, { from: 5 }).catch((error: unknown) => error);
    assert.ok(refused instanceof HopperError && refused.code === "offset_out_of_range");
    assert.deepEqual(
      (await client.streams.list()).map((stream) => stream.name),
      ["events"],
    );
  });

  test("a group consumer commits after its handler; the next member resumes after the commit", async () => {
    await client.streams.put("jobs", { partitions: 2 });
    await client.streams.append(
      "jobs",
      Array.from({ length: 10 }, (_, n) => ({ partition: n % 2, body: { n } })),
    );
    const handled: number[] = [];
    let done!: () => void;
    const allHandled = new Promise<void>((resolve) => {
      done = resolve;
    });
    const consumer = client.streams.groupConsumer(
      "jobs",
      "workers",
      (record: StreamRecordOut) => {
        handled.push((record.body as { n: number }).n);
        if (handled.length === 10) done();
      },
      { member: "m1", waitMs: 200 },
    );
    await allHandled;
    await consumer.stop();
    assert.deepEqual(
      [...handled].sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    const group = await client.streams.getGroup("jobs", "workers");
    assert.deepEqual(
      group.partitions.map((partition) => [partition.committed, partition.lag]),
      [
        [5, 0],
        [5, 0],
      ],
    );
    assert.deepEqual(group.members, [], "the member left as it stopped");
    await client.streams.append("jobs", [{ partition: 0, body: { n: 10 } }]);
    const next = await client.streams.fetch("jobs", "workers", { member: "m2" });
    assert.deepEqual(
      next.records.map((record) => record.body),
      [{ n: 10 }],
      "only what was not committed",
    );
  });

  test("a share group hands each record out once and takes acks by receipt", async () => {
    await client.streams.put("tasks");
    await client.streams.append("tasks", [{ body: 1 }, { body: 2 }]);
    assert.deepEqual(await client.streams.putShare("tasks", "pool", { visibilityTimeoutMs: 60_000 }), {
      created: true,
    });
    const first = await client.streams.receiveShare("tasks", "pool", { max: 1 });
    const second = await client.streams.receiveShare("tasks", "pool", { max: 5 });
    assert.deepEqual(
      [...first, ...second].map((record) => record.body),
      [1, 2],
    );
    const acked = await client.streams.ackShare("tasks", "pool", [first[0]?.receipt as string]);
    assert.deepEqual(acked, [{ ok: true }]);
    const again = await client.streams.ackShare("tasks", "pool", [first[0]?.receipt as string]);
    assert.equal((again[0] as { error: { code: string } }).error.code, "stale_receipt");
  });
});
