import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperError } from "../../errors.js";
import { noSendPolicy, sendPolicyOf } from "../../model/policies.js";
import { decodeReceipt } from "../../model/receipts.js";
import { seededRandom } from "../../random.js";
import { attributes, message, t0 } from "../../testing/conformance-fixtures.js";
import { openFailing, tempDir } from "../../testing/log-store-helpers.js";
import { exerciseStore } from "../../testing/store-conformance/index.js";
import { dumpStore, type StoreDump } from "../../testing/store-dump.js";
import type { Store } from "../store.js";
import { LogStore } from "./log-store.js";

exerciseStore({
  name: "log (in memory)",
  create: async () => new LogStore({ random: seededRandom(7) }),
});

// The same suite with every change written to a log on disk: each primitive's record is encoded, and
// every answer waits for its fsync.
exerciseStore({
  name: "log (on disk)",
  create: async () => LogStore.open({ dir: tempDir(), random: seededRandom(7) }),
});

/** Sends one message with `dedupId` into "dd" (window 60 s); answers the id that stands for it. */
async function sendDeduplicated(store: Store, dedupId: string, now: number): Promise<string> {
  const policy = sendPolicyOf({ ...attributes, dedupWindowMs: 60_000 }, null);
  const [outcome] = await store.queueSendMany({
    now,
    sends: [{ queue: "dd", policy, messages: [message({ dedupId })] }],
  });
  return outcome?.ids[0] as string;
}

/** Sends one message into `queue` and leases it; answers its seq, from the receipt. */
async function sendAndLease(store: Store, queue: string, now: number): Promise<number> {
  await store.queueSendMany({ now, sends: [{ queue, policy: noSendPolicy, messages: [message()] }] });
  const { messages } = await store.queueLease({
    queue,
    max: 1,
    now,
    leaseExpiresAt: now + 1000,
    expiredBefore: 0,
    inFlightMax: 10,
    deadLetter: null,
  });
  const decoded = decodeReceipt(messages[0]?.receipt ?? "");
  assert.ok(decoded);
  return decoded.seq;
}

/**
 * Drives every kind of change through the Store: queues of each kind and policy, exchanges and
 * bindings, sends with hand-offs, duplicates and overflow, leases, acks, nacks, extends, dead
 * letters, a redrive, expiry, a purge and deletes. Answers receipts still held at the end.
 */
