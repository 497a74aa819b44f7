/**
 * The PostgreSQL stream store where many nodes share it (stream-store.ts, "Locks"): appends from two
 * pools to the same partitions give contiguous offsets, and a reader polling meanwhile never sees an
 * offset before the ones below it (offsets become visible in order); a group fetch waiting on one node
 * wakes when the other appends, through its NOTIFY; two nodes serving one group never hold one
 * partition at once. Needs HOPPER_TEST_PG_URL; skipped with the reason without it.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { StreamBroker } from "../../broker/streams.js";
import { systemClock } from "../../clock.js";
import { seededRandom } from "../../random.js";
import { t0 } from "../../testing/conformance-fixtures.js";
import { dropSchemas, pgSkipReason, pgTestUrl } from "../../testing/pg.js";
import { streamAttributes, streamRecord } from "../../testing/store-conformance/stream-harness.js";
import { PostgresStore } from "./postgres-store.js";

const schemas: string[] = [];
let nextSchema = 0;

/** Two stores (two pools, as two nodes) over one fresh schema. */
async function twoNodes(url: string): Promise<[PostgresStore, PostgresStore]> {
  const schema = `hopper_stream_${process.pid}_${nextSchema++}`;
  schemas.push(schema);
  const first = await PostgresStore.open({ url, schema, random: seededRandom(1), poolSize: 4 });
  const second = await PostgresStore.open({ url, schema, random: seededRandom(2), poolSize: 4 });
  return [first, second];
}

if (!pgTestUrl) {
  test("PostgreSQL stream concurrency", { skip: pgSkipReason }, () => {});
} else {
  const url = pgTestUrl;
  after(() => dropSchemas(url, schemas));

  test("appends from two nodes at once give contiguous offsets that become visible in order", async () => {
    const nodes = await twoNodes(url);
    const [first, second] = nodes;
    try {
      await first.streamUpsert({ name: "s", attributes: streamAttributes, partitions: 2, now: t0 });
      let appending = true;
      const holes: string[] = [];
      const reader = (async () => {
        while (appending) {
          for (const partition of [0, 1]) {
            const { records, next } = await second.streamRead({
              name: "s",
              partition,
              position: { offset: 0 },
              limit: 1000,
              bytesMax: 1 << 24,
            });
            const seen = records.map((record) => record.offset);
            if (seen.some((offset, index) => offset !== index) || seen.length !== next)
              holes.push(`partition ${partition}: ${seen.join(",")} next ${next}`);
          }
        }
      })();
      const appendMany = (node: PostgresStore, tag: string) =>
        Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            node.streamAppend({
              name: "s",
              records: [
                streamRecord(i % 2, { body: `${tag}${i}` }),
                streamRecord((i + 1) % 2, { body: `${tag}${i}b` }),
              ],
              now: t0,
            }),
          ),
        );
      const [fromFirst, fromSecond] = await Promise.all([appendMany(first, "a"), appendMany(second, "b")]);
      appending = false;
      await reader;
      assert.deepEqual(holes, [], "no reader saw an offset before the ones below it");
      const given = [...fromFirst, ...fromSecond].flatMap((answer) => answer.results);
      for (const partition of [0, 1]) {
        const offsets = given
          .filter((result) => result.partition === partition)
          .map((result) => result.offset);
        assert.deepEqual(
          offsets.sort((a, b) => a - b),
          offsets.map((_, index) => index),
          `partition ${partition}'s offsets are contiguous, each given once`,
        );
      }
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  test("a group fetch waiting on one node wakes when another node appends", async () => {
    const nodes = await twoNodes(url);
    const [first, second] = nodes;
    const waiting = new StreamBroker(first, systemClock);
    waiting.start();
    try {
      await first.streamUpsert({ name: "s", attributes: streamAttributes, partitions: 1, now: Date.now() });
      const startedAt = Date.now();
      const fetch = waiting.groups.fetch("s", "g", "a", { waitMs: 15_000 });
      // Once the fetch has found nothing and waits, append through the other node's store.
      while (waiting.wake.waitingOn("stream:s") === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      await second.streamAppend({
        name: "s",
        records: [streamRecord(0, { body: "hello" })],
        now: Date.now(),
      });
      const fetched = await fetch;
      assert.deepEqual(
        fetched.records.map((record) => record.offset),
        [0],
      );
      assert.ok(Date.now() - startedAt < 10_000, "woken by the append, not by the end of the wait");
    } finally {
      waiting.stop();
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  test("members on two nodes never hold one partition at once", async () => {
    const nodes = await twoNodes(url);
    try {
      await nodes[0].streamUpsert({ name: "s", attributes: streamAttributes, partitions: 4, now: t0 });
      const fetches = Array.from({ length: 40 }, (_, i) =>
        (nodes[i % 2] as PostgresStore).streamGroupFetch({
          name: "s",
          group: "g",
          member: `m${i % 4}`,
          max: 10,
          bytesMax: 1024,
          start: "earliest",
          now: t0 + i,
        }),
      );
      await Promise.all(fetches);
      const [group] = await nodes[0].streamGroupList({ name: "s", now: t0 + 40 });
      const held = group?.members.flatMap((member: { partitions: number[] }) => member.partitions) ?? [];
      assert.equal(new Set(held).size, held.length, "each partition has one holder");
      assert.ok(
        group?.members.every((member) => member.partitions.length <= 1),
        "⌈4 ÷ 4⌉ = 1",
      );
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });
}
