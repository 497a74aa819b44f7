/**
 * A database written by an older version (before migration 3) opens with its messages intact: those of
 * a FIFO queue join their groups, each group's oldest becoming its head. Needs PostgreSQL
 * (HOPPER_TEST_PG_URL); without it the test is skipped and says why.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { seededRandom } from "../../random.js";
import { attributes, t0 } from "../../testing/conformance-fixtures.js";
import { dropSchemas, pgSkipReason, pgTestUrl, withPgClient } from "../../testing/pg.js";
import { PostgresStore } from "./postgres-store.js";
import { migrations } from "./schema.js";

const url = pgTestUrl;

test("messages stored before FIFO groups existed join them when migration 3 runs", {
  skip: url ? false : pgSkipReason,
}, async () => {
  if (!url) return;
  const schema = `hopper_migrate_${process.pid}`;
  try {
    await withPgClient(url, async (client) => {
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.query(`SET search_path = ${schema}`);
      await client.query(
        "CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at timestamptz DEFAULT now())",
      );
      for (const [index, migration] of migrations.slice(0, 2).entries()) {
        await client.query(migration);
        await client.query("INSERT INTO schema_migrations (version) VALUES ($1)", [index + 1]);
      }
      const { rows } = await client.query<{ queue_id: string; name: string }>(
        `INSERT INTO queues (name, kind, attributes, created_at)
         VALUES ('old-fifo', 'fifo', $1, $2), ('old-standard', 'standard', $1, $2) RETURNING queue_id, name`,
        [JSON.stringify(attributes), t0],
      );
      const queueId = (name: string) => rows.find((row) => row.name === name)?.queue_id;
      const keys = ["a", "a", null, "b", null, "a"];
      for (const [n, key] of keys.entries()) {
        await client.query(
          `INSERT INTO messages (queue_id, id, body, content_type, key, published_at, visible_at)
           VALUES ($1, $2, $3, 'text/plain', $4, $5, $5)`,
          [queueId("old-fifo"), `f${n}`, Buffer.from(`${key ?? "-"}${n}`), key, t0],
        );
      }
      await client.query(
        `INSERT INTO messages (queue_id, id, body, content_type, key, published_at, visible_at)
         VALUES ($1, 's0', 'plain', 'text/plain', NULL, $2, $2)`,
        [queueId("old-standard"), t0],
      );
    });
    const store = await PostgresStore.open({ url, schema, random: seededRandom(3) });
    try {
      const lease = (queue: string) =>
        store.queueLease({
          queue,
          max: 10,
          now: t0,
          leaseExpiresAt: t0 + 30_000,
          expiredBefore: t0 - attributes.retentionMs,
          inFlightMax: 1000,
          deadLetter: null,
        });
      const first = await lease("old-fifo");
      assert.deepEqual(first.messages.map((m) => m.id).sort(), ["f0", "f2", "f3"], "each group's oldest");
      await store.queueAck({ queue: "old-fifo", receipts: first.messages.map((m) => m.receipt) });
      assert.deepEqual((await lease("old-fifo")).messages.map((m) => m.id).sort(), ["f1", "f4"]);
      const [plain] = (await lease("old-standard")).messages;
      assert.equal(plain?.id, "s0");
      assert.equal(plain?.priority, 0);
      const record = await store.queueGet({ name: "old-standard" });
      assert.equal(record?.attributes.maxDepth, null, "attributes added later read as their defaults");
      assert.deepEqual([record?.counters.dropped, record?.counters.redriven], [0, 0]);
    } finally {
      await store.close();
    }
  } finally {
    await dropSchemas(url, [schema]);
  }
});
