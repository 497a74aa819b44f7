import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { limits } from "../../limits.js";
import { noSendPolicy } from "../../model/policies.js";
import { seededRandom } from "../../random.js";
import { checkpointed } from "../../testing/checkpoints.js";
import { attributes, message, t0 } from "../../testing/conformance-fixtures.js";
import { exerciseStore } from "../../testing/store-conformance/index.js";
import { SqliteStore } from "./sqlite-store.js";

exerciseStore({
  name: "sqlite",
  create: async () => new SqliteStore({ path: ":memory:", random: seededRandom(7) }),
});

test("sqlite: a file store keeps its messages across reopen, and concurrent writes share commits", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-sqlite-"));
  try {
    const path = join(dir, "hopper.db");
    const store = new SqliteStore({ path, random: seededRandom(1) });
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: 1 });
    const before = store.commitStats;
    await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        store.queueSendMany({
          now: 1,
          sends: [
            {
              queue: "q",
              policy: noSendPolicy,
              messages: [
                {
                  id: `m${i}`,
                  body: Buffer.from("x"),
                  contentType: "text/plain",
                  headers: {},
                  key: null,
                  priority: 0,
                  dedupId: null,
                  publishedAt: 1,
                  visibleAt: 1,
                },
              ],
            },
          ],
        }),
      ),
    );
    const after = store.commitStats;
    assert.equal(after.jobs - before.jobs, 100);
    assert.ok(
      after.commits - before.commits < 10,
      `100 sends took ${after.commits - before.commits} commits`,
    );
    await store.close();
    const reopened = new SqliteStore({ path, random: seededRandom(2) });
    assert.equal((await reopened.queueDepth({ name: "q", now: 2 })).available, 100);
    await reopened.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sqlite: a burst of sends over the commit bound commits in parts, and the first part is answered before the next runs", async () => {
  const store = new SqliteStore({ path: ":memory:", random: seededRandom(3) });
  try {
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
    const perSend = 100;
    const sends = Math.ceil((limits.commitMessagesMax * 1.5) / perSend);
    const before = store.commitStats.commits;
    // Each send notes how many commits had run when it was answered.
    const answeredAfter = await Promise.all(
      Array.from({ length: sends }, async () => {
        const messages = Array.from({ length: perSend }, () => message());
        await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages }] });
        return store.commitStats.commits - before;
      }),
    );
    const inFirst = Math.floor(limits.commitMessagesMax / perSend);
    assert.deepEqual(answeredAfter, [
      ...Array.from({ length: inFirst }, () => 1),
      ...Array.from({ length: sends - inFirst }, () => 2),
    ]);

    // One call larger than the bound is not split: its messages commit together.
    const large = Array.from({ length: limits.commitMessagesMax * 2 }, () => message());
    const beforeLarge = store.commitStats.commits;
    await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: large }] });
    assert.equal(store.commitStats.commits - beforeLarge, 1);
    assert.equal(
      (await store.queueDepth({ name: "q", now: t0 })).available,
      sends * perSend + limits.commitMessagesMax * 2,
    );
  } finally {
    await store.close();
  }
});

/** Messages in the queues of the tests below: two purge steps and a part of a third. */
const largeCount = limits.purgeStepMax * 2 + 10;

/**
 * Runs `check` on a fresh in-memory store holding the queue `q` (of `kind`) with `count` messages, in
 * sends of 1,000, every message with the key given; closes the store after.
 */
async function withLargeQueue(
  kind: "standard" | "fifo",
  count: number,
  key: string | null,
  check: (store: SqliteStore) => Promise<void>,
): Promise<void> {
  const store = new SqliteStore({ path: ":memory:", random: seededRandom(count) });
  try {
    await store.queueUpsert({ name: "q", kind, attributes, now: t0 });
    for (let sent = 0; sent < count; sent += 1000) {
      const messages = Array.from({ length: Math.min(1000, count - sent) }, () =>
        message({ key: key ?? undefined }),
      );
      await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages }] });
    }
    await check(store);
  } finally {
    await store.close();
  }
}

const sendOne = (store: SqliteStore, overrides: { key?: string; body?: string } = {}) =>
  store.queueSendMany({
    now: t0,
    sends: [{ queue: "q", policy: noSendPolicy, messages: [message(overrides)] }],
  });

test("sqlite: a purge larger than a step commits step by step, and a send made meanwhile stays", () =>
  withLargeQueue("standard", largeCount, null, async (store) => {
    const before = store.commitStats;
    const [purged] = await Promise.all([store.queuePurge({ queue: "q" }), sendOne(store)]);
    assert.deepEqual(purged, { purged: largeCount });
    const commits = store.commitStats.commits - before.commits;
    assert.ok(commits >= 3, `three steps, each its own commit, so other calls run between them: ${commits}`);
    assert.equal((await store.queueDepth({ name: "q", now: t0 })).available, 1);
    assert.equal((await store.queueGet({ name: "q" }))?.counters.purged, largeCount);
  }));

test("sqlite: a FIFO group whose older messages a purge took gets a message sent meanwhile as its head", () =>
  withLargeQueue("fifo", limits.purgeStepMax + 10, "g", async (store) => {
    const [purged] = await Promise.all([
      store.queuePurge({ queue: "q" }),
      sendOne(store, { key: "g", body: "after" }),
    ]);
    assert.deepEqual(purged, { purged: limits.purgeStepMax + 10 });
    const { messages } = await store.queueLease({
      queue: "q",
      max: 10,
      now: t0,
      leaseExpiresAt: t0 + 30_000,
      expiredBefore: 0,
      inFlightMax: 1000,
      deadLetter: null,
    });
    assert.deepEqual(
      messages.map((m) => m.body.toString()),
      ["after"],
    );
  }));

test("sqlite: deleting a queue larger than a step commits step by step and removes every message", () =>
  withLargeQueue("standard", largeCount, null, async (store) => {
    const before = store.commitStats;
    const [deleted] = await Promise.all([store.queueDelete({ name: "q" }), sendOne(store)]);
    assert.deepEqual(deleted, { removed: largeCount + 1 }, "the message sent meanwhile went with the queue");
    const commits = store.commitStats.commits - before.commits;
    assert.ok(commits >= 3, `three steps, each its own commit: ${commits}`);
    assert.equal(await store.queueGet({ name: "q" }), undefined);
  }));

test("sqlite: two deletes of one large queue at once both answer, and together count every message", () =>
  withLargeQueue("standard", largeCount, null, async (store) => {
    const [first, second] = await Promise.all([
      store.queueDelete({ name: "q" }),
      store.queueDelete({ name: "q" }),
    ]);
    assert.equal(first.removed + second.removed, largeCount);
    assert.equal(await store.queueGet({ name: "q" }), undefined);
  }));

test("sqlite: a file store's WAL is copied into the database by its checkpoint thread, not in a commit", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-sqlite-"));
  const store = new SqliteStore({ path: join(dir, "hopper.db"), random: seededRandom(8) });
  try {
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
    // About 3,000 pages of WAL: below the main connection's backstop, so no commit checkpoints.
    for (let i = 0; i < 10; i++) {
      const messages = Array.from({ length: 1000 }, () => message({ body: "x".repeat(1000) }));
      await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages }] });
    }
    await checkpointed(store, 2000);
    assert.ok((store.checkpointStats?.frames ?? 0) >= 2000, JSON.stringify(store.checkpointStats));
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
