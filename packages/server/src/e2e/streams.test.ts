/**
 * Streams through the real server process, on every store (PostgreSQL skipped, saying why, without
 * HOPPER_TEST_PG_URL): appends pick partitions by key, explicit partition and round robin; a replay
 * from offset 0 and from a time reproduces exactly the appended sequence per partition; bad input gets
 * its catalog code and changes nothing; and after `kill -9` every confirmed append is there, in order,
 * with its body.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { e2eStores } from "../testing/e2e-stores.js";
import { assertError, call, results } from "../testing/http-calls.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

interface Appended {
  partition: number;
  offset: number;
  duplicate: boolean;
}

interface ReadRecord {
  partition: number;
  offset: number;
  timestamp: string;
  key: string | null;
  body: { n: number; padding: string };
}

async function appendRecords(server: ServerProcess, stream: string, records: object[]): Promise<Appended[]> {
  return results(await call(server, "POST", `/v1/streams/${stream}/records`, { records })) as Appended[];
}

/** Every record of a partition from `from` (an offset, or `fromTime=`), page after page. */
async function readAll(
  server: ServerProcess,
  stream: string,
  partition: number,
  query = "from=0",
): Promise<ReadRecord[]> {
  const records: ReadRecord[] = [];
  let path = `/v1/streams/${stream}/partitions/${partition}/records?${query}&limit=500`;
  for (;;) {
    const answer = await call(server, "GET", path);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const page = answer.body as { records: ReadRecord[]; next: number };
    records.push(...page.records);
    if (page.records.length === 0) return records;
    path = `/v1/streams/${stream}/partitions/${partition}/records?from=${page.next}&limit=500`;
  }
}

