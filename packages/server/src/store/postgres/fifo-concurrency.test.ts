/**
 * Two broker nodes (two PostgresStore instances on one schema) writing the same FIFO groups, dedupIds
 * and bounded queues at once: what the per-group advisory locks, the dedup primary key and the queue
 * row lock of a bounded send must keep true under real concurrency. Needs PostgreSQL
 * (HOPPER_TEST_PG_URL); without it the tests are skipped and say why.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pg from "pg";
import { HopperError } from "../../errors.js";
import type { LeasedMessage } from "../../model/message.js";
import { noSendPolicy, type SendPolicy } from "../../model/policies.js";
import { seededRandom } from "../../random.js";
import { attributes, message, t0 } from "../../testing/conformance-fixtures.js";
import { dropSchemas, pgSkipReason, pgTestUrl } from "../../testing/pg.js";
import type { Store } from "../store.js";
import { PostgresStore } from "./postgres-store.js";

const url = pgTestUrl;
const groups = ["a", "b", "c", "d", "e"];
/** Which group each message joins: seeded, so a failure can be run again as it was. */
const keyRandom = seededRandom(42);
/** Every lease in these tests lasts past their end: only an ack ends one. */
const leaseMs = 3_600_000;

if (!url) {
  test("FIFO concurrency on PostgreSQL", { skip: pgSkipReason }, () => {});
} else {
  describe("FIFO concurrency on PostgreSQL: two nodes, one schema", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const schema = `hopper_fifo_${process.pid}`;
    let nodes: [Store, Store];
    let admin: pg.Client;

    before(async () => {
      const open = (seed: number) =>
        PostgresStore.open({ url, schema, random: seededRandom(seed), poolSize: 6 });
      nodes = [await open(1), await open(2)];
      admin = new pg.Client({ connectionString: url });
      await admin.connect();
    });

    after(async () => {
      await admin?.end();
      for (const node of nodes ?? []) await node.close();
      await dropSchemas(url, [schema]);
    });

    const send = (node: Store, queue: string, keys: (string | undefined)[], policy = noSendPolicy) =>
      node.queueSendMany({
        sends: [{ queue, messages: keys.map((key) => message(key === undefined ? {} : { key })), policy }],
        now: t0,
      });
    const lease = (node: Store, queue: string, max: number) =>
      node.queueLease({
        queue,
        max,
        now: t0,
        leaseExpiresAt: t0 + leaseMs,
        expiredBefore: t0 - attributes.retentionMs,
        inFlightMax: 100_000,
        deadLetter: null,
      });
    const randomKeys = (count: number) =>
      Array.from({ length: count }, () => groups[Math.floor(keyRandom.float() * groups.length)] as string);

    /** Per group of the queue: how many heads, and whether the head is the group's lowest seq. */
    async function heads(queue: string): Promise<{ group: string; heads: number; headIsFirst: boolean }[]> {
      const { rows } = await admin.query<{ group_key: string; heads: number; head_is_first: boolean }>(
        `SELECT m.group_key, count(*) FILTER (WHERE m.head)::int AS heads,
           coalesce(min(m.seq) FILTER (WHERE m.head) = min(m.seq), false) AS head_is_first
         FROM "${schema}".messages m JOIN "${schema}".queues q USING (queue_id)
         WHERE q.name = $1 GROUP BY m.group_key ORDER BY m.group_key`,
        [queue],
      );
      return rows.map((row) => ({ group: row.group_key, heads: row.heads, headIsFirst: row.head_is_first }));
    }

    /** Groups of the queue with more than one message in flight, in one consistent snapshot. */
    async function groupsWithTwoInFlight(queue: string): Promise<string[]> {
      const { rows } = await admin.query<{ group_key: string }>(
        `SELECT m.group_key FROM "${schema}".messages m JOIN "${schema}".queues q USING (queue_id)
         WHERE q.name = $1 AND m.lease_token IS NOT NULL AND m.visible_at > $2
         GROUP BY m.group_key HAVING count(*) > 1`,
        [queue, t0],
      );
      return rows.map((row) => row.group_key);
    }

    async function idsInSeqOrder(queue: string): Promise<Map<string, string[]>> {
      const { rows } = await admin.query<{ id: string; group_key: string }>(
        `SELECT m.id, m.group_key FROM "${schema}".messages m JOIN "${schema}".queues q USING (queue_id)
         WHERE q.name = $1 ORDER BY m.seq`,
        [queue],
      );
      const byGroup = new Map<string, string[]>();
      for (const row of rows) byGroup.set(row.group_key, [...(byGroup.get(row.group_key) ?? []), row.id]);
      return byGroup;
    }

    test("concurrent sends and acks into the same groups leave each group one head, its oldest", async () => {
      const [first] = nodes;
      await first.queueUpsert({ name: "mixed", kind: "fifo", attributes, now: t0 });
      for (let round = 0; round < 25; round++) {
        const leaseAndAck = async (node: Store) => {
          const { messages } = await lease(node, "mixed", 3);
          if (messages.length > 0) {
            await node.queueAck({ queue: "mixed", receipts: messages.map((m) => m.receipt) });
          }
        };
        await Promise.all(
          nodes.flatMap((node) => [
            send(node, "mixed", randomKeys(4)),
            send(node, "mixed", [undefined, ...randomKeys(2)]),
            leaseAndAck(node),
            leaseAndAck(node),
          ]),
        );
        for (const group of await heads("mixed")) {
          assert.deepEqual(group, { group: group.group, heads: 1, headIsFirst: true }, `round ${round}`);
        }
      }
    });

    test("draining from both nodes delivers every message once, each group in order, one in flight", async () => {
      const [first] = nodes;
      await first.queueUpsert({ name: "drain", kind: "fifo", attributes, now: t0 });
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => send(nodes[i % 2] as Store, "drain", randomKeys(10))),
      );
      const expected = await idsInSeqOrder("drain");
      const total = [...expected.values()].reduce((sum, ids) => sum + ids.length, 0);
      assert.equal(total, 200);
      const delivered = new Map<string, string[]>();
      let acked = 0;
      let done = false;
      const deadline = Date.now() + 60_000;
      const worker = async (node: Store) => {
        while (acked < total && Date.now() < deadline) {
          const { messages } = await lease(node, "drain", 4);
          const keys = messages.map((m: LeasedMessage) => m.key ?? "");
          assert.equal(new Set(keys).size, keys.length, `one lease took two of a group: ${keys}`);
          for (const m of messages) delivered.set(m.key ?? "", [...(delivered.get(m.key ?? "") ?? []), m.id]);
          if (messages.length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 2));
            continue;
          }
          const results = await node.queueAck({ queue: "drain", receipts: messages.map((m) => m.receipt) });
          assert.ok(results.every((result) => "ok" in result));
          acked += messages.length;
        }
      };
      // Watches, in consistent snapshots, that no group ever has two messages in flight.
      const observer = async () => {
        while (!done) {
          assert.deepEqual(await groupsWithTwoInFlight("drain"), []);
        }
      };
      const watching = observer();
      await Promise.all([worker(nodes[0]), worker(nodes[1]), worker(nodes[0]), worker(nodes[1])]);
      done = true;
      await watching;
      assert.equal(acked, total, "drained before the deadline");
      assert.deepEqual(
        Object.fromEntries(delivered),
        Object.fromEntries(expected),
        "each exactly once, in order",
      );
      assert.equal((await first.queueDepth({ name: "drain", now: t0 })).available, 0);
    });

    test("concurrent sends of one dedupId from both nodes store it once", async () => {
      const [first] = nodes;
      await first.queueUpsert({ name: "dedup", kind: "standard", attributes, now: t0 });
      await first.queueUpsert({ name: "dedup-fifo", kind: "fifo", attributes, now: t0 });
      const policy: SendPolicy = { dedupWindowMs: 60_000, overflow: null };
      for (const queue of ["dedup", "dedup-fifo"]) {
        for (let round = 0; round < 20; round++) {
          const dedupId = `${queue}-${round}`;
          const answers = await Promise.all(
            Array.from({ length: 6 }, (_, i) =>
              (nodes[i % 2] as Store).queueSendMany({
                sends: [{ queue, messages: [message({ dedupId, key: "k" })], policy }],
                now: t0,
              }),
            ),
          );
          const ids = new Set(answers.map(([answer]) => answer?.ids[0]));
          assert.equal(ids.size, 1, `every send answers the one stored id (${dedupId})`);
        }
        const record = await first.queueGet({ name: queue });
        assert.equal(record?.counters.published, 20);
        assert.equal((await first.queueDepth({ name: queue, now: t0 })).available, 20);
      }
    });

    test("concurrent sends into a bounded queue from both nodes never pass maxDepth", async () => {
      const [first] = nodes;
      for (const kind of ["standard", "fifo"] as const) {
        const queue = `bounded-${kind}`;
        await first.queueUpsert({ name: queue, kind, attributes, now: t0 });
        const reject: SendPolicy = {
          dedupWindowMs: 0,
          overflow: { maxDepth: 10, policy: "reject", deadLetter: null },
        };
        const results = await Promise.allSettled(
          Array.from({ length: 30 }, (_, i) => send(nodes[i % 2] as Store, queue, randomKeys(2), reject)),
        );
        const refused = results.filter((result) => result.status === "rejected");
        assert.ok(
          refused.every(
            (result) => result.reason instanceof HopperError && result.reason.code === "queue_full",
          ),
        );
        assert.equal(results.length - refused.length, 5, "five sends of two fill ten");
        assert.equal((await first.queueDepth({ name: queue, now: t0 })).available, 10);

        const drop: SendPolicy = {
          dedupWindowMs: 0,
          overflow: { maxDepth: 10, policy: "drop-oldest", deadLetter: null },
        };
        await Promise.all(
          Array.from({ length: 30 }, (_, i) => send(nodes[i % 2] as Store, queue, randomKeys(3), drop)),
        );
        const record = await first.queueGet({ name: queue });
        assert.equal((await first.queueDepth({ name: queue, now: t0 })).available, 10);
        assert.equal(record?.counters.published, 100);
        assert.equal(record?.counters.dropped, 90);
        if (kind === "fifo") {
          for (const group of await heads(queue))
            assert.deepEqual(group, { ...group, heads: 1, headIsFirst: true });
        }
      }
    });
  });
}
