/**
 * Long polls and the wake-up rule through the broker, on a fake clock: a send or another node's commit
 * that lands while a long poll looks (after it read its queue's head, before it waits) wakes it at
 * once, whether the store wakes as a send is called (SQLite) or after its commit (PostgreSQL); and a
 * resync makes every reader look again.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { limits } from "../limits.js";
import { noSendPolicy } from "../model/policies.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import type { StoreEvent } from "../store/store.js";
import { message } from "../testing/conformance-fixtures.js";
import { QueueBroker } from "./queues.js";

const silent = { info() {}, warn() {}, error() {} };

/** A store through which the test plays the other nodes (their events) and times the broker's looks. */
class InterleavingStore extends SqliteStore {
  listener: ((event: StoreEvent) => void) | undefined;
  /** Runs once, inside the next lease, after the lease has read the queue and before it answers. */
  duringNextLease: (() => Promise<void>) | undefined;
  leases = 0;

  override watch(listener: (event: StoreEvent) => void): void {
    this.listener = listener;
  }

  override async queueLease(params: Parameters<SqliteStore["queueLease"]>[0]) {
    this.leases++;
    const result = await super.queueLease(params);
    const during = this.duringNextLease;
    this.duringNextLease = undefined;
    await during?.();
    return result;
  }

  /** Writes a message as another node would: no broker of this process hears of it. */
  async sendAsOtherNode(queue: string, now: number): Promise<void> {
    await this.queueSendMany({
      sends: [{ queue, messages: [message({ publishedAt: now, visibleAt: now })], policy: noSendPolicy }],
      now,
    });
  }
}

/** Lets the store's commits (each a turn of the event loop or two) and what they woke run their course. */
async function settleCommits(): Promise<void> {
  for (let turn = 0; turn < 4; turn++) await settle();
}

/** Follows a promise without awaiting it; the getter says what it resolved to so far. */
function track<T>(promise: Promise<T>): () => T | undefined {
  let value: T | undefined;
  void promise.then((resolved) => {
    value = resolved;
  });
  return () => value;
}

describe("long polls and wake-ups", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: InterleavingStore;
  let broker: QueueBroker;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new InterleavingStore({ path: ":memory:", random: seededRandom(11) });
    broker = new QueueBroker(store, clock, seededRandom(11), silent);
    await broker.start();
    await broker.putQueue("q", {});
  });

  afterEach(async () => {
    broker.stop();
    await store.close();
  });

  const body = (text: string) => ({ body: Buffer.from(text), contentType: "text/plain" });

  for (const wakesAsCalled of [true, false]) {
    test(`a send committed while a long poll looks wakes it (${wakesAsCalled ? "as called" : "after commit"})`, async () => {
      if (!wakesAsCalled) Object.defineProperty(store, "commitsInCallOrder", { value: false });
      // The send commits after the look read the queue and before the long poll waits: it is not yet a
      // waiter, so the send cannot hand off to it, and only the head it read before its look can tell.
      store.duringNextLease = async () => {
        await broker.send("q", [body("raced")]);
      };
      const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
      await settleCommits();
      assert.deepEqual(
        received()?.map((leased) => leased.body.toString()),
        ["raced"],
        "answered with no time passing",
      );
      assert.equal(store.leases, 2, "the empty look, then the look the wake-up started");
    });
  }

  test("another node's commit, reported by the ClusterLink while a long poll looks, wakes it", async () => {
    store.duringNextLease = async () => {
      await store.sendAsOtherNode("q", clock.now());
      store.listener?.({ kind: "messages", queue: "q" });
    };
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settleCommits();
    assert.equal(received()?.length, 1, "answered with no time passing");
  });

  test("another node's commit reported while a long poll waits wakes it", async () => {
    await clock.advance(0); // the housekeeping pass that creating the queue asked for
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settle();
    await store.sendAsOtherNode("q", clock.now());
    await clock.advance(1_000);
    assert.equal(received(), undefined, "nothing told this node");
    store.listener?.({ kind: "messages", queue: "q" });
    await settleCommits();
    assert.equal(received()?.length, 1);
  });

  test("after a resync a receive told the queue drained looks again, though no one waited then", async () => {
    const drainedAt = broker.queueVersion("q");
    // Another node commits while this node's link is down: no event comes, only a resync after it.
    await store.sendAsOtherNode("q", clock.now());
    store.listener?.({ kind: "resync" });
    assert.notEqual(broker.queueVersion("q"), drainedAt, "every head moved");
    const leasesBefore = store.leases;
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: drainedAt }));
    await settleCommits();
    assert.equal(received()?.length, 1, "answered at once, not at the end of the wait");
    assert.equal(store.leases - leasesBefore, 1);
  });

  test("a long poll beyond the waits one queue allows is refused, after its look", async () => {
    const leaving = Array.from({ length: limits.waitersPerTopicMax }, () => new AbortController());
    const polls = leaving.map((controller) =>
      broker.receive("q", { waitMs: 20_000, signal: controller.signal }),
    );
    await settleCommits();
    const leasesBefore = store.leases;
    await assert.rejects(broker.receive("q", { waitMs: 20_000 }), { code: "too_many_waiters" });
    assert.equal(store.leases - leasesBefore, 1, "it looked first");
    for (const controller of leaving) controller.abort();
    assert.deepEqual(new Set((await Promise.all(polls)).map((answer) => answer.length)), new Set([0]));
  });
});