for (const store of e2eStores) {
  test(`streams (${store.name}): partitions, replay from 0 and from a time, bad input`, {
    skip: store.skip,
  }, async () => {
    // Over 80 lines: one stream's life told in order, each step checked.
    const opened = await store.open("streams");
    const server = await startServerProcess(opened.options);
    try {
      const created = await call(server, "PUT", "/v1/streams/orders", { partitions: 3, retentionMs: null });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assertError(
        await call(server, "PUT", "/v1/streams/orders", { partitions: 2 }),
        409,
        "partitions_shrink",
      );
      const stats = (await call(server, "GET", "/v1/streams/orders")).body as {
        stats: { partitions: unknown[] };
        attributes: { retentionMs: null };
      };
      assert.equal(stats.stats.partitions.length, 3, "a refused shrink changed nothing");

      const keyed = await appendRecords(server, "orders", [
        { key: "customer-1", body: { n: 0, padding: "" } },
        { key: "customer-1", body: { n: 1, padding: "" } },
        { partition: 2, body: { n: 2, padding: "" } },
        { body: { n: 3, padding: "" } },
        { body: { n: 4, padding: "" } },
        { body: { n: 5, padding: "" } },
      ]);
      assert.equal(keyed[0]?.partition, keyed[1]?.partition, "one key, one partition");
      assert.equal((keyed[1]?.offset ?? 0) - (keyed[0]?.offset ?? 0), 1);
      assert.equal(keyed[2]?.partition, 2);
      assert.deepEqual(
        keyed
          .slice(3)
          .map((result) => result.partition)
          .sort(),
        [0, 1, 2],
        "records without key or partition go round robin",
      );
      const timeBetween = new Date();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const batches = 20;
      for (let batch = 0; batch < batches; batch++) {
        const records = Array.from({ length: 10 }, (_, i) => ({
          key: `k${(batch * 10 + i) % 7}`,
          body: { n: 6 + batch * 10 + i, padding: "p".repeat(i * 13) },
        }));
        await appendRecords(server, "orders", records);
      }
      // Replay from 0: each partition holds its records in append order, offsets 0, 1, 2, ...
      let total = 0;
      for (let partition = 0; partition < 3; partition++) {
        const replay = await readAll(server, "orders", partition);
        assert.deepEqual(
          replay.map((record) => record.offset),
          replay.map((_, index) => index),
        );
        const ns = replay.map((record) => record.body.n);
        assert.deepEqual(
          ns,
          [...ns].sort((a, b) => a - b),
          `partition ${partition} is in append order`,
        );
        for (const record of replay) if (record.key !== null) assert.equal(record.partition, partition);
        const fromTime = await readAll(
          server,
          "orders",
          partition,
          `fromTime=${encodeURIComponent(timeBetween.toISOString())}`,
        );
        assert.deepEqual(
          fromTime.map((record) => record.body.n),
          ns.filter((n) => n >= 6),
          "a read from a time starts at the first record appended at or after it",
        );
        total += replay.length;
      }
      assert.equal(total, 6 + batches * 10);

      const next = (
        (await call(server, "GET", "/v1/streams/orders")).body as {
          stats: { partitions: { next: number }[] };
        }
      ).stats.partitions[0]?.next as number;
      const beyond = assertError(
        await call(server, "GET", `/v1/streams/orders/partitions/0/records?from=${next + 1}`),
        416,
        "offset_out_of_range",
      );
      assert.deepEqual([beyond.details?.oldest, beyond.details?.next], [0, next]);
      assertError(
        await call(server, "GET", "/v1/streams/orders/partitions/3/records?from=0"),
        400,
        "partition_not_found",
      );
      assertError(
        await call(server, "GET", "/v1/streams/nope/partitions/0/records"),
        404,
        "stream_not_found",
      );
      assertError(
        await call(server, "POST", "/v1/streams/orders/records", { records: [{ body: 1, extra: 1 }] }),
        400,
        "invalid_request",
      );
      const mixed = results(
        await call(server, "POST", "/v1/streams/orders/records", {
          records: [
            { partition: 5, body: 1 },
            { partition: 0, body: { n: -1, padding: "" } },
          ],
        }),
      ) as (Appended | { error: { code: string } })[];
      assert.equal((mixed[0] as { error: { code: string } }).error.code, "partition_not_found");
      assert.deepEqual(mixed[1], { partition: 0, offset: next, duplicate: false });
      const dedup = await appendRecords(server, "orders", [{ partition: 1, dedupId: "once", body: 1 }]);
      const again = await appendRecords(server, "orders", [{ partition: 0, dedupId: "once", body: 1 }]);
      assert.deepEqual(again, [{ ...dedup[0], duplicate: true }]);
      assert.equal((await call(server, "DELETE", "/v1/streams/orders")).status, 204);
      assertError(await call(server, "GET", "/v1/streams/orders"), 404, "stream_not_found");
    } finally {
      await server.stop();
      await opened.close();
    }
  });

  test(`streams (${store.name}): a publish appends to a bound stream with its queue copies`, {
    skip: store.skip,
  }, async () => {
    const opened = await store.open("stream_bind");
    const server = await startServerProcess(opened.options);
    try {
      assert.equal((await call(server, "PUT", "/v1/exchanges/events", { type: "topic" })).status, 201);
      assert.equal((await call(server, "PUT", "/v1/queues/mail", {})).status, 201);
      assert.equal((await call(server, "PUT", "/v1/streams/audit", { partitions: 2 })).status, 201);
      const bind = (body: object) => call(server, "PUT", "/v1/exchanges/events/bindings", body);
      assertError(await bind({ stream: "nope", pattern: "#" }), 404, "stream_not_found");
      assert.equal((await bind({ stream: "audit", pattern: "order.#" })).status, 201);
      assert.equal((await bind({ queue: "mail", pattern: "order.paid" })).status, 201);
      const publish = async (messages: object[]) =>
        results(await call(server, "POST", "/v1/exchanges/events/publish", { messages })) as {
          routed: number;
        }[];
      const published = await publish([
        { routingKey: "order.paid", key: "o1", body: { n: 1 } },
        { routingKey: "order.shipped", key: "o1", body: { n: 2 } },
      ]);
      assert.deepEqual(
        published.map((result) => result.routed),
        [2, 1],
        "a stream record counts as a destination",
      );
      const [partition] = (await appendRecords(server, "audit", [{ key: "o1", body: 0 }])).map(
        (r) => r.partition,
      );
      const replay = await readAll(server, "audit", partition as number);
      assert.deepEqual(
        replay.map((record) => [record.key, record.body]),
        [
          ["o1", { n: 1 }],
          ["o1", { n: 2 }],
          ["o1", 0],
        ],
      );
      const queue = (await call(server, "GET", "/v1/queues/mail")).body as { stats: { available: number } };
      assert.equal(queue.stats.available, 1);
      assert.equal((await call(server, "DELETE", "/v1/streams/audit")).status, 204);
      const exchange = (await call(server, "GET", "/v1/exchanges/events")).body as { bindings: unknown[] };
      assert.equal(exchange.bindings.length, 1, "the stream's binding went with it");
      const [refused] = results(
        await call(server, "POST", "/v1/exchanges/events/publish", {
          messages: [{ routingKey: "order.shipped", body: 1 }],
          mandatory: true,
        }),
      );
      assert.equal((refused as { error: { code: string } }).error.code, "unroutable");
    } finally {
      await server.stop();
      await opened.close();
    }
  });

  test(`streams (${store.name}): a consumer group fetches, commits, and resumes from its commit`, {
    skip: store.skip,
  }, async () => {
    // Over 80 lines: one group's life told in order, across a restart.
    const opened = await store.open("stream_group");
    let server = await startServerProcess(opened.options);
    try {
      assert.equal((await call(server, "PUT", "/v1/streams/jobs", { partitions: 2 })).status, 201);
      await appendRecords(
        server,
        "jobs",
        Array.from({ length: 6 }, (_, n) => ({ partition: n % 2, body: { n, padding: "" } })),
      );
      const group = "/v1/streams/jobs/groups/workers";
      const fetch = async (member: string, max = 100) => {
        const answer = await call(server, "POST", `${group}/fetch`, { member, max });
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        return answer.body as { generation: number; records: ReadRecord[] };
      };
      const first = await fetch("w1", 4);
      assert.deepEqual(
        first.records.map((record) => [record.partition, record.offset]),
        [
          [0, 0],
          [0, 1],
          [0, 2],
          [1, 0],
        ],
      );
      const commit = (member: string, generation: number, offsets: object[]) =>
        call(server, "POST", `${group}/commit`, { member, generation, offsets });
      const committed = results(
        await commit("w1", first.generation, [
          { partition: 0, offset: 3 },
          { partition: 1, offset: 1 },
          { partition: 1, offset: 3 },
        ]),
      ) as ({ ok: true } | { error: { code: string } })[];
      assert.deepEqual(
        committed.map((result) => ("ok" in result ? "ok" : result.error.code)),
        ["ok", "ok", "commit_beyond_fetched"],
      );
      const shown = (await call(server, "GET", group)).body as {
        members: { member: string; partitions: number[] }[];
        partitions: { committed: number; lag: number }[];
      };
      assert.deepEqual(
        shown.members.map((member) => [member.member, member.partitions]),
        [["w1", [0, 1]]],
      );
      assert.deepEqual(
        shown.partitions.map((p) => [p.committed, p.lag]),
        [
          [3, 0],
          [1, 2],
        ],
      );
      assertError(await call(server, "POST", `${group}/reset`, { to: "earliest" }), 409, "group_in_use");
      assert.equal((await call(server, "POST", `${group}/leave`, { member: "w1" })).status, 200);
      // A restart keeps the commits: a new member resumes after them.
      server = await server.restart();
      const resumed = await fetch("w2");
      assert.deepEqual(
        resumed.records.map((record) => [record.partition, record.offset]),
        [
          [1, 1],
          [1, 2],
        ],
      );
      const stale = results(await commit("w1", first.generation, [{ partition: 1, offset: 2 }]));
      assert.equal((stale[0] as { error: { code: string } }).error.code, "stale_generation");
      const reset = await call(server, "POST", `${group}/reset`, { to: { offset: 0 }, force: true });
      assert.equal(reset.status, 200, JSON.stringify(reset.body));
      assert.equal((await fetch("w2")).records.length, 6, "after a reset to 0 every record comes again");
      assert.equal(
        ((await call(server, "GET", "/v1/streams/jobs/groups")).body as { groups: unknown[] }).groups.length,
        1,
      );
      assert.equal((await call(server, "DELETE", group)).status, 204);
      assertError(await call(server, "GET", group), 404, "group_not_found");
    } finally {
      await server.stop();
      await opened.close();
    }
  });

  test(`streams (${store.name}): a share group leases each record to one consumer and dead-letters past its limit`, {
    skip: store.skip,
  }, async () => {
    const opened = await store.open("stream_share");
    const server = await startServerProcess(opened.options);
    try {
      assert.equal((await call(server, "PUT", "/v1/queues/poison", {})).status, 201);
      assert.equal((await call(server, "PUT", "/v1/streams/tasks", { partitions: 2 })).status, 201);
      const share = "/v1/streams/tasks/shares/workers";
      assertError(
        await call(server, "PUT", share, { deadLetter: { queue: "nope", maxDeliveries: 1 } }),
        400,
        "dead_letter_queue_not_found",
      );
      const put = await call(server, "PUT", share, {
        visibilityTimeoutMs: 60_000,
        deadLetter: { queue: "poison", maxDeliveries: 1 },
      });
      assert.equal(put.status, 201, JSON.stringify(put.body));
      await appendRecords(
        server,
        "tasks",
        Array.from({ length: 4 }, (_, n) => ({ partition: n % 2, body: { n, padding: "" } })),
      );
      const receive = async (max: number) =>
        (
          (await call(server, "POST", `${share}/receive`, { max })).body as {
            messages: (ReadRecord & { receipt: string })[];
          }
        ).messages;
      const [one, two] = await Promise.all([receive(2), receive(2)]);
      const held = [...(one ?? []), ...(two ?? [])].map(
        (message) => `${message.partition}:${message.offset}`,
      );
      assert.equal(new Set(held).size, 4, "two consumers never got the same record");
      const receipts = [...(one ?? []), ...(two ?? [])].map((message) => message.receipt);
      const acked = results(await call(server, "POST", `${share}/ack`, { receipts: receipts.slice(0, 3) }));
      assert.deepEqual(acked, [{ ok: true }, { ok: true }, { ok: true }]);
      assert.deepEqual(
        results(await call(server, "POST", `${share}/nack`, { receipts: receipts.slice(3) })),
        [{ ok: true }],
      );
      const pending = (await call(server, "GET", `${share}/pending`)).body as {
        counters: { deadLettered: number; acked: number };
        pending: unknown[];
      };
      assert.deepEqual(
        [pending.counters.deadLettered, pending.counters.acked, pending.pending.length],
        [1, 3, 0],
      );
      const dead = (await call(server, "POST", "/v1/queues/poison/receive", { max: 10 })).body as {
        messages: { headers: Record<string, string> }[];
      };
      assert.equal(dead.messages.length, 1);
      assert.equal(dead.messages[0]?.headers["x-original-stream"], "tasks");
      assert.equal(
        (await readAll(server, "tasks", 0)).length + (await readAll(server, "tasks", 1)).length,
        4,
        "the log keeps every record",
      );
    } finally {
      await server.stop();
      await opened.close();
    }
  });

  test(`streams (${store.name}): after kill -9 every confirmed append is there, in order`, {
    skip: store.skip,
  }, async () => {
    const opened = await store.open("stream_crash");
    let server = await startServerProcess(opened.options);
    try {
      assert.equal((await call(server, "PUT", "/v1/streams/log", { partitions: 4 })).status, 201);
      const confirmed = new Map<string, number>();
      let n = 0;
      let stop = false;
      const producer = async () => {
        while (!stop) {
          const records = Array.from({ length: 25 }, () => {
            n++;
            return { key: `k${n % 11}`, body: { n, padding: "x".repeat(n % 97) } };
          });
          let appended: Appended[];
          try {
            appended = await appendRecords(server, "log", records);
          } catch {
            return; // The kill cut this call off: it was never confirmed.
          }
          appended.forEach((result, index) => {
            confirmed.set(
              `${result.partition}:${result.offset}`,
              (records[index] as { body: { n: number } }).body.n,
            );
          });
        }
      };
      const producers = [producer(), producer(), producer(), producer()];
      while (confirmed.size < 2000) await new Promise((resolve) => setTimeout(resolve, 10));
      await server.kill9();
      stop = true;
      await Promise.all(producers);
      server = await server.restart();
      let found = 0;
      for (let partition = 0; partition < 4; partition++) {
        const replay = await readAll(server, "log", partition);
        assert.deepEqual(
          replay.map((record) => record.offset),
          replay.map((_, index) => index),
          "offsets stay contiguous",
        );
        for (const record of replay) {
          assert.equal(record.body.padding, "x".repeat(record.body.n % 97), "no record is torn");
          const expected = confirmed.get(`${partition}:${record.offset}`);
          if (expected !== undefined) {
            assert.equal(record.body.n, expected);
            found++;
          }
        }
      }
      assert.equal(found, confirmed.size, "every confirmed append is there");
    } finally {
      await server.stop();
      await opened.close();
    }
  });
}
