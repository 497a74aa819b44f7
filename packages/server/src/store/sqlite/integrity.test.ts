/**
 * The SQLite store against damage done to its file while it was closed (docs/reliability.md): a
 * changed byte inside a body is never delivered, a damaged b-tree page is refused at open, and a
 * database behind its commit-count file is refused.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { test } from "node:test";
import { HopperError } from "../../errors.js";
import { noSendPolicy } from "../../model/policies.js";
import { seededRandom } from "../../random.js";
import { attributes, message, t0 } from "../../testing/conformance-fixtures.js";
import { overwritePage, pageBytes, replaceBytes } from "../../testing/file-damage.js";
import { createTempDir } from "../../testing/server-process.js";
import { commitCountPath } from "./commit-count.js";
import { SqliteStore } from "./sqlite-store.js";

const lease = { max: 10, expiredBefore: 0, inFlightMax: 1000 } as const;

/** A store on a file of its own, with the queues given, and what closing and reopening it takes. */
async function storeWith(queues: { name: string; deadLetterQueue?: string }[]) {
  const dir = createTempDir("hopper-integrity-");
  const path = dir.file("hopper.db");
  let store = new SqliteStore({ path, random: seededRandom(1) });
  for (const { name, deadLetterQueue } of queues) {
    const deadLetter = deadLetterQueue ? { queue: deadLetterQueue, maxDeliveries: 5 } : null;
    await store.queueUpsert({ name, kind: "standard", attributes: { ...attributes, deadLetter }, now: t0 });
  }
  return {
    path,
    dir,
    store: () => store,
    async reopen(options: { integrityCheck?: boolean } = {}) {
      await store.close();
      store = new SqliteStore({ path, random: seededRandom(2), ...options });
      return store;
    },
    async close() {
      await store.close();
    },
  };
}

/** Rejects unless the call throws store_damaged naming `file` and saying `what`. */
function refused(open: () => unknown, file: string, what: RegExp): void {
  assert.throws(open, (error: unknown) => {
    assert.ok(error instanceof HopperError, String(error));
    assert.equal(error.code, "store_damaged");
    assert.ok(error.message.includes(file), error.message);
    assert.match(error.message, what);
    return true;
  });
}

test("sqlite: a body edited in the file goes to the dead-letter queue with reason corrupt, never delivered", async () => {
  const files = await storeWith([{ name: "orders-dlq" }, { name: "orders", deadLetterQueue: "orders-dlq" }]);
  try {
    await files.store().queueSendMany({
      now: t0,
      sends: [{ queue: "orders", policy: noSendPolicy, messages: [message({ body: "AMOUNT-1000-EUR" })] }],
    });
    await files.store().close();
    assert.equal(replaceBytes(files.path, "AMOUNT-1000-EUR", "AMOUNT-9000-EUR"), 1);
    const store = await files.reopen();

    const route = { queues: ["orders-dlq"], maxDeliveries: 5 };
    const leased = await store.queueLease({
      ...lease,
      queue: "orders",
      now: t0 + 1,
      leaseExpiresAt: t0 + 30_000,
      deadLetter: route,
    });
    assert.deepEqual([leased.messages.length, leased.deadLettered, leased.corrupt], [0, 1, 1]);
    assert.equal((await store.queueDepth({ name: "orders", now: t0 + 1 })).available, 0);

    // In the dead-letter queue it says why, and stays undeliverable: its copy keeps the original's checksum.
    const [dead] = await store.queuePeek({ queue: "orders-dlq", state: "available", limit: 10, now: t0 + 1 });
    assert.equal(dead?.headers["x-dead-letter-reason"], "corrupt");
    assert.equal(dead?.corrupt, true);
    const fromDlq = await store.queueLease({
      ...lease,
      queue: "orders-dlq",
      now: t0 + 2,
      leaseExpiresAt: t0 + 30_000,
      deadLetter: null,
    });
    assert.equal(fromDlq.messages.length, 0);
    assert.equal((await store.queueDepth({ name: "orders-dlq", now: t0 + 2 })).corrupt, 1);
  } finally {
    await files.close();
    files.dir.remove();
  }
});

