/**
 * The PostgreSQL inbox store where many nodes share it (inbox-store.ts, "Locks"): appends from two
 * pools to overlapping recipients give each recipient contiguous sequences, with no hole and no
 * duplicate, while a reader never sees a hole; a body is one row per append, deleted by the trim that
 * releases its last entry; an append on one node wakes the other through one NOTIFY. Needs
 * HOPPER_TEST_PG_URL; skipped with the reason without it.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { seededRandom } from "../../random.js";
import { t0 } from "../../testing/conformance-fixtures.js";
import { dropSchemas, pgSkipReason, pgTestUrl, withPgClient } from "../../testing/pg.js";
import { inboxAttributes, inboxMessage } from "../../testing/store-conformance/inbox-harness.js";
import type { StoreEvent } from "../store.js";
import { PostgresStore } from "./postgres-store.js";

const schemas: string[] = [];
let nextSchema = 0;
const deliveryDeadlineMs = 5_000;

/** Two stores (two pools, as two nodes) over one fresh schema. */
async function twoNodes(url: string): Promise<[PostgresStore, PostgresStore]> {
  const schema = `hopper_inbox_${process.pid}_${nextSchema++}`;
  schemas.push(schema);
  const first = await PostgresStore.open({ url, schema, random: seededRandom(1), poolSize: 4 });
  const second = await PostgresStore.open({ url, schema, random: seededRandom(2), poolSize: 4 });
  return [first, second];
}

