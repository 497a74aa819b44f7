/**
 * Housekeeping with many nodes, on a fake clock: only the leader sweeps; a node that does not lead
 * neither sweeps nor spins; a node that becomes leader (its predecessor died) looks at every queue,
 * and so does the leader when the store says it may have missed other nodes' commits (resync).
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { noSendPolicy } from "../model/policies.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import type { StoreEvent } from "../store/store.js";
import { message } from "../testing/conformance-fixtures.js";
import { QueueBroker } from "./queues.js";

/** A store whose housekeeping leadership the test decides, and which counts how often it is asked. */
class LeaderSwitchStore extends SqliteStore {
  leader = false;
  asked = 0;
  /** What the broker watches with: the test plays the other nodes through it. */
  listener: ((event: StoreEvent) => void) | undefined;
  override async housekeepingLeader(): Promise<boolean> {
    this.asked++;
    return this.leader;
  }
  override watch(listener: (event: StoreEvent) => void): void {
    this.listener = listener;
  }
}

const silent = { info() {}, warn() {}, error() {} };
let clock: FakeClock;
let store: LeaderSwitchStore;
let broker: QueueBroker;

beforeEach(async () => {
  clock = new FakeClock();
  store = new LeaderSwitchStore({ path: ":memory:", random: seededRandom(5) });
  broker = new QueueBroker(store, clock, seededRandom(5), silent);
  await broker.start();
});

afterEach(async () => {
  broker.stop();
  await store.close();
});

test("a node that does not lead leaves retention alone and does not spin; taking the lead, it sweeps", async () => {
  await broker.putQueue("q", { retentionMs: 60_000 });
  await broker.send("q", [{ body: Buffer.from("old"), contentType: "text/plain" }]);
  await clock.advance(120_000);
  let stats = await broker.stats("q");
  assert.deepEqual([stats.available, stats.expired], [1, 0], "only the leader expires messages");
  const askedWhileFollowing = store.asked;
  await clock.advance(60_000);
  // Retention is long past due; a follower that re-offered it would look again at once, for ever.
  // It asks only on its periodic leadership check (every 5 s): about 12 times in 60 s.
  assert.ok(
    store.asked - askedWhileFollowing <= 15,
    `asked ${store.asked - askedWhileFollowing} times in 60 s`,
  );
  store.leader = true;
  await clock.advance(5_000);
  stats = await broker.stats("q");
  assert.deepEqual([stats.available, stats.expired], [0, 1], "the new leader swept the queue at once");
});

test("after a resync the leader looks at every queue: messages other nodes committed unannounced expire", async () => {
  store.leader = true;
  await clock.advance(5_000);
  await broker.putQueue("q", { retentionMs: 60_000 });
  await clock.advance(1_000);
  // Another node's send, committed without a NOTIFY this node heard: no timer here knows of it.
  await store.queueSendMany({
    sends: [{ queue: "q", messages: [message({ publishedAt: clock.now() })], policy: noSendPolicy }],
    now: clock.now(),
  });
  await clock.advance(120_000);
  let stats = await broker.stats("q");
  assert.deepEqual([stats.available, stats.expired], [1, 0], "nothing told the leader of the message");
  store.listener?.({ kind: "resync" });
  await settle(); // the broker lists the queues before it offers them
  await clock.advance(1_000);
  stats = await broker.stats("q");
  assert.deepEqual([stats.available, stats.expired], [0, 1], "the leader swept the queue after the resync");
});