async function scenario(store: Store): Promise<{ held: string[]; firstX: string }> {
  // Over 80 lines: one scenario that drives every kind of change, in order, through the Store.
  const now = t0 + 1000;
  const dlq = { queue: "dlq", maxDeliveries: 2 };
  await store.queueUpsert({ name: "dlq", kind: "standard", attributes, now: t0 });
  await store.queueUpsert({
    name: "std",
    kind: "standard",
    attributes: { ...attributes, deadLetter: dlq },
    now: t0,
  });
  await store.queueUpsert({ name: "fifo", kind: "fifo", attributes, now: t0 });
  const dedup = { ...attributes, dedupWindowMs: 60_000 };
  await store.queueUpsert({ name: "dd", kind: "standard", attributes: dedup, now: t0 });
  const overflow = { ...attributes, maxDepth: 3, overflow: "drop-oldest" as const };
  await store.queueUpsert({ name: "ov", kind: "standard", attributes: overflow, now: t0 });
  for (const name of ["tmp", "gone"])
    await store.queueUpsert({ name, kind: "standard", attributes, now: t0 });
  await store.queueUpsert({
    name: "std",
    kind: "standard",
    attributes: { ...attributes, deadLetter: dlq, delayMs: 5 },
    now: t0,
  });

  await store.exchangeUpsert({ name: "ex", type: "topic", alternate: null, now: t0 });
  await store.exchangeUpsert({ name: "ex", type: "topic", alternate: "dlq", now: t0 });
  await store.exchangeUpsert({ name: "ex2", type: "fanout", alternate: null, now: t0 });
  await store.bindingUpsert({ exchange: "ex", destination: { kind: "queue", name: "std" }, pattern: "a.*" });
  await store.bindingUpsert({ exchange: "ex", destination: { kind: "queue", name: "gone" }, pattern: "#" });
  await store.bindingUpsert({ exchange: "ex", destination: { kind: "exchange", name: "ex2" }, pattern: "b" });
  await store.bindingUpsert({ exchange: "ex2", destination: { kind: "queue", name: "dlq" }, pattern: "" });
  await store.bindingDelete({ exchange: "ex", destination: { kind: "exchange", name: "ex2" }, pattern: "b" });
  await store.exchangeUpsert({ name: "ex3", type: "direct", alternate: null, now: t0 });
  await store.exchangeDelete({ name: "ex3" });

  const json = { ...message({ body: '{"a":[1,"é"]}' }), contentType: "application/json" };
  await store.queueSendMany({
    now,
    sends: [
      {
        queue: "std",
        policy: noSendPolicy,
        messages: [
          json,
          message({ priority: 3 }),
          message({ visibleAt: now + 60_000 }),
          ...Array.from({ length: 8 }, () => message()),
        ],
      },
      {
        queue: "fifo",
        policy: noSendPolicy,
        messages: ["a", "b", "a", "a", "b"].map((key) => message({ key })),
      },
      { queue: "tmp", policy: noSendPolicy, messages: [message(), message()] },
      { queue: "gone", policy: noSendPolicy, messages: [message()] },
    ],
  });
  const handoff = { max: 2, leaseExpiresAt: now + 30_000, inFlightMax: 100 };
  const [handed] = await store.queueSendMany({
    now,
    sends: [{ queue: "std", policy: noSendPolicy, messages: [message(), message()], handoff }],
  });
  const firstX = await sendDeduplicated(store, "x", now);
  for (const dedupId of ["y", "x"]) await sendDeduplicated(store, dedupId, now);
  for (let i = 0; i < 5; i++) {
    await store.queueSendMany({
      now,
      sends: [
        { queue: "ov", policy: sendPolicyOf(overflow, null), messages: [message({ publishedAt: now + i })] },
      ],
    });
  }

  const lease = (queue: string, max: number, at = now) =>
    store.queueLease({
      queue,
      max,
      now: at,
      leaseExpiresAt: at + 30_000,
      expiredBefore: at - attributes.retentionMs,
      inFlightMax: 1000,
      deadLetter: queue === "std" ? { queues: ["dlq"], maxDeliveries: 2 } : null,
    });
  const first = await lease("std", 6);
  const receipts = first.messages.map((m) => m.receipt);
  await store.queueAck({ queue: "std", receipts: receipts.slice(0, 2) });
  const retry = () => 10;
  await store.queueNack({
    queue: "std",
    receipts: receipts.slice(2, 4),
    now,
    retryDelayMs: retry,
    deadLetter: null,
  });
  await store.queueExtend({ queue: "std", receipts: receipts.slice(4, 5), leaseExpiresAt: now + 90_000 });
  // Twice more past each lease: the nacked messages reach their last delivery and are dead-lettered.
  const second = await lease("std", 3, now + 20);
  await store.queueNack({
    queue: "std",
    receipts: second.messages.map((m) => m.receipt),
    now: now + 20,
    retryDelayMs: retry,
    deadLetter: { queues: ["dlq"], maxDeliveries: 2 },
  });
  const heads = await lease("fifo", 5);
  await store.queueAck({ queue: "fifo", receipts: heads.messages.slice(0, 1).map((m) => m.receipt) });
  await store.queueMove({
    queue: "dlq",
    to: "std",
    max: 1,
    now: now + 30,
    policies: new Map([["std", noSendPolicy]]),
  });
  await store.queueExpire({ queue: "ov", expiredBefore: now + 1, max: 1, now: now + 120_000 });
  await store.queuePurge({ queue: "tmp" });
  await store.queueDelete({ name: "gone" });
  const held = [
    ...receipts.slice(4, 6),
    ...(handed?.leased.map((m) => m.receipt) ?? []),
    ...heads.messages.slice(1).map((m) => `fifo:${m.receipt}`),
  ];
  return { held, firstX };
}

/** Leases up to `max` of the queue's messages at t0 and acks them. */
async function leaseAndAck(store: LogStore, queue: string, max: number): Promise<void> {
  const lease = { queue, max, now: t0, leaseExpiresAt: t0 + 1000, expiredBefore: 0 };
  const { messages } = await store.queueLease({ ...lease, inFlightMax: 1000, deadLetter: null });
  await store.queueAck({ queue, receipts: messages.map((m) => m.receipt) });
}

/**
 * Closes `store` and opens its directory again: the reopened store holds the same state as of `at`,
 * and still knows the dedupId "x" the scenario sent first (as `firstX`).
 */
async function closeAndReopen(
  store: LogStore,
  dir: string,
  at: number,
  firstX: string,
): Promise<{ reopened: LogStore; before: StoreDump }> {
  const before = await dumpStore(store, at);
  await store.close();
  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  assert.deepEqual(await dumpStore(reopened, at), before);
  assert.equal(await sendDeduplicated(reopened, "x", at), firstX, "the dedupId is remembered");
  return { reopened, before };
}