if (!pgTestUrl) {
  test("PostgreSQL inbox concurrency", { skip: pgSkipReason }, () => {});
} else {
  const url = pgTestUrl;
  after(() => dropSchemas(url, schemas));

  test("concurrent appends from two pools give each recipient contiguous seqs, no hole, no duplicate", async () => {
    const nodes = await twoNodes(url);
    const [first] = nodes;
    try {
      await first.inboxUpsert({ name: "chat", attributes: inboxAttributes, epoch: "e", now: t0 });
      const recipients = Array.from({ length: 8 }, (_, i) => `r${i}`);
      const random = seededRandom(42);
      // Each append names 2 to 8 recipients in a shuffled order, so lock order is the store's to keep.
      const appends = Array.from({ length: 160 }, () => {
        const named = recipients.filter(() => random.float() < 0.5);
        const chosen = named.length >= 2 ? named : recipients.slice(0, 2);
        return chosen.sort(() => random.float() - 0.5);
      });
      const namedCount = new Map<string, number>();
      for (const named of appends) for (const r of named) namedCount.set(r, (namedCount.get(r) ?? 0) + 1);

      let appending = true;
      const holesSeen: string[] = [];
      const reader = (async () => {
        while (appending) {
          const { entries, state } = await first.inboxRead({
            name: "chat",
            recipient: "r0",
            after: 0,
            limit: 1000,
          });
          const seqs = entries.map((entry) => entry.seq);
          const expected = Array.from({ length: state.head }, (_, i) => i + 1);
          if (JSON.stringify(seqs) !== JSON.stringify(expected))
            holesSeen.push(`${seqs} at head ${state.head}`);
        }
      })();
      const answers = await Promise.all(
        appends.map((named, i) =>
          (nodes[i % 2] as PostgresStore).inboxAppend({
            name: "chat",
            recipients: named,
            message: inboxMessage({ id: `append-${i}` }),
            now: t0 + i,
          }),
        ),
      );
      appending = false;
      await reader;
      assert.deepEqual(holesSeen, [], "a read never shows a hole");

      for (const recipient of recipients) {
        const n = namedCount.get(recipient) ?? 0;
        const { entries, state } = await first.inboxRead({ name: "chat", recipient, after: 0, limit: 1000 });
        assert.deepEqual(
          entries.map((entry) => entry.seq),
          Array.from({ length: n }, (_, i) => i + 1),
          `${recipient}: 1..${n}, contiguous`,
        );
        assert.equal(state.head, n);
        // Each seq went to exactly the append whose message the entry holds.
        const given = new Map<number, string>();
        answers.forEach(({ results }, i) => {
          for (const result of results) {
            if (result.recipient !== recipient || !("seq" in result)) continue;
            assert.equal(result.duplicate, false);
            assert.equal(given.has(result.seq), false, `${recipient}: seq ${result.seq} given twice`);
            given.set(result.seq, `append-${i}`);
          }
        });
        assert.deepEqual(
          entries.map((entry) => entry.id),
          entries.map((entry) => given.get(entry.seq)),
        );
      }
      assert.equal((await first.inboxGet({ name: "chat" }))?.counters.appended, appends.flat().length);
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  test("concurrent acks whose trims share many bodies all commit, and release every body", async () => {
    const nodes = await twoNodes(url);
    const [first] = nodes;
    const schema = schemas.at(-1) as string;
    try {
      await first.inboxUpsert({ name: "chat", attributes: inboxAttributes, epoch: "e", now: t0 });
      const recipients = Array.from({ length: 24 }, (_, i) => `r${i}`);
      // Every append goes to every recipient, so each recipient's trim releases every body. Before the
      // bodies were locked in body_id order, acks like these deadlocked three times in a row.
      for (let i = 0; i < 40; i++) {
        await first.inboxAppend({ name: "chat", recipients, message: inboxMessage(), now: t0 });
      }
      await Promise.all(
        recipients.map((recipient, i) =>
          (nodes[i % 2] as PostgresStore).inboxAck({
            name: "chat",
            recipient,
            device: "d",
            seq: 40,
            now: t0,
          }),
        ),
      );
      const bodies = await withPgClient(url, async (client) => {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${schema}.inbox_bodies`,
        );
        return rows[0]?.n;
      });
      assert.equal(bodies, 0);
      const inbox = await first.inboxGet({ name: "chat" });
      assert.deepEqual([inbox?.counters.acked, inbox?.entries], [40 * 24, 0]);
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  test("an append stores its body in one row; the trim of its last entry deletes it", async () => {
    const nodes = await twoNodes(url);
    const [store] = nodes;
    const schema = schemas.at(-1) as string;
    try {
      await store.inboxUpsert({ name: "chat", attributes: inboxAttributes, epoch: "e", now: t0 });
      await store.inboxAppend({
        name: "chat",
        recipients: ["a", "b", "c"],
        message: inboxMessage(),
        now: t0,
      });
      await store.inboxAppend({ name: "chat", recipients: ["a"], message: inboxMessage(), now: t0 });
      const bodies = () =>
        withPgClient(url, async (client) => {
          const { rows } = await client.query<{ entries: number }>(
            `SELECT entries FROM ${schema}.inbox_bodies ORDER BY body_id`,
          );
          return rows.map((row) => row.entries);
        });
      assert.deepEqual(await bodies(), [3, 1], "one body per append, counting its entries");
      await store.inboxAck({ name: "chat", recipient: "a", device: "d", seq: 2, now: t0 });
      await store.inboxAck({ name: "chat", recipient: "b", device: "d", seq: 1, now: t0 });
      assert.deepEqual(await bodies(), [1]);
      await store.inboxAck({ name: "chat", recipient: "c", device: "d", seq: 1, now: t0 });
      assert.deepEqual(await bodies(), []);
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  test("an append on one node wakes the other with one NOTIFY naming its recipients, or null", async () => {
    const nodes = await twoNodes(url);
    const [first, second] = nodes;
    const events: StoreEvent[] = [];
    second.watch((event) => events.push(event));
    /** Waits until an event after index `from` matches; answers it. */
    const waitFor = async (from: number, matches: (event: StoreEvent) => boolean) => {
      const deadline = Date.now() + deliveryDeadlineMs;
      for (;;) {
        const found = events.slice(from).find(matches);
        if (found) return found;
        assert.ok(Date.now() < deadline, `no such event; heard ${JSON.stringify(events.slice(from))}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    try {
      // The first node counts the second as listening from the `present` it said as it opened (its
      // resync may come before watch); the upsert's own NOTIFY goes in its commit whoever listens.
      await first.inboxUpsert({ name: "chat", attributes: inboxAttributes, epoch: "e", now: t0 });
      assert.deepEqual(
        await waitFor(0, (event) => event.kind === "inbox"),
        { kind: "inbox", inbox: "chat", recipients: null },
        "a namespace created: every subscriber looks again",
      );
      let from = events.length;
      await first.inboxAppend({
        name: "chat",
        recipients: ["b", "a", "b"],
        message: inboxMessage(),
        now: t0,
      });
      assert.deepEqual(await waitFor(from, (event) => event.kind === "inbox"), {
        kind: "inbox",
        inbox: "chat",
        recipients: ["a", "b"],
      });
      from = events.length;
      const many = Array.from({ length: 300 }, (_, i) => `recipient-with-a-long-name-${i}`);
      await first.inboxAppend({ name: "chat", recipients: many, message: inboxMessage(), now: t0 });
      assert.deepEqual(
        await waitFor(from, (event) => event.kind === "inbox"),
        { kind: "inbox", inbox: "chat", recipients: null },
        "too many to name in one payload: the whole namespace",
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(
        events.slice(from).filter((event) => event.kind === "inbox").length,
        1,
        "one NOTIFY per append, not per recipient",
      );
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });
}