test("sqlite: a body edited in the file, with no dead-letter target, stays counted as corrupt until a purge", async () => {
  const files = await storeWith([{ name: "orders" }]);
  try {
    await files.store().queueSendMany({
      now: t0,
      sends: [
        {
          queue: "orders",
          policy: noSendPolicy,
          messages: [message({ body: "AMOUNT-1000-EUR" }), message({ body: "AMOUNT-2000-EUR" })],
        },
      ],
    });
    await files.store().close();
    assert.equal(replaceBytes(files.path, "AMOUNT-1000-EUR", "AMOUNT-9000-EUR"), 1);
    const store = await files.reopen();

    const receive = (now: number) =>
      store.queueLease({ ...lease, queue: "orders", now, leaseExpiresAt: now + 30_000, deadLetter: null });
    const first = await receive(t0 + 1);
    assert.deepEqual(
      first.messages.map((leased) => String(leased.body)),
      ["AMOUNT-2000-EUR"],
      "only the intact message is delivered",
    );
    assert.equal(first.corrupt, 1);
    // Long after every lease ended, only the intact message is leased again.
    assert.deepEqual(
      (await receive(t0 + 3_600_000)).messages.map((leased) => String(leased.body)),
      ["AMOUNT-2000-EUR"],
    );
    const depth = await store.queueDepth({ name: "orders", now: t0 + 3_600_000 });
    assert.deepEqual([depth.corrupt, depth.available, depth.inFlight], [1, 0, 1]);
    const listed = await store.queueListWithDepth({ now: t0 + 3_600_000 });
    assert.equal(listed[0]?.depth.corrupt, 1);
    const peeked = await store.queuePeek({
      queue: "orders",
      state: "available",
      limit: 10,
      now: t0 + 3_600_000,
    });
    assert.deepEqual(
      peeked.map((shown) => [String(shown.body), shown.corrupt]),
      [["AMOUNT-9000-EUR", true]],
    );

    assert.deepEqual(await store.queuePurge({ queue: "orders" }), { purged: 2 });
    assert.equal((await store.queueDepth({ name: "orders", now: t0 + 3_600_000 })).corrupt, 0);
  } finally {
    await files.close();
    files.dir.remove();
  }
});

test("sqlite: a redrive leaves a message whose body was edited where it is, marked corrupt", async () => {
  const files = await storeWith([{ name: "orders" }, { name: "dlq" }]);
  try {
    await files.store().queueSendMany({
      now: t0,
      sends: [
        {
          queue: "dlq",
          policy: noSendPolicy,
          messages: [message({ body: "AMOUNT-1000-EUR" }), message({ body: "AMOUNT-2000-EUR" })],
        },
      ],
    });
    await files.store().close();
    replaceBytes(files.path, "AMOUNT-1000-EUR", "AMOUNT-9000-EUR");
    const store = await files.reopen();
    const moved = await store.queueMove({
      queue: "dlq",
      to: "orders",
      max: 10,
      now: t0 + 1,
      policies: new Map([["orders", noSendPolicy]]),
    });
    assert.equal(moved.moved, 1);
    const depth = await store.queueDepth({ name: "dlq", now: t0 + 1 });
    assert.deepEqual([depth.corrupt, depth.available], [1, 0]);
  } finally {
    await files.close();
    files.dir.remove();
  }
});

test("sqlite: a damaged b-tree page is refused at open by quick_check, naming the file; skipping the check opens it", async () => {
  const files = await storeWith([{ name: "q" }]);
  try {
    const bodies = Array.from({ length: 200 }, (_, i) => message({ body: `${i}:${"x".repeat(1000)}` }));
    await files.store().queueSendMany({
      now: t0,
      sends: [{ queue: "q", policy: noSendPolicy, messages: bodies }],
    });
    await files.store().close();
    // The page that holds the 100th body: a leaf of the messages table.
    const page = Math.floor(readFileSync(files.path).indexOf("100:xxx") / pageBytes) + 1;
    overwritePage(files.path, page, (offset) => offset * 31 + 7);

    refused(() => new SqliteStore({ path: files.path, random: seededRandom(3) }), files.path, /quick_check/);
    const opened = await files.reopen({ integrityCheck: false });
    assert.ok(await opened.queueGet({ name: "q" }), "the queues' page is intact and read");
  } finally {
    await files.close();
    files.dir.remove();
  }
});

test("sqlite: a database behind its commit-count file is refused; without the file it opens", async () => {
  const files = await storeWith([{ name: "q" }]);
  try {
    await files.store().close();
    const sidePath = commitCountPath(files.path);
    // The database as it was two commits ago, as a damaged WAL or an old copy would leave it.
    const older = readFileSync(files.path);
    await files.reopen();
    await files.store().queueUpsert({ name: "r", kind: "standard", attributes, now: t0 });
    await files.store().queueUpsert({ name: "s", kind: "standard", attributes, now: t0 });
    await files.store().close();
    writeFileSync(files.path, older);

    const open = () => new SqliteStore({ path: files.path, random: seededRandom(5) });
    refused(open, files.path, /2 committed transactions are gone/);
    writeFileSync(sidePath, "not a count");
    refused(open, sidePath, /damaged/);
    rmSync(sidePath);
    const opened = await files.reopen();
    assert.deepEqual(
      (await opened.queueList()).map((queue) => queue.name),
      ["q"],
    );
  } finally {
    await files.close();
    files.dir.remove();
  }
});

test("sqlite: a database emptied or deleted under its commit-count file is refused", async () => {
  const files = await storeWith([{ name: "q" }]);
  try {
    await files.store().close();
    const open = () => new SqliteStore({ path: files.path, random: seededRandom(6) });
    truncateSync(files.path, 0);
    refused(open, files.path, /holds 0 commits/);
    rmSync(files.path);
    refused(open, files.path, /holds 0 commits/);
  } finally {
    files.dir.remove();
  }
});