test("log store: reopening replays the log into the same state, leases and all", async () => {
  const dir = tempDir();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  const { held, firstX } = await scenario(store);
  const at = t0 + 2000;
  const { reopened, before } = await closeAndReopen(store, dir, at, firstX);
  // Leases held before the restart are still the latest: their receipts ack.
  const results = await Promise.all(
    held.map((receipt) =>
      receipt.startsWith("fifo:")
        ? reopened.queueAck({ queue: "fifo", receipts: [receipt.slice(5)] })
        : reopened.queueAck({ queue: "std", receipts: [receipt] }),
    ),
  );
  assert.deepEqual(
    results.flat(),
    held.map(() => ({ ok: true })),
  );
  // New messages take seqs after every one the log has seen, so no receipt can name two messages.
  await reopened.queueSendMany({
    now: at,
    sends: [{ queue: "dd", policy: noSendPolicy, messages: [message()] }],
  });
  await reopened.close();
  const third = LogStore.open({ dir, random: seededRandom(3) });
  assert.deepEqual(
    (await third.queueGet({ name: "std" }))?.counters.acked,
    (before.queues.find((entry) => entry.queue.name === "std")?.queue.counters.acked ?? 0) + 4,
  );
  await third.close();
});

test("log store: compaction rewrites the log as the state, and the state survives it", async () => {
  const dir = tempDir();
  // Compact whenever the log holds four times the live state, however small.
  const store = LogStore.open({ dir, random: seededRandom(1), compactBytesMin: 1 });
  const { held, firstX } = await scenario(store);
  assert.ok(store.logStats.compactions > 0, "the scenario's log outgrew four times its state");
  // The newest message leaves before the snapshot: its seq must still never be given again.
  const newest = await sendAndLease(store, "tmp", t0 + 1500);
  await store.queuePurge({ queue: "tmp" });
  // And once more at the end, so that the last snapshot holds everything the scenario made.
  const compactions = store.logStats.compactions;
  await store.compact();
  assert.equal(store.logStats.compactions, compactions + 1);
  const at = t0 + 2000;
  const { reopened } = await closeAndReopen(store, dir, at, firstX);
  const [receipt] = held;
  assert.deepEqual(await reopened.queueAck({ queue: "std", receipts: [receipt as string] }), [{ ok: true }]);
  assert.ok((await sendAndLease(reopened, "tmp", at)) > newest, "a seq is never given twice");
  await reopened.close();
});

test("log store: a call that fails writes nothing to the log", async () => {
  const dir = tempDir();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const full = sendPolicyOf({ ...attributes, maxDepth: 1 }, null);
  await assert.rejects(
    store.queueSendMany({
      now: t0,
      sends: [
        { queue: "q", policy: noSendPolicy, messages: [message()] },
        { queue: "q", policy: full, messages: [message()] },
      ],
    }),
  );
  await store.close();
  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  const record = await reopened.queueGet({ name: "q" });
  assert.equal(record?.counters.published, 0);
  assert.equal((await reopened.queueDepth({ name: "q", now: t0 })).available, 0);
  await reopened.close();
});

test("log store: a send past bytesMax is refused whole with store_full; room comes back as messages leave", async () => {
  // Three messages of 1 KiB with their fields fit; a fourth does not.
  const store = new LogStore({ random: seededRandom(1), bytesMax: 4200 });
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const kib = () => message({ body: "x".repeat(1024) });
  const send = (count: number) =>
    store.queueSendMany({
      now: t0,
      sends: [{ queue: "q", policy: noSendPolicy, messages: Array.from({ length: count }, kib) }],
    });
  await send(2);
  await assert.rejects(
    send(2),
    (error: unknown) => error instanceof HopperError && error.code === "store_full",
  );
  assert.equal((await store.queueGet({ name: "q" }))?.counters.published, 2, "nothing of the refused send");
  await send(1);
  await leaseAndAck(store, "q", 3);
  await send(3);
  await leaseAndAck(store, "q", 3);
  // Empty again: headers count as a body does, and 8 KiB of them does not fit where 1 KiB of body does.
  await assert.rejects(
    store.queueSendMany({
      now: t0,
      sends: [
        { queue: "q", policy: noSendPolicy, messages: [message({ headers: { big: "h".repeat(8192) } })] },
      ],
    }),
    (error: unknown) => error instanceof HopperError && error.code === "store_full",
  );
  await send(1);
  await store.close();
});

test("log store: a JSON body counts its UTF-8 bytes against bytesMax, sent as text or read back after a restart", async () => {
  // 10,002 UTF-16 units, 30,002 UTF-8 bytes: sent as text (as the broker sends a serialized JSON value),
  // read back from the log as bytes. Counted in bytes both times, with its fields it fits 30,400, and
  // leaves no room for a second message, before the restart and after it.
  const dir = tempDir();
  const body = JSON.stringify("界".repeat(10_000));
  const json = (text: string) => ({ ...message(), body: text, contentType: "application/json" });
  const sendOne = (store: LogStore, text: string) =>
    store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [json(text)] }] });
  const full = (error: unknown) => error instanceof HopperError && error.code === "store_full";
  const first = LogStore.open({ dir, random: seededRandom(1), bytesMax: 30_400 });
  await first.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  await sendOne(first, body);
  await assert.rejects(sendOne(first, "1"), full);
  await first.close();
  const reopened = LogStore.open({ dir, random: seededRandom(1), bytesMax: 30_400 });
  await assert.rejects(sendOne(reopened, "1"), full);
  assert.equal((await reopened.queueGet({ name: "q" }))?.counters.published, 1);
  await reopened.close();
});

