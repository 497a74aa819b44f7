/**
 * The Store contract for inboxes (InboxStore, DESIGN.md §6): namespaces and their epochs, fan-out
 * appends with per-recipient sequences and duplicates, reads after a cursor, and acks.
 * inbox-retention.ts holds trimming, idle recipients, devices and bodies; inbox-duplicates.ts what an
 * append remembers.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store.
 */
import assert from "node:assert/strict";
import { describe } from "node:test";
import { zeroInboxCounters } from "../../model/inbox.js";
import { rejectsWith, t0 } from "../conformance-fixtures.js";
import type { StoreFactory } from "./harness.js";
import { inboxDuplicateTests } from "./inbox-duplicates.js";
import { inboxAttributes, inboxMessage, inboxSuite } from "./inbox-harness.js";
import { inboxRetentionTests } from "./inbox-retention.js";

/** Every inbox section, against the stores `factory` opens, a fresh one per test. */
export function inboxTests(factory: StoreFactory): void {
  describe(`Store conformance, inboxes: ${factory.name}`, () => {
    const suite = inboxSuite(factory);
    inboxLogTests(suite);
    inboxRetentionTests(suite);
    inboxDuplicateTests(suite);
  });
}

function inboxLogTests(suite: ReturnType<typeof inboxSuite>): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, inboxTest, create, append, read, seqs, ack, record } = suite;

  inboxTest("upsert creates with the given epoch; an update keeps the epoch and createdAt", async () => {
    const created = await store.inboxUpsert({
      name: "chat",
      attributes: inboxAttributes,
      epoch: "e1",
      now: t0,
    });
    assert.equal(created.created, true);
    assert.deepEqual(created.inbox, {
      name: "chat",
      attributes: inboxAttributes,
      epoch: "e1",
      createdAt: t0,
      counters: zeroInboxCounters,
      entries: 0,
      recipients: 0,
    });
    const changed = { ...inboxAttributes, maxDepth: 7, stopFanoutAfterMs: 120_000 };
    const updated = await store.inboxUpsert({ name: "chat", attributes: changed, epoch: "e2", now: t0 + 5 });
    assert.equal(updated.created, false);
    assert.deepEqual(
      [updated.inbox.epoch, updated.inbox.createdAt, updated.inbox.attributes],
      ["e1", t0, changed],
      "the caller's new epoch is ignored on update",
    );
    assert.deepEqual((await store.inboxGet({ name: "chat" }))?.attributes, changed);
  });

  inboxTest("list is sorted by name; get of a missing namespace is undefined", async () => {
    await create("chat");
    await create("alerts");
    assert.deepEqual(
      (await store.inboxList()).map((inbox) => inbox.name),
      ["alerts", "chat"],
    );
    assert.equal(await store.inboxGet({ name: "nope" }), undefined);
  });

  inboxTest(
    "delete answers the entries removed; created again it has a new epoch and empty logs",
    async () => {
      await create("chat", {}, "e1");
      await append(["a", "b"]);
      await append(["a"]);
      assert.deepEqual(await store.inboxDelete({ name: "chat" }), { removed: 3 });
      assert.equal(await store.inboxGet({ name: "chat" }), undefined);
      await rejectsWith(store.inboxDelete({ name: "chat" }), "inbox_not_found");
      const again = await create("chat", {}, "e2");
      assert.deepEqual([again.epoch, again.entries, again.recipients], ["e2", 0, 0]);
      const { entries, state } = await read("a");
      assert.deepEqual(entries, []);
      assert.deepEqual([state.head, state.oldest, state.epoch, state.devices], [0, 1, "e2", []]);
      assert.deepEqual(
        (await append(["a"]))[0],
        { recipient: "a", seq: 1, duplicate: false },
        "sequences start again at 1 in the new epoch",
      );
    },
  );

  inboxTest("append gives each recipient its own sequence from 1, in append order", async () => {
    await create();
    const first = inboxMessage();
    const second = inboxMessage();
    const third = inboxMessage();
    assert.deepEqual(await append(["a", "b"], { message: first }), [
      { recipient: "a", seq: 1, duplicate: false },
      { recipient: "b", seq: 1, duplicate: false },
    ]);
    await append(["b"], { message: second });
    assert.deepEqual(await append(["c", "b", "a"], { message: third }), [
      { recipient: "c", seq: 1, duplicate: false },
      { recipient: "b", seq: 3, duplicate: false },
      { recipient: "a", seq: 2, duplicate: false },
    ]);
    assert.deepEqual(
      (await read("a")).entries.map((entry) => [entry.seq, entry.id]),
      [
        [1, first.id],
        [2, third.id],
      ],
    );
    assert.deepEqual(await seqs("b"), [1, 2, 3]);
    const inbox = await record();
    assert.deepEqual(
      [inbox.counters.appended, inbox.entries, inbox.recipients],
      [6, 6, 3],
      "six entries over three recipients",
    );
  });

  inboxTest("the same append three times: one entry per recipient, the repeats answer its seq", async () => {
    await create();
    await append(["x"]);
    const repeated = inboxMessage();
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await append(["x", "y"], { message: repeated, now: t0 + i }));
    assert.deepEqual(results, [
      [
        { recipient: "x", seq: 2, duplicate: false },
        { recipient: "y", seq: 1, duplicate: false },
      ],
      [
        { recipient: "x", seq: 2, duplicate: true },
        { recipient: "y", seq: 1, duplicate: true },
      ],
      [
        { recipient: "x", seq: 2, duplicate: true },
        { recipient: "y", seq: 1, duplicate: true },
      ],
    ]);
    assert.deepEqual(await seqs("x"), [1, 2]);
    assert.deepEqual(await seqs("y"), [1]);
    const { counters, entries } = await record();
    assert.deepEqual([counters.appended, counters.duplicates, entries], [3, 4, 3]);
  });

  inboxTest(
    "a recipient named twice in one call is appended once; the repeat answers as a duplicate",
    async () => {
      await create();
      assert.deepEqual(await append(["a", "b", "a"]), [
        { recipient: "a", seq: 1, duplicate: false },
        { recipient: "b", seq: 1, duplicate: false },
        { recipient: "a", seq: 1, duplicate: true },
      ]);
      assert.deepEqual(await seqs("a"), [1]);
      assert.equal((await record()).counters.appended, 2);
    },
  );

  inboxTest("a duplicate is caught after its entry was trimmed, within dedupWindowMs", async () => {
    await create();
    const repeated = inboxMessage();
    await append(["a"], { message: repeated });
    await ack("a", "phone", 1, t0 + 1);
    assert.equal((await read("a")).state.depth, 0, "acked by the only device: trimmed");
    const within = t0 + inboxAttributes.dedupWindowMs - 1;
    assert.deepEqual(await append(["a"], { message: repeated, now: within }), [
      { recipient: "a", seq: 1, duplicate: true },
    ]);
    assert.equal((await read("a")).state.head, 1, "nothing appended");
    // Past the window, the sweep forgets the id, and the same id is a new message.
    const past = t0 + inboxAttributes.dedupWindowMs + 1;
    await store.inboxSweep({ name: "chat", now: past, max: 100 });
    assert.deepEqual(await append(["a"], { message: repeated, now: past }), [
      { recipient: "a", seq: 2, duplicate: false },
    ]);
  });

  inboxTest("an append to a missing namespace throws inbox_not_found and writes nothing", async () => {
    await create("chat");
    await rejectsWith(
      store.inboxAppend({ name: "gone", recipients: ["a"], message: inboxMessage(), now: t0 }),
      "inbox_not_found",
    );
    await create("gone");
    assert.equal((await read("a", 0, 10, "gone")).state.head, 0);
    assert.deepEqual((await record("chat")).counters, zeroInboxCounters);
    await rejectsWith(read("a", 0, 10, "nope"), "inbox_not_found");
    await rejectsWith(store.inboxRecipientGet({ name: "nope", recipient: "a" }), "inbox_not_found");
    await rejectsWith(
      store.inboxAck({ name: "nope", recipient: "a", device: "d", seq: 0, now: t0 }),
      "inbox_not_found",
    );
    await rejectsWith(
      store.inboxDeviceSeen({ name: "nope", recipient: "a", device: "d", cursor: 0, now: t0 }),
      "inbox_not_found",
    );
  });

  inboxTest(
    "read answers the entries after a cursor, in order, at most limit, and where the log stands",
    async () => {
      await create("chat", {}, "e7");
      const messages = [1, 2, 3, 4, 5].map((i) =>
        inboxMessage({ contentType: "application/json", headers: { n: String(i) } }),
      );
      for (const [i, message] of messages.entries()) await append(["a"], { message, now: t0 + i * 10 });
      const { entries, state } = await read("a", 1, 2);
      assert.deepEqual(
        entries.map((entry) => ({ ...entry, body: entry.body.toString() })),
        [2, 3].map((seq) => {
          const message = messages[seq - 1];
          assert.ok(message);
          return {
            seq,
            id: message.id,
            body: message.body.toString(),
            contentType: "application/json",
            headers: { n: String(seq) },
            appendedAt: t0 + (seq - 1) * 10,
          };
        }),
      );
      assert.deepEqual(state, { head: 5, oldest: 1, epoch: "e7", depth: 5, devices: [], skippedAfter: null });
      assert.deepEqual((await read("a", 5)).entries, []);
      assert.deepEqual(await seqs("a", 3), [4, 5]);
      const never = await read("nobody");
      assert.deepEqual(never, {
        entries: [],
        state: { head: 0, oldest: 1, epoch: "e7", depth: 0, devices: [], skippedAfter: null },
      });
    },
  );

  inboxTest("ack moves the cursor forward only; an ack beyond the head is refused", async () => {
    await create();
    for (let i = 0; i < 3; i++) await append(["a"]);
    assert.deepEqual(await ack("a", "phone", 2, t0 + 1), { cursor: 2 });
    assert.deepEqual(await ack("a", "phone", 1, t0 + 2), { cursor: 2 }, "an older seq answers the cursor");
    assert.deepEqual(await ack("a", "phone", 3, t0 + 3), { cursor: 3 });
    await rejectsWith(ack("a", "phone", 4, t0 + 4), "cursor_beyond_head");
    await rejectsWith(ack("never", "phone", 1, t0 + 4), "cursor_beyond_head");
    const { devices } = await store.inboxRecipientGet({ name: "chat", recipient: "a" });
    assert.deepEqual(
      devices,
      [{ device: "phone", cursor: 3, lastSeenAt: t0 + 3 }],
      "the refused ack changed nothing",
    );
  });
}
