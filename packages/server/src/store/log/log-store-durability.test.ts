/**
 * The log store's durability: no answer leaves before the fdatasync of what it saw, a crash takes back
 * only what was never answered, a failed write stops the store, and a torn tail takes whole calls.
 */
import assert from "node:assert/strict";
import { readdirSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { noSendPolicy } from "../../model/policies.js";
import { seededRandom } from "../../random.js";
import { attributes, message, t0 } from "../../testing/conformance-fixtures.js";
import { openFailing, tempDir } from "../../testing/log-store-helpers.js";
import { fileIo } from "./append-log-io.js";
import { LogStore } from "./log-store.js";

/** Follows a promise: `done` once it has settled, either way. */
function settled(promise: Promise<unknown>): { done: boolean } {
  const state = { done: false };
  const done = () => {
    state.done = true;
  };
  promise.then(done, done);
  return state;
}

async function turns(n: number): Promise<void> {
  for (let turn = 0; turn < n; turn++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * A store on disk whose fdatasyncs wait, from `hold()` on, until `release()` (which lets every held and
 * later one through). `syncBegun()` resolves once a held fdatasync has begun.
 */
function openHeld(dir: string) {
  let holding = false;
  let syncs = 0;
  const held: (() => void)[] = [];
  const store = LogStore.open({
    dir,
    random: seededRandom(1),
    io: {
      sync: async (file) => {
        await fileIo.sync(file);
        if (!holding) return;
        syncs++;
        await new Promise<void>((resolve) => held.push(resolve));
      },
    },
  });
  return {
    store,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      for (const resolve of held.splice(0)) resolve();
    },
    heldSyncs: () => syncs,
    syncBegun: async () => {
      for (let turn = 0; turn < 100_000 && held.length === 0; turn++) await turns(1);
      assert.ok(held.length > 0, "an fdatasync began");
    },
  };
}

test("log store: no answer, write or read, leaves before the fdatasync of what it saw", async () => {
  const { store, hold, release, heldSyncs, syncBegun } = openHeld(tempDir());
  hold();
  const upsert = settled(store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 }));
  const read = settled(store.queueGet({ name: "q" }));
  // A refusal rests on the upsert's change as much as a read does.
  const refused = settled(store.queueUpsert({ name: "q", kind: "fifo", attributes, now: t0 }));
  // The batch is written first: wait for its fdatasync to begin.
  await syncBegun();
  await turns(5);
  assert.equal(heldSyncs(), 1, "one fdatasync for the turn's records");
  assert.deepEqual(
    [upsert.done, read.done, refused.done],
    [false, false, false],
    "nothing before the fdatasync",
  );
  release();
  for (let turn = 0; turn < 100_000 && !(upsert.done && read.done && refused.done); turn++) await turns(1);
  assert.deepEqual([upsert.done, read.done, refused.done], [true, true, true]);
  await store.close();
});

test("log store: a lease answers once the messages it hands out are durable, not waiting for its own record", async () => {
  const { store, hold, release, syncBegun } = openHeld(tempDir());
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const send = () =>
    store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }] });
  for (let i = 0; i < 3; i++) await send();
  hold();
  // The fourth message's record is on its way to the disk, held there.
  const fourth = settled(send());
  await syncBegun();
  const lease = (max: number, autoAck = false) =>
    store.queueLease({
      queue: "q",
      max,
      now: t0,
      leaseExpiresAt: t0 + 1000,
      expiredBefore: 0,
      inFlightMax: 10,
      deadLetter: null,
      autoAck,
    });
  const first = lease(1);
  const firstLease = settled(first);
  // Taken at most once: its delete must be durable before the message is handed out.
  const once = settled(lease(1, true));
  await turns(5);
  assert.equal(firstLease.done, true, "a lease of durable messages answers while its record waits");
  assert.equal(once.done, false, "an autoAck lease waits for its deletes");
  const [leased] = (await first).messages;
  assert.ok(leased);
  let applied: unknown;
  const ack = settled(
    store.queueAck({
      queue: "q",
      receipts: [leased.receipt],
      applied: (results) => {
        applied = results;
      },
    }),
  );
  assert.deepEqual(applied, [{ ok: true }], "the ack is applied as it is called");
  const rest = lease(2);
  const restLease = settled(rest);
  await turns(5);
  assert.deepEqual(
    [fourth.done, ack.done, restLease.done],
    [false, false, false],
    "an ack waits for its record; a lease of the fourth message waits for it",
  );
  release();
  const { messages } = await rest;
  assert.equal(messages.length, 2);
  for (let turn = 0; turn < 100_000 && !(fourth.done && ack.done && once.done); turn++) await turns(1);
  assert.deepEqual([fourth.done, ack.done, once.done], [true, true, true]);
  await store.close();
});

test("log store: a lease a crash takes back leaves its message as it was, and its receipt stale", async () => {
  const dir = tempDir();
  const { store, failWrites } = openFailing(dir);
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  await store.queueSendMany({
    now: t0,
    sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }],
  });
  failWrites(true);
  const lease = { queue: "q", max: 1, now: t0, leaseExpiresAt: t0 + 1000, expiredBefore: 0 };
  // Answered, though its record never reaches the disk: the write fails and the store stops.
  const [lost] = (await store.queueLease({ ...lease, inFlightMax: 10, deadLetter: null })).messages;
  assert.equal(lost?.deliveryCount, 1);
  await assert.rejects(store.ping(), /log store stopped/);
  await store.close().catch(() => {});
  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  assert.equal((await reopened.queueDepth({ name: "q", now: t0 })).available, 1, "available again at once");
  assert.deepEqual(await reopened.queueAck({ queue: "q", receipts: [lost?.receipt as string] }), [
    { error: "stale_receipt" },
  ]);
  const [again] = (await reopened.queueLease({ ...lease, inFlightMax: 10, deadLetter: null })).messages;
  assert.equal(again?.id, lost?.id);
  assert.equal(again?.deliveryCount, 1, "the lost delivery is not counted");
  await reopened.close();
});

test("log store: a failed write stops the store; the log keeps what was answered", async () => {
  const dir = tempDir();
  const { store, failWrites } = openFailing(dir);
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  failWrites(true);
  await assert.rejects(
    store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }] }),
    /log store stopped/,
  );
  failWrites(false);
  await assert.rejects(store.queueGet({ name: "q" }), /log store stopped/);
  await assert.rejects(store.ping(), /log store stopped/);
  await store.close().catch(() => {});
  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  assert.equal((await reopened.queueGet({ name: "q" }))?.counters.published, 0);
  await reopened.close();
});

test("log store: a call is one log record, so a torn tail takes a whole call or none of it", async () => {
  const dir = tempDir();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  for (const name of ["a", "b"]) await store.queueUpsert({ name, kind: "standard", attributes, now: t0 });
  const sends = ["a", "b"].map((queue) => ({
    queue,
    policy: noSendPolicy,
    messages: [message(), message()],
  }));
  await store.queueSendMany({ now: t0, sends });
  await store.close();
  // A crash in the middle of writing the send's record: its last bytes never reached the disk.
  const [segment] = readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort()
    .slice(-1);
  const path = join(dir, segment as string);
  truncateSync(path, statSync(path).size - 100);

  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  for (const name of ["a", "b"]) {
    const queue = await reopened.queueGet({ name });
    assert.equal(queue?.counters.published, 0, `nothing of the torn send in ${name}`);
    assert.equal((await reopened.queueDepth({ name, now: t0 })).available, 0);
  }
  await reopened.close();
});
