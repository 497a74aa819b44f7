/**
 * The Store contract for what bounds an inbox: entries trimmed once every active device acked them,
 * by maxDepth and by maxAgeMs; devices forgotten; idle recipients skipped at append; devices and
 * their limit; bodies stored once and read back exact; inboxes apart from queues.
 * Part of the Store conformance suite: store-conformance/index.ts runs it against every store
 * (through inboxes.ts).
 */
import assert from "node:assert/strict";
import { limits } from "../../limits.js";
import { attributes, rejectsWith, t0 } from "../conformance-fixtures.js";
import { type InboxSuite, inboxAttributes, inboxMessage } from "./inbox-harness.js";

const minute = 60_000;

export function inboxRetentionTests(suite: InboxSuite): void {
  // Over 80 lines: a list of short tests that share the suite's helpers.
  const { store, inboxTest, create, append, read, seqs, ack, seen, record, position } = suite;

  inboxTest("entries acked by every active device are trimmed, counted as acked", async () => {
    await create();
    await seen("a", "phone");
    await seen("a", "laptop");
    for (let i = 0; i < 4; i++) await append(["a"]);
    await ack("a", "phone", 3, t0 + 1);
    assert.deepEqual(await position("a"), { depth: 4, oldest: 1, head: 4 }, "the laptop holds them");
    await ack("a", "laptop", 2, t0 + 2);
    assert.deepEqual(await position("a"), { depth: 2, oldest: 3, head: 4 });
    assert.deepEqual(await seqs("a"), [3, 4], "a read after 0 answers what is retained");
    const inbox = await record();
    assert.deepEqual([inbox.counters.acked, inbox.entries], [2, 2]);
  });

  inboxTest(
    "a device unseen for forgetDeviceAfterMs is forgotten by the sweep and holds nothing back",
    async () => {
      const forgetMs = inboxAttributes.forgetDeviceAfterMs;
      await create();
      await seen("a", "old-phone", t0);
      for (let i = 0; i < 3; i++) await append(["a"]);
      await ack("a", "new-phone", 3, t0 + forgetMs - 1);
      assert.equal((await position("a")).depth, 3, "the old phone, still active, holds the entries");
      const swept = await store.inboxSweep({ name: "chat", now: t0 + forgetMs + 1, max: 100 });
      assert.deepEqual(swept, { expired: 0, devicesForgotten: 1, acked: 3 });
      assert.deepEqual(await position("a"), { depth: 0, oldest: 4, head: 3 });
      const { devices } = await store.inboxRecipientGet({ name: "chat", recipient: "a" });
      assert.deepEqual(
        devices.map((device) => device.device),
        ["new-phone"],
      );
      const { counters } = await record();
      assert.deepEqual([counters.devicesForgotten, counters.acked], [1, 3]);
    },
  );

  inboxTest(
    "a device unseen for forgetDeviceAfterMs holds nothing back at an ack, before any sweep",
    async () => {
      const forgetMs = inboxAttributes.forgetDeviceAfterMs;
      await create();
      await seen("a", "old-phone", t0);
      await append(["a"]);
      await append(["a"]);
      await ack("a", "new-phone", 2, t0 + forgetMs + 1);
      assert.deepEqual(await position("a"), { depth: 0, oldest: 3, head: 2 }, "only active devices count");
      const { devices } = await store.inboxRecipientGet({ name: "chat", recipient: "a" });
      assert.equal(devices.length, 2, "the old phone is still listed until a sweep forgets it");
    },
  );

  inboxTest("maxDepth trims a recipient's oldest entries at append, counted as overflowed", async () => {
    await create("chat", { maxDepth: 3 });
    for (let i = 0; i < 5; i++) await append(["a"]);
    await append(["b"]);
    assert.deepEqual(await position("a"), { depth: 3, oldest: 3, head: 5 });
    assert.deepEqual(await seqs("a"), [3, 4, 5]);
    assert.deepEqual(await position("b"), { depth: 1, oldest: 1, head: 1 });
    const inbox = await record();
    assert.deepEqual([inbox.counters.overflowed, inbox.entries], [2, 4]);
  });

  inboxTest("maxAgeMs trims by the sweep, oldest first, at most max a call, counted as expired", async () => {
    await create("chat", { maxAgeMs: 10 * minute });
    await append(["a"], { now: t0 });
    await append(["a"], { now: t0 + 1 });
    await append(["a"], { now: t0 + 5 * minute });
    const now = t0 + 10 * minute + 2;
    assert.equal((await store.inboxSweep({ name: "chat", now, max: 1 })).expired, 1, "max bounds a call");
    assert.deepEqual(await store.inboxSweep({ name: "chat", now, max: 100 }), {
      expired: 1,
      devicesForgotten: 0,
      acked: 0,
    });
    assert.deepEqual(await position("a"), { depth: 1, oldest: 3, head: 3 });
    assert.equal((await record()).counters.expired, 2);
  });

  inboxTest(
    "a recipient whose devices were all unseen for stopFanoutAfterMs is skipped until seen",
    async () => {
      const stopMs = 5 * minute;
      await create("chat", { stopFanoutAfterMs: stopMs });
      await seen("a", "phone", t0);
      await seen("b", "phone", t0 + stopMs);
      await append(["a"], { now: t0 + 1 });
      const later = t0 + stopMs + 10;
      assert.deepEqual(await append(["a", "b"], { now: later }), [
        { recipient: "a", skipped: "idle" },
        { recipient: "b", seq: 1, duplicate: false },
      ]);
      const { state } = await read("a");
      assert.deepEqual([state.head, state.skippedAfter], [1, 1], "skippedAfter is the head when skipped");
      assert.equal((await record()).counters.skipped, 1);
      await seen("a", "phone", later + 1);
      assert.deepEqual(await append(["a"], { now: later + 2 }), [
        { recipient: "a", seq: 2, duplicate: false },
      ]);
      assert.equal(
        (await read("a")).state.skippedAfter,
        1,
        "the skip stays on record for the devices behind it",
      );
    },
  );

  inboxTest("a recipient with no device is never idle: its entries wait for a first device", async () => {
    await create("chat", { stopFanoutAfterMs: 5 * minute });
    assert.deepEqual(await append(["new"], { now: t0 + 50 * minute }), [
      { recipient: "new", seq: 1, duplicate: false },
    ]);
    assert.equal((await read("new")).state.skippedAfter, null);
  });

  inboxTest("the body is stored once per append and read back exact by every recipient", async () => {
    await create();
    const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i));
    const jsonText = '{ "text": "héllo",  "n": 1.50 }';
    await append(["a", "b"], {
      message: inboxMessage({ body: binary, contentType: "application/octet-stream" }),
    });
    await append(["a", "b"], {
      message: inboxMessage({ body: jsonText, contentType: "application/json", headers: { z: "1", a: "2" } }),
    });
    const bytes = async (recipient: string) =>
      (await read(recipient)).entries.map((entry) => Buffer.from(entry.body));
    const [binaryOfA, jsonOfA] = await bytes("a");
    assert.ok(binaryOfA?.equals(binary), "binary bytes exact");
    assert.ok(jsonOfA?.equals(Buffer.from(jsonText, "utf8")), "a JSON body given as text keeps its bytes");
    assert.deepEqual(await bytes("b"), [binaryOfA, jsonOfA], "both recipients read the same bodies");
    const [, jsonEntry] = (await read("b")).entries;
    assert.deepEqual(
      [jsonEntry?.contentType, Object.entries(jsonEntry?.headers ?? {})],
      [
        "application/json",
        [
          ["z", "1"],
          ["a", "2"],
        ],
      ],
      "content type and headers as given, in their order",
    );
    // One recipient's trim leaves the body that another still holds.
    await ack("a", "phone", 2, t0 + 1);
    assert.deepEqual(await bytes("b"), [binary, Buffer.from(jsonText, "utf8")]);
    await ack("b", "phone", 2, t0 + 1);
    assert.equal((await record()).entries, 0);
  });

  inboxTest("inboxDeviceDelete forgets a device, which then holds nothing back", async () => {
    await create();
    await seen("a", "phone");
    await seen("a", "laptop");
    await append(["a"]);
    await append(["a"]);
    await ack("a", "phone", 2, t0 + 1);
    assert.equal((await position("a")).depth, 2);
    assert.deepEqual(
      await store.inboxDeviceDelete({ name: "chat", recipient: "a", device: "laptop", now: t0 + 2 }),
      { deleted: true },
    );
    assert.deepEqual(
      await store.inboxDeviceDelete({ name: "chat", recipient: "a", device: "laptop", now: t0 + 2 }),
      { deleted: false },
    );
    await ack("a", "phone", 2, t0 + 3);
    assert.deepEqual(await position("a"), { depth: 0, oldest: 3, head: 2 });
  });

  inboxTest("inboxRecipientGet lists each device with its cursor and when it was last seen", async () => {
    await create();
    await append(["a"]);
    await append(["a"]);
    await seen("a", "phone", t0 + 1, 0);
    await seen("a", "tablet", t0 + 2, 1);
    await ack("a", "phone", 2, t0 + 3);
    // A known device seen again keeps its cursor: the cursor given is for a new device only.
    await seen("a", "tablet", t0 + 4, 0);
    const state = await store.inboxRecipientGet({ name: "chat", recipient: "a" });
    assert.deepEqual(
      [...state.devices].sort((x, y) => x.device.localeCompare(y.device)),
      [
        { device: "phone", cursor: 2, lastSeenAt: t0 + 3 },
        { device: "tablet", cursor: 1, lastSeenAt: t0 + 4 },
      ],
    );
    assert.deepEqual([state.depth, state.oldest, state.head], [1, 2, 2]);
  });

  inboxTest("a recipient holds at most inboxDevicesPerRecipientMax devices", async () => {
    await create();
    await append(["a"]);
    const max = limits.inboxDevicesPerRecipientMax;
    for (let i = 0; i < max; i++) await seen("a", `d${i}`, t0 + 1);
    await rejectsWith(seen("a", "one-more", t0 + 2), "too_many_devices");
    await rejectsWith(ack("a", "one-more", 1, t0 + 2), "too_many_devices");
    await seen("a", "d0", t0 + 3);
    assert.deepEqual(await ack("a", "d1", 1, t0 + 3), { cursor: 1 }, "a known device is still served");
    await seen("b", "one-more", t0 + 3);
    assert.equal((await store.inboxRecipientGet({ name: "chat", recipient: "a" })).devices.length, max);
  });

  inboxTest("inboxes are apart from queues: a queue and an inbox may share a name", async () => {
    await store.queueUpsert({ name: "chat", kind: "standard", attributes, now: t0 });
    await create("chat");
    await append(["a"]);
    await store.queueDelete({ name: "chat" });
    assert.deepEqual(await seqs("a"), [1]);
    await store.queueUpsert({ name: "chat", kind: "standard", attributes, now: t0 });
    await store.inboxDelete({ name: "chat" });
    assert.ok(await store.queueGet({ name: "chat" }));
    assert.deepEqual(
      (await store.queueList()).map((queue) => queue.name),
      ["chat"],
    );
  });
}
