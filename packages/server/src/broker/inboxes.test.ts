/**
 * The inbox broker on a fake clock over an in-memory InboxStore (testing/inbox-fake-store.ts): what it
 * validates before the store is called, what a cursor means (gap, epoch, beyond the head), long polls,
 * wake-ups, retention passes, and the live figures the WebSocket side feeds.
 */
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { seededRandom } from "../random.js";
import { FakeInboxStore } from "../testing/inbox-fake-store.js";
import { type AppendRequest, InboxBroker, type ReadResult } from "./inboxes.js";

const silent = { info() {}, warn() {}, error() {} };
const minuteMs = 60_000;

function message(id: string, body: unknown = { text: id }): AppendRequest["message"] {
  return { id, body };
}

/** What a long poll answered so far (a function, so assertions on an earlier read do not narrow it). */
function answerOf(box: { answer?: ReadResult }): ReadResult | undefined {
  return box.answer;
}

/** The catalog error a promise rejects with; fails if it resolves. */
async function refusal(promise: Promise<unknown>): Promise<HopperError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof HopperError, `a catalog error, not ${String(error)}`);
    return error;
  }
  assert.fail("expected a refusal");
}

describe("inbox broker", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: FakeInboxStore;
  let inboxes: InboxBroker;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new FakeInboxStore();
    inboxes = new InboxBroker(store, clock, seededRandom(7), silent);
    inboxes.start();
    await inboxes.putInbox("chat", {});
  });

  test("a namespace gets the defaults and an epoch; an update keeps the epoch", async () => {
    const first = await inboxes.getInbox("chat");
    assert.equal(first.attributes.maxAgeMs, 7 * 24 * 60 * minuteMs);
    assert.equal(first.attributes.stopFanoutAfterMs, null);
    assert.equal(first.attributes.dedupWindowMs, 24 * 60 * minuteMs);
    assert.match(first.epoch, /^[0-9a-z]{20}$/);
    const updated = await inboxes.putInbox("chat", { maxDepth: 5 });
    assert.equal(updated.created, false);
    assert.equal(updated.inbox.epoch, first.epoch);
    assert.equal(updated.inbox.attributes.maxDepth, 5);
    assert.equal(updated.inbox.attributes.maxAgeMs, first.attributes.maxAgeMs, "left out: kept");
  });

  test("a namespace created again gets another epoch", async () => {
    const { epoch } = await inboxes.getInbox("chat");
    await inboxes.deleteInbox("chat");
    const again = await inboxes.putInbox("chat", {});
    assert.equal(again.created, true);
    assert.notEqual(again.inbox.epoch, epoch);
  });

  test("attributes out of range are invalid_attribute and change nothing", async () => {
    for (const input of [
      { maxAgeMs: 1000 },
      { maxDepth: 0 },
      { stopFanoutAfterMs: 5 },
      { dedupWindowMs: -1 },
    ]) {
      const error = await refusal(inboxes.putInbox("chat", input));
      assert.equal(error.code, "invalid_attribute", JSON.stringify(input));
    }
    assert.equal((await inboxes.getInbox("chat")).attributes.maxDepth, 10_000);
  });

  test("an append gives each recipient its own next sequence", async () => {
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    const results = await inboxes.append("chat", { recipients: ["ann", "bob"], message: message("m2") });
    assert.deepEqual(results, [
      { recipient: "ann", seq: 2, duplicate: false },
      { recipient: "bob", seq: 1, duplicate: false },
    ]);
    const read = await inboxes.read("chat", "ann", { after: 0 });
    assert.deepEqual(
      read.entries.map((entry) => [entry.seq, entry.id, entry.contentType, String(entry.body)]),
      [
        [1, "m1", "application/json", '{"text":"m1"}'],
        [2, "m2", "application/json", '{"text":"m2"}'],
      ],
    );
    assert.deepEqual([read.head, read.oldest], [2, 1]);
  });

  test("the same append three times appends once", async () => {
    const request = { recipients: ["ann", "bob"], message: message("m1") };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await inboxes.append("chat", request));
    assert.deepEqual(
      answers[0]?.map((result) => ("seq" in result ? result.duplicate : null)),
      [false, false],
    );
    assert.deepEqual(answers[2], [
      { recipient: "ann", seq: 1, duplicate: true },
      { recipient: "bob", seq: 1, duplicate: true },
    ]);
    assert.equal((await inboxes.read("chat", "ann", { after: 0 })).head, 1);
    assert.equal((await inboxes.getInbox("chat")).stats.duplicates, 4);
  });

  test("one bad input refuses the whole append before the store is called", async () => {
    const bad: [string, AppendRequest][] = [
      ["a bad recipient", { recipients: ["ann", "b b"], message: message("m1") }],
      ["no recipient", { recipients: [], message: message("m1") }],
      ["both bodies", { recipients: ["ann"], message: { id: "m1", body: 1, bodyBase64: "AA==" } }],
      ["no body", { recipients: ["ann"], message: { id: "m1" } }],
      ["an empty id", { recipients: ["ann"], message: message("") }],
      ["a bad header", { recipients: ["ann"], message: { ...message("m1"), headers: { "a b": "x" } } }],
    ];
    for (const [label, request] of bad) {
      assert.equal((await refusal(inboxes.append("chat", request))).code, "invalid_request", label);
    }
    const tooLarge = { id: "big", bodyBase64: Buffer.alloc(limits.messageBytesMax + 1).toString("base64") };
    const error = await refusal(inboxes.append("chat", { recipients: ["ann"], message: tooLarge }));
    assert.equal(error.code, "message_too_large");
    assert.equal(store.appendCalls, 0);
  });

  test("more than inboxRecipientsMax recipients is too_many_recipients", async () => {
    const recipients = Array.from({ length: limits.inboxRecipientsMax + 1 }, (_, i) => `user-${i}`);
    const error = await refusal(inboxes.append("chat", { recipients, message: message("m1") }));
    assert.equal(error.code, "too_many_recipients");
    assert.equal(error.status, 400);
    assert.equal(store.appendCalls, 0);
    const exactly = recipients.slice(0, limits.inboxRecipientsMax);
    assert.equal(
      (await inboxes.append("chat", { recipients: exactly, message: message("m1") })).length,
      5000,
    );
  });

  test("a missing namespace is inbox_not_found", async () => {
    for (const call of [
      inboxes.getInbox("nope"),
      inboxes.append("nope", { recipients: ["ann"], message: message("m1") }),
      inboxes.read("nope", "ann", { after: 0 }),
      inboxes.deleteDevice("nope", "ann", "phone"),
      inboxes.deleteInbox("nope"),
    ]) {
      assert.equal((await refusal(call)).code, "inbox_not_found");
    }
  });

  test("a cursor above 0 needs its epoch; a cursor past the head is cursor_beyond_head", async () => {
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    const { epoch } = await inboxes.getInbox("chat");
    assert.equal((await refusal(inboxes.read("chat", "ann", { after: 1 }))).code, "invalid_request");
    const beyond = await refusal(inboxes.read("chat", "ann", { after: 2, epoch }));
    assert.equal(beyond.code, "cursor_beyond_head");
    assert.deepEqual((await inboxes.read("chat", "ann", { after: 1, epoch })).entries, []);
  });

  test("a cursor behind what is retained is inbox_gap with oldest, head and epoch", async () => {
    await inboxes.putInbox("chat", { maxDepth: 2 });
    for (const id of ["m1", "m2", "m3", "m4"])
      await inboxes.append("chat", { recipients: ["ann"], message: message(id) });
    const { epoch } = await inboxes.getInbox("chat");
    const gap = await refusal(inboxes.read("chat", "ann", { after: 1, epoch }));
    assert.equal(gap.code, "inbox_gap");
    assert.equal(gap.status, 410);
    assert.deepEqual(gap.details, { oldest: 3, head: 4, epoch, reason: "trimmed" });
    // From oldest - 1 it reads on without a hole.
    assert.deepEqual(
      (await inboxes.read("chat", "ann", { after: 2, epoch })).entries.map((e) => e.seq),
      [3, 4],
    );
  });

  test("a cursor from another epoch is a gap, even where its sequence exists", async () => {
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    await inboxes.append("chat", { recipients: ["ann"], message: message("m2") });
    const gap = await refusal(inboxes.read("chat", "ann", { after: 1, epoch: "an-old-epoch" }));
    assert.equal(gap.code, "inbox_gap");
    assert.equal(gap.details?.reason, "epoch");
  });

  test("a long poll answers as soon as an append commits", async () => {
    const { epoch } = await inboxes.getInbox("chat");
    const box: { answer?: ReadResult } = {};
    void inboxes.read("chat", "ann", { after: 0, epoch, waitMs: 20_000 }).then((read) => {
      box.answer = read;
    });
    await settle();
    assert.equal(box.answer, undefined, "nothing yet: it waits");
    await inboxes.append("chat", { recipients: ["bob"], message: message("other") });
    await settle();
    assert.equal(box.answer, undefined, "another recipient's append does not answer it");
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    await settle();
    // assert.equal narrowed box.answer to undefined; it is read again here.
    assert.deepEqual(
      answerOf(box)?.entries.map((entry) => entry.id),
      ["m1"],
    );
  });

  test("a long poll with nothing appended answers empty when its wait is over", async () => {
    const box: { answer?: ReadResult } = {};
    void inboxes.read("chat", "ann", { after: 0, waitMs: 5_000 }).then((read) => {
      box.answer = read;
    });
    await clock.advance(4_999);
    assert.equal(box.answer, undefined);
    await clock.advance(1);
    assert.deepEqual(answerOf(box)?.entries, []);
  });

  test("another node's append event wakes the recipient's topic; null recipients wake the namespace", async () => {
    const answers: string[][] = [];
    for (const recipient of ["ann", "bob"]) {
      void inboxes.read("chat", recipient, { after: 0, waitMs: 20_000 }).then((read) => {
        answers.push(read.entries.map((entry) => `${recipient}:${entry.id}`));
      });
    }
    await settle();
    // Another node appends: this node's broker hears of it only through the store's event.
    const now = clock.now();
    const other = { body: "{}", contentType: "application/json", headers: {} };
    await store.inboxAppend({ name: "chat", recipients: ["ann"], message: { id: "m1", ...other }, now });
    await settle();
    assert.deepEqual(answers, [], "not told yet");
    store.emit({ kind: "inbox", inbox: "chat", recipients: ["ann"] });
    await settle();
    assert.deepEqual(answers, [["ann:m1"]]);
    await store.inboxAppend({ name: "chat", recipients: ["bob"], message: { id: "m2", ...other }, now });
    store.emit({ kind: "inbox", inbox: "chat", recipients: null });
    await settle();
    assert.deepEqual(answers, [["ann:m1"], ["bob:m2"]]);
  });

  test("acks move a device's cursor forward only, and trim what every device acked", async () => {
    for (const id of ["m1", "m2", "m3"])
      await inboxes.append("chat", { recipients: ["ann"], message: message(id) });
    await inboxes.deviceSeen("chat", "ann", "phone", 0);
    await inboxes.deviceSeen("chat", "ann", "laptop", 0);
    assert.deepEqual(await inboxes.ack("chat", "ann", "phone", 3), { cursor: 3 });
    assert.deepEqual(await inboxes.ack("chat", "ann", "phone", 1), { cursor: 3 }, "never back");
    assert.equal((await inboxes.recipient("chat", "ann")).depth, 3, "the laptop holds them");
    await inboxes.ack("chat", "ann", "laptop", 2);
    const state = await inboxes.recipient("chat", "ann");
    assert.deepEqual([state.depth, state.oldest, state.head], [1, 3, 3]);
    assert.equal((await refusal(inboxes.ack("chat", "ann", "phone", 4))).code, "cursor_beyond_head");
    assert.equal((await refusal(inboxes.ack("chat", "ann", "b a d", 1))).code, "invalid_name");
  });

  test("retention: the timer pass trims entries past maxAgeMs and forgets idle devices", async () => {
    await inboxes.putInbox("chat", { maxAgeMs: 5 * minuteMs, forgetDeviceAfterMs: 10 * minuteMs });
    await inboxes.deviceSeen("chat", "ann", "phone", 0);
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    await clock.advance(3 * minuteMs);
    await inboxes.append("chat", { recipients: ["ann"], message: message("m2") });
    assert.equal((await inboxes.recipient("chat", "ann")).depth, 2);
    // The passes at 4 and 5 minutes find nothing past 5 minutes; the one at 6 trims m1.
    await clock.advance(2 * minuteMs);
    assert.equal((await inboxes.recipient("chat", "ann")).depth, 2);
    await clock.advance(1 * minuteMs + 1);
    let state = await inboxes.recipient("chat", "ann");
    assert.deepEqual([state.depth, state.oldest], [1, 2]);
    assert.equal((await inboxes.getInbox("chat")).stats.expired, 1);
    await clock.advance(5 * minuteMs);
    state = await inboxes.recipient("chat", "ann");
    assert.deepEqual(state.devices, [], "unseen for 10 minutes: forgotten");
    const stats = (await inboxes.getInbox("chat")).stats;
    assert.deepEqual([stats.expired, stats.devicesForgotten, stats.entries], [2, 1, 0]);
    // The device comes back with its old cursor: what it missed is gone, and it is told so.
    const { epoch } = await inboxes.getInbox("chat");
    assert.equal((await refusal(inboxes.read("chat", "ann", { after: 0, epoch }))).code, "inbox_gap");
  });

  test("a node that does not lead housekeeping sweeps nothing", async () => {
    store.leader = false;
    await inboxes.putInbox("chat", { maxAgeMs: minuteMs });
    await inboxes.append("chat", { recipients: ["ann"], message: message("m1") });
    await clock.advance(10 * minuteMs);
    assert.equal((await inboxes.recipient("chat", "ann")).depth, 1);
    store.leader = true;
    assert.equal((await inboxes.sweepNow()).expired, 1);
  });

  test("connected devices show in the recipient's state until released", async () => {
    const releasePhone = inboxes.connected("chat", "ann", "phone");
    const releaseTab1 = inboxes.connected("chat", "ann", "web");
    const releaseTab2 = inboxes.connected("chat", "ann", "web");
    assert.deepEqual((await inboxes.recipient("chat", "ann")).connected, ["phone", "web"]);
    assert.equal(inboxes.subscriptionsOpen("chat"), 3);
    releaseTab1();
    releaseTab1();
    assert.deepEqual((await inboxes.recipient("chat", "ann")).connected, ["phone", "web"], "a tab is left");
    releaseTab2();
    releasePhone();
    assert.deepEqual((await inboxes.recipient("chat", "ann")).connected, []);
    assert.equal(inboxes.subscriptionsOpen("chat"), 0);
  });

  test("replay sizes and ack lags are counted per namespace", () => {
    inboxes.subscriptionOpened("chat");
    inboxes.replayed("chat", 0);
    inboxes.replayed("chat", 250);
    inboxes.acked("chat", 1500);
    const figures = inboxes.liveStats("chat");
    assert.equal(figures?.subscriptionsOpened, 1);
    assert.equal(figures?.replayEntries.count, 2);
    assert.equal(figures?.replayEntries.sum, 250);
    assert.deepEqual(figures?.replayEntries.cumulative(), [
      [0, 1],
      [1, 1],
      [10, 1],
      [100, 1],
      [1000, 2],
      [10000, 2],
    ]);
    assert.equal(figures?.ackLagSeconds.sum, 1.5);
    assert.equal(inboxes.liveStats("other"), undefined);
  });
});
