/**
 * A subscription over the inbox broker and an in-memory store, on a fake clock: replay in bounded
 * batches, then live; an append that lands during a read is delivered once and in order; gaps; a pause
 * stops reading and a resume reads on from the store.
 */
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { limits } from "../limits.js";
import type { InboxEntry, RecipientPosition } from "../model/inbox.js";
import { seededRandom } from "../random.js";
import { FakeInboxStore } from "../testing/inbox-fake-store.js";
import {
  InboxSubscription,
  type InboxSubscriptionSource,
  inboxSubscriptionSource,
} from "./inbox-subscription.js";
import { InboxBroker } from "./inboxes.js";

const silent = { info() {}, warn() {}, error() {} };

interface Seen {
  frames: Array<
    | { kind: "gap"; position: RecipientPosition }
    | { kind: "entries"; seqs: number[] }
    | { kind: "live"; head: number }
  >;
  seqs: number[];
}

function subscribe(
  source: InboxSubscriptionSource,
  options: { after?: number; epoch?: string; onEntries?: (entries: InboxEntry[]) => void } = {},
): { subscription: InboxSubscription; seen: Seen } {
  const seen: Seen = { frames: [], seqs: [] };
  const subscription = new InboxSubscription({
    source,
    ns: "chat",
    recipient: "alice",
    device: "phone",
    after: options.after ?? 0,
    epoch: options.epoch,
    onGap: (position) => seen.frames.push({ kind: "gap", position }),
    onEntries: (entries) => {
      seen.frames.push({ kind: "entries", seqs: entries.map((entry) => entry.seq) });
      seen.seqs.push(...entries.map((entry) => entry.seq));
      options.onEntries?.(entries);
    },
    onLive: (head) => seen.frames.push({ kind: "live", head }),
    onEnd: (error) => assert.fail(`the subscription ended: ${error.message}`),
  });
  return { subscription, seen };
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

describe("inbox subscription", () => {
  // Over 80 lines: one describe block of short tests sharing a fake clock and store.
  let clock: FakeClock;
  let store: FakeInboxStore;
  let inboxes: InboxBroker;
  let source: InboxSubscriptionSource;
  let appendCount = 0;

  async function append(count: number, recipient = "alice"): Promise<void> {
    for (let i = 0; i < count; i++) {
      await inboxes.append("chat", {
        recipients: [recipient],
        message: { id: `m${appendCount++}`, body: i },
      });
    }
  }

  beforeEach(async () => {
    clock = new FakeClock();
    store = new FakeInboxStore();
    appendCount = 0;
    inboxes = new InboxBroker(store, clock, seededRandom(3), silent);
    await inboxes.putInbox("chat", {});
    source = inboxSubscriptionSource(inboxes, store);
  });

  test("replays in bounded batches, says live once, then delivers new entries", async () => {
    await append(250);
    const { subscription, seen } = subscribe(source);
    const position = await subscription.open();
    assert.deepEqual({ head: position.head, oldest: position.oldest }, { head: 250, oldest: 1 });
    subscription.run();
    await settle();
    const entryFrames = seen.frames.filter((frame) => frame.kind === "entries");
    assert.ok(entryFrames.every((frame) => frame.seqs.length <= limits.inboxReplayBatchMax));
    assert.deepEqual(seen.seqs, range(1, 250));
    assert.deepEqual(seen.frames.at(-1), { kind: "live", head: 250 });
    await append(2);
    await settle();
    assert.deepEqual(seen.seqs, range(1, 252));
    assert.equal(seen.frames.filter((frame) => frame.kind === "live").length, 1);
    assert.deepEqual((await inboxes.recipient("chat", "alice")).connected, ["phone"]);
    await subscription.close();
    assert.deepEqual((await inboxes.recipient("chat", "alice")).connected, []);
  });

  test("an append that commits during a read is delivered once, in order", async () => {
    await append(150);
    let appendsDuringReads = 0;
    // Each read lets an append commit after the subscription read the head and before the store answers.
    const racing: InboxSubscriptionSource = {
      ...source,
      read: async (params) => {
        if (appendsDuringReads < 5) {
          appendsDuringReads++;
          await append(1);
        }
        return source.read(params);
      },
    };
    const { subscription, seen } = subscribe(racing);
    await subscription.open();
    subscription.run();
    await settle();
    await settle();
    assert.equal(appendsDuringReads, 5);
    assert.deepEqual(seen.seqs, range(1, 155));
  });

  test("a cursor older than what is retained gets a gap first, then goes on from the oldest", async () => {
    await inboxes.putInbox("chat", { maxDepth: 5 });
    await append(10);
    const { epoch } = await inboxes.getInbox("chat");
    const { subscription, seen } = subscribe(source, { after: 2, epoch });
    await subscription.open();
    subscription.run();
    await settle();
    assert.deepEqual(seen.frames[0], { kind: "gap", position: { oldest: 6, head: 10, epoch } });
    assert.deepEqual(seen.seqs, range(6, 10));
    await subscription.close();
  });

  test("a cursor from another epoch gets a gap and restarts from the oldest", async () => {
    await append(3);
    const { subscription, seen } = subscribe(source, { after: 7, epoch: "another-life" });
    await subscription.open();
    subscription.run();
    await settle();
    assert.equal(seen.frames[0]?.kind, "gap");
    assert.deepEqual(seen.seqs, [1, 2, 3]);
    await subscription.close();
  });

  test("a paused subscription reads nothing more, and resumes from the store", async () => {
    await append(300);
    let reads = 0;
    const counting: InboxSubscriptionSource = {
      ...source,
      read: (params) => {
        reads++;
        return source.read(params);
      },
    };
    let subscription: InboxSubscription | undefined;
    const made = subscribe(counting, {
      // The connection pauses as a delivery fills its send buffer: here, at the first.
      onEntries: () => subscription?.pause(),
    });
    subscription = made.subscription;
    await subscription.open();
    subscription.run();
    await settle();
    const readsWhilePaused = reads;
    assert.ok(made.seen.seqs.length <= limits.inboxReplayBatchMax);
    await clock.advance(60_000);
    assert.equal(reads, readsWhilePaused);
    const deliveredBefore = made.seen.seqs.length;
    for (let i = 0; i < 10 && made.seen.seqs.length < 300; i++) {
      subscription.resume();
      await settle();
    }
    assert.ok(made.seen.seqs.length > deliveredBefore);
    assert.deepEqual(made.seen.seqs, range(1, 300));
    await subscription.close();
  });
});