test("log store: a body given as a view of a larger buffer is held in memory of its own, also after a restart", async () => {
  // A request's bytes, the log's read chunk or Node's 8 KiB pool: holding a view would keep all of it.
  const dir = tempDir();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const request = Buffer.from('{"messages":[{"body":{"a":[1,2]}}]}');
  const body = request.subarray(21, 32);
  assert.equal(body.toString(), '{"a":[1,2]}');
  const sent = { ...message(), body, contentType: "application/json" };
  await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [sent] }] });
  const ownBuffer = (held: Buffer | string | undefined) =>
    Buffer.isBuffer(held) && held.buffer.byteLength === held.length && held.toString() === '{"a":[1,2]}';
  const peek = async (from: LogStore) =>
    (await from.queuePeek({ queue: "q", state: "available", limit: 1, now: t0 }))[0]?.body;
  assert.ok(ownBuffer(await peek(store)), "held as sent, in a buffer of its own");
  await store.close();
  const reopened = LogStore.open({ dir, random: seededRandom(1) });
  assert.ok(ownBuffer(await peek(reopened)), "read back from the log, in a buffer of its own");
  await reopened.close();
});

test("log store: a failed write found by a read stops the store as well", async () => {
  const { store, failWrites } = openFailing(tempDir());
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  failWrites(true);
  // The read's flush is the first to write the send's record, and fails.
  const sending = store.queueSendMany({
    now: t0,
    sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }],
  });
  await assert.rejects(store.queueGet({ name: "q" }), /log store stopped/);
  await assert.rejects(sending, /log store stopped/);
  failWrites(false);
  await assert.rejects(
    store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }] }),
    /log store stopped/,
  );
  await store.close().catch(() => {});
});

test("log store: a call still waiting for its flush when the store closes is answered, and kept", async () => {
  const dir = tempDir();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const sending = store.queueSendMany({
    now: t0,
    sends: [{ queue: "q", policy: noSendPolicy, messages: [message()] }],
  });
  await store.close();
  assert.equal((await sending)[0]?.ids.length, 1);
  const reopened = LogStore.open({ dir, random: seededRandom(2) });
  assert.equal((await reopened.queueGet({ name: "q" }))?.counters.published, 1);
  await reopened.close();
});

test("log store: a call whose record would pass the log's limit is refused and undone; the store goes on", async () => {
  const store = LogStore.open({ dir: tempDir(), random: seededRandom(1), recordBytesMax: 64 * 1024 });
  await store.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  const big = () => message({ body: "x".repeat(40 * 1024) });
  await assert.rejects(
    store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [big(), big()] }] }),
    (error: unknown) => error instanceof HopperError && error.code === "request_too_large",
  );
  assert.equal((await store.queueGet({ name: "q" }))?.counters.published, 0);
  await store.queueSendMany({ now: t0, sends: [{ queue: "q", policy: noSendPolicy, messages: [big()] }] });
  assert.equal((await store.queueGet({ name: "q" }))?.counters.published, 1);
  await store.close();
});

test("log store: a compaction does not come again until the log has grown past its snapshot", async () => {
  // Remembered dedupIds of acked messages: state that a snapshot writes and a message count misses.
  const store = LogStore.open({ dir: tempDir(), random: seededRandom(1), compactBytesMin: 64 * 1024 });
  const dedup = { ...attributes, dedupWindowMs: 3_600_000 };
  await store.queueUpsert({ name: "d", kind: "standard", attributes: dedup, now: t0 });
  const policy = sendPolicyOf(dedup, null);
  for (let batch = 0; batch < 20; batch++) {
    const messages = Array.from({ length: 100 }, (_, i) =>
      message({ dedupId: `dedup-${batch}-${i}-${"p".repeat(60)}` }),
    );
    await store.queueSendMany({ now: t0, sends: [{ queue: "d", policy, messages }] });
    await leaseAndAck(store, "d", 100);
  }
  await store.compact();
  const after = store.logStats.compactions;
  for (let i = 0; i < 50; i++)
    await store.queueUpsert({ name: "d", kind: "standard", attributes: dedup, now: t0 });
  assert.equal(store.logStats.compactions, after, "fifty small calls after a compaction compact nothing");
  await store.close();
});
