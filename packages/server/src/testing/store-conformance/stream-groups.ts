/**
 * The Store contract for a stream's consumer groups (model/stream-group.ts), on the times the calls
 * name (a fake clock): fetches that lease partitions and advance positions, the spread of partitions
 * over members, commits fenced by generation, failover after memberTimeoutMs (committed records are
 * not delivered again, uncommitted ones are, the dead member's late commit is refused), leave, reset,
 * delete and idle expiry. Part of the Store conformance suite (streams.ts registers it).
 */
import assert from "node:assert/strict";
import { rejectsWith, t0 } from "../conformance-fixtures.js";
import { bodyText, streamAttributes, streamRecord, type streamSuite } from "./stream-harness.js";

const timeoutMs = streamAttributes.memberTimeoutMs;

export function streamGroupTests(suite: ReturnType<typeof streamSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, streamTest, create, append } = suite;
  const fetch = (member: string, now = t0, max = 100, start: "earliest" | "latest" = "earliest") =>
    store.streamGroupFetch({ name: "s", group: "g", member, max, bytesMax: 1024 * 1024, start, now });
  const offsets = (records: { partition: number; offset: number; body: Buffer | string }[]) =>
    records.map((record) => [record.partition, record.offset, bodyText(record.body)]);
  const commit = (member: string, generation: number, list: [number, number][], now = t0) =>
    store.streamGroupCommit({
      name: "s",
      group: "g",
      member,
      generation,
      offsets: list.map(([partition, offset]) => ({ partition, offset })),
      now,
    });
  const holders = async (now = t0) => {
    const [group] = await store.streamGroupList({ name: "s", now });
    return group?.partitions.map((partition) => partition.holder);
  };
  /** Two partitions with three records each, bodies "p<partition>-<offset>". */
  const fill = async () => {
    await create("s", 2);
    for (let offset = 0; offset < 3; offset++)
      await append([0, 1].map((partition) => streamRecord(partition, { body: `p${partition}-${offset}` })));
  };

  streamTest("a fetch creates the group, leases the partitions and advances its position", async () => {
    await fill();
    const first = await fetch("a", t0, 4);
    assert.ok(first.generation >= 1);
    assert.deepEqual(offsets(first.records), [
      [0, 0, "p0-0"],
      [0, 1, "p0-1"],
      [0, 2, "p0-2"],
      [1, 0, "p1-0"],
    ]);
    const second = await fetch("a", t0 + 1);
    assert.deepEqual(offsets(second.records), [
      [1, 1, "p1-1"],
      [1, 2, "p1-2"],
    ]);
    assert.deepEqual((await fetch("a", t0 + 2)).records, []);
    assert.deepEqual(await holders(), ["a", "a"]);
    await rejectsWith(
      fetch("a").then(() =>
        store.streamGroupFetch({
          name: "nope",
          group: "g",
          member: "a",
          max: 1,
          bytesMax: 1,
          start: "earliest",
          now: t0,
        }),
      ),
      "stream_not_found",
    );
  });

  streamTest("a new group starting at latest reads only what is appended after", async () => {
    await fill();
    assert.deepEqual((await fetch("a", t0, 100, "latest")).records, []);
    await append([streamRecord(1, { body: "new" })]);
    assert.deepEqual(offsets((await fetch("a", t0 + 1)).records), [[1, 3, "new"]]);
  });

  streamTest("partitions spread over live members: no one holds more than its share", async () => {
    await create("s", 4);
    await fetch("a");
    assert.deepEqual(await holders(), ["a", "a", "a", "a"]);
    await fetch("b", t0 + 1);
    assert.deepEqual(await holders(t0 + 1), ["a", "a", "a", "a"], "b waits for a's next fetch");
    await fetch("a", t0 + 2);
    assert.deepEqual(await holders(t0 + 2), ["a", "a", null, null], "a gives back what is over its share");
    await fetch("b", t0 + 3);
    assert.deepEqual(await holders(t0 + 3), ["a", "a", "b", "b"]);
    await fetch("c", t0 + 4);
    await fetch("a", t0 + 5);
    await fetch("b", t0 + 6);
    await fetch("c", t0 + 7);
    const [group] = await store.streamGroupList({ name: "s", now: t0 + 7 });
    assert.deepEqual(
      group?.members.map((m) => m.partitions.length),
      [2, 1, 1],
      "⌈4 ÷ 3⌉ = 2 at most",
    );
  });

  streamTest("a commit is fenced: beyond what was fetched, by a member that lost the partition", async () => {
    await fill();
    const { generation } = await fetch("a", t0, 2);
    const results = await commit("a", generation, [
      [0, 2],
      [0, 3],
      [1, 1],
      [5, 0],
    ]);
    assert.deepEqual(
      results.map((result) => ("ok" in result ? "ok" : result.error.code)),
      ["ok", "commit_beyond_fetched", "commit_beyond_fetched", "partition_not_found"],
    );
    assert.deepEqual(
      (await commit("b", generation, [[0, 1]])).map((result) => ("ok" in result ? "ok" : result.error.code)),
      ["stale_generation"],
    );
    await rejectsWith(
      store.streamGroupCommit({ name: "s", group: "nope", member: "a", generation, offsets: [], now: t0 }),
      "group_not_found",
    );
    const [group] = await store.streamGroupList({ name: "s", now: t0 });
    assert.deepEqual(
      group?.partitions.map((p) => [p.committed, p.lag]),
      [
        [2, 1],
        [null, 3],
      ],
    );
  });

  streamTest(
    "failover: a dead member's partitions move; committed records are not delivered again, uncommitted are; its late commit is refused",
    async () => {
      await fill();
      const a = await fetch("a");
      assert.equal(a.records.length, 6);
      assert.ok(
        (
          await commit("a", a.generation, [
            [0, 3],
            [1, 1],
          ])
        ).every((result) => "ok" in result),
      );
      // b joins while a lives: a holds both, b gets nothing.
      assert.deepEqual((await fetch("b", t0 + 1000)).records, []);
      // a stops fetching; once its lease has ended, b takes both partitions from the committed offsets.
      const b = await fetch("b", t0 + timeoutMs);
      assert.deepEqual(offsets(b.records), [
        [1, 1, "p1-1"],
        [1, 2, "p1-2"],
      ]);
      assert.ok(b.generation > a.generation);
      assert.deepEqual(await holders(t0 + timeoutMs), ["b", "b"]);
      const late = await commit("a", a.generation, [[1, 3]], t0 + timeoutMs + 1);
      assert.deepEqual(
        late.map((result) => ("ok" in result ? "ok" : result.error.code)),
        ["stale_generation"],
      );
      const [group] = await store.streamGroupList({ name: "s", now: t0 + timeoutMs + 1 });
      assert.equal(group?.partitions[1]?.committed, 1, "the late commit changed nothing");
    },
  );

  streamTest("a member that leaves frees its partitions at once", async () => {
    await create("s", 2);
    await fetch("a");
    await fetch("b", t0 + 1);
    assert.deepEqual(await store.streamGroupLeave({ name: "s", group: "g", member: "a", now: t0 + 2 }), {
      left: true,
    });
    await fetch("b", t0 + 3);
    assert.deepEqual(await holders(t0 + 3), ["b", "b"]);
    assert.deepEqual(await store.streamGroupLeave({ name: "s", group: "g", member: "a", now: t0 + 4 }), {
      left: false,
    });
  });

  streamTest(
    "reset is refused while members hold partitions, unless forced; it moves committed offsets",
    async () => {
      await fill();
      const reset = (to: Parameters<typeof store.streamGroupReset>[0]["to"], force = false, now = t0) =>
        store.streamGroupReset({ name: "s", group: "g", to, force, now });
      const created = await reset("latest");
      assert.deepEqual(
        created.partitions.map((p) => [p.committed, p.lag]),
        [
          [3, 0],
          [3, 0],
        ],
      );
      await fetch("a", t0 + 1);
      await rejectsWith(reset("earliest", false, t0 + 2), "group_in_use");
      const forced = await reset({ offset: 1, partition: 1 }, true, t0 + 2);
      assert.deepEqual(
        forced.partitions.map((p) => [p.holder, p.committed]),
        [
          [null, 3],
          [null, 1],
        ],
      );
      assert.deepEqual(offsets((await fetch("a", t0 + 3)).records), [
        [1, 1, "p1-1"],
        [1, 2, "p1-2"],
      ]);
      await append([streamRecord(0, { body: "late" })], { now: t0 + 5000 });
      await store.streamGroupLeave({ name: "s", group: "g", member: "a", now: t0 + 5001 });
      const byTime = await reset({ time: t0 + 5000 }, false, t0 + 5002);
      assert.deepEqual(
        byTime.partitions.map((p) => p.committed),
        [3, 3],
      );
      await rejectsWith(reset({ offset: 0, partition: 7 }, true), "partition_not_found");
    },
  );

  streamTest("delete and idle expiry remove a group; an active one stays", async () => {
    await create("s", 1, { groupIdleExpiryMs: 120_000 });
    await fetch("a");
    await store.streamGroupFetch({
      name: "s",
      group: "other",
      member: "x",
      max: 1,
      bytesMax: 1024,
      start: "earliest",
      now: t0 + 100_000,
    });
    assert.deepEqual(
      (await store.streamGroupList({ name: "s", now: t0 })).map((g) => g.name),
      ["g", "other"],
    );
    assert.deepEqual(await store.streamGroupExpire({ name: "s", now: t0 + 119_999 }), { expired: 0 });
    assert.deepEqual(await store.streamGroupExpire({ name: "s", now: t0 + 120_000 }), { expired: 1 });
    assert.deepEqual(
      (await store.streamGroupList({ name: "s", now: t0 + 120_000 })).map((g) => g.name),
      ["other"],
    );
    await store.streamGroupDelete({ name: "s", group: "other" });
    await rejectsWith(store.streamGroupDelete({ name: "s", group: "other" }), "group_not_found");
    assert.deepEqual(await store.streamGroupList({ name: "s", now: t0 }), []);
  });
}
