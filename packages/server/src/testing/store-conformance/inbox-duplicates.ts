/**
 * The Store contract for an inbox's duplicates: an append is idempotent on (recipient, message id) for
 * dedupWindowMs from the first append, whichever way the entry left meanwhile (acked, expired by
 * maxAgeMs, overflowed by maxDepth) and whether or not the other recipients' entries of the same append
 * are still held. Part of the Store conformance suite (through inboxes.ts).
 */
import assert from "node:assert/strict";
import { t0 } from "../conformance-fixtures.js";
import { type InboxSuite, inboxAttributes, inboxMessage } from "./inbox-harness.js";

const minute = 60_000;
const within = t0 + inboxAttributes.dedupWindowMs - 1;

export function inboxDuplicateTests(suite: InboxSuite): void {
  const { store, inboxTest, create, append, seqs, ack, seen, position } = suite;

  inboxTest("a duplicate is caught for each recipient, some of whose entries are trimmed", async () => {
    await create();
    await seen("a", "phone");
    await seen("b", "phone");
    const repeated = inboxMessage();
    await append(["a", "b", "c"], { message: repeated });
    await append(["b"]);
    await ack("a", "phone", 1, t0 + 1);
    assert.deepEqual(await position("a"), { depth: 0, oldest: 2, head: 1 }, "a's entry is trimmed");
    assert.deepEqual(await append(["c", "a", "b", "d"], { message: repeated, now: t0 + 2 }), [
      { recipient: "c", seq: 1, duplicate: true },
      { recipient: "a", seq: 1, duplicate: true },
      { recipient: "b", seq: 1, duplicate: true },
      { recipient: "d", seq: 1, duplicate: false },
    ]);
    await ack("b", "phone", 2, t0 + 3);
    assert.deepEqual(await append(["b"], { message: repeated, now: t0 + 4 }), [
      { recipient: "b", seq: 1, duplicate: true },
    ]);
    assert.deepEqual(await seqs("c"), [1]);
  });

  inboxTest("a duplicate is caught after its entry expired by maxAgeMs, within dedupWindowMs", async () => {
    await create("chat", { maxAgeMs: minute });
    const repeated = inboxMessage();
    await append(["a", "b"], { message: repeated });
    const swept = await store.inboxSweep({ name: "chat", now: t0 + minute + 1, max: 100 });
    assert.equal(swept.expired, 2);
    assert.deepEqual(await position("a"), { depth: 0, oldest: 2, head: 1 });
    assert.deepEqual(await append(["b", "a"], { message: repeated, now: within }), [
      { recipient: "b", seq: 1, duplicate: true },
      { recipient: "a", seq: 1, duplicate: true },
    ]);
  });

  inboxTest("a duplicate is caught after its entry overflowed maxDepth, within dedupWindowMs", async () => {
    await create("chat", { maxDepth: 2 });
    const repeated = inboxMessage();
    await append(["a"], { message: repeated });
    await append(["a"]);
    await append(["a"]);
    assert.deepEqual(await seqs("a"), [2, 3], "the first entry overflowed");
    assert.deepEqual(await append(["a"], { message: repeated, now: within }), [
      { recipient: "a", seq: 1, duplicate: true },
    ]);
  });

  inboxTest("after the window the same id is a new entry, and both bodies read back", async () => {
    await create();
    const repeated = inboxMessage({ body: Buffer.from("first") });
    await append(["a"], { message: repeated });
    const past = t0 + inboxAttributes.dedupWindowMs + 1;
    await store.inboxSweep({ name: "chat", now: past, max: 100 });
    await append(["a"], { message: { ...repeated, body: Buffer.from("second") }, now: past });
    const { entries } = await store.inboxRead({ name: "chat", recipient: "a", after: 0, limit: 10 });
    assert.deepEqual(
      entries.map((entry) => [entry.seq, entry.id, Buffer.from(entry.body).toString()]),
      [
        [1, repeated.id, "first"],
        [2, repeated.id, "second"],
      ],
    );
  });

  inboxTest("with dedupWindowMs 0 an id is not remembered: the same id appends again", async () => {
    await create("chat", { dedupWindowMs: 0 });
    const repeated = inboxMessage();
    await append(["a"], { message: repeated });
    assert.deepEqual(await append(["a"], { message: repeated }), [
      { recipient: "a", seq: 2, duplicate: false },
    ]);
  });
}
