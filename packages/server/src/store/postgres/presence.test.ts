/**
 * Presence on the NOTIFY channel (events.ts): a node that hears no other node announces none of its
 * sends; the first word from a node it did not count is answered with `welcome`, after which its sends
 * are announced again, until that node has been silent for the presence timeout; a `welcome` tells
 * the broker to resync. A spy session on the channel plays the other node. Presence time is a fake
 * clock; only the deliveries of NOTIFY are awaited, each with a deadline.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import pg from "pg";
import { noSendPolicy } from "../../model/policies.js";
import { seededRandom } from "../../random.js";
import { attributes, message } from "../../testing/conformance-fixtures.js";
import { dropSchemas, pgSkipReason, pgTestUrl, testSchemaName } from "../../testing/pg.js";
import type { StoreEvent } from "../store.js";
import { channelFor } from "./events.js";
import { PostgresStore } from "./postgres-store.js";

/** Long enough that no heartbeat is due during the test: the test says when time passes. */
const presenceIntervalMs = 3_600_000;
const presenceTimeoutMs = 3 * presenceIntervalMs;
const deliveryDeadlineMs = 5_000;

interface Heard {
  n: string;
  k: string;
  q?: string;
  to?: string;
}

if (!pgTestUrl) {
  test("presence on the NOTIFY channel", { skip: pgSkipReason }, () => {});
} else {
  const url = pgTestUrl;
  const schema = testSchemaName("presence");
  const channel = channelFor(schema);
  let nowMs = Date.UTC(2026, 0, 1);
  let store: PostgresStore;
  let spy: pg.Client;
  const heard: Heard[] = [];
  const events: StoreEvent[] = [];
  let arrived: () => void = () => {};

  before(async () => {
    store = await PostgresStore.open({
      url,
      schema,
      random: seededRandom(3),
      poolSize: 2,
      presenceIntervalMs,
      now: () => nowMs,
    });
    store.watch((event) => events.push(event));
    spy = new pg.Client({ connectionString: url });
    spy.on("notification", (notification) => {
      heard.push(JSON.parse(notification.payload ?? "{}") as Heard);
      arrived();
    });
    await spy.connect();
    await spy.query(`LISTEN "${channel}"`);
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: nowMs });
  });

  after(async () => {
    await spy?.end();
    await store?.close();
    await dropSchemas(url, [schema]);
  });

  /** Waits until a notification after index `from` matches, and answers its index. */
  async function waitFor(from: number, what: string, matches: (heard: Heard) => boolean): Promise<number> {
    const deadline = Date.now() + deliveryDeadlineMs;
    for (;;) {
      const index = heard.findIndex((h, i) => i >= from && matches(h));
      if (index >= 0) return index;
      const left = deadline - Date.now();
      assert.ok(
        left > 0,
        `no ${what} within ${deliveryDeadlineMs} ms; heard ${JSON.stringify(heard.slice(from))}`,
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        arrived = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  async function send(): Promise<void> {
    await store.queueSendMany({
      sends: [{ queue: "q", messages: [message({ publishedAt: nowMs })], policy: noSendPolicy }],
      now: nowMs,
    });
    // An announcement is sent on the turn after the commit: let it leave before the spy speaks.
    await new Promise((resolve) => setImmediate(resolve));
  }

  const say = (node: string, kind: "present" | "welcome", to?: string) =>
    spy.query("SELECT pg_notify($1, $2)", [channel, JSON.stringify({ n: node, k: kind, to })]);

  const announcementsOf = (from: number, to: number) =>
    heard.slice(from, to).filter((h) => h.k === "messages" && h.q === "q").length;

  const welcomeFromTheStore = (h: Heard) => h.k === "welcome" && !h.n.startsWith("spy");

  test("alone, a node announces no send; welcomed by it, another node hears its sends until it times out", async () => {
    const start = heard.length;
    for (let i = 0; i < 3; i++) await send();
    await say("spy", "present");
    const welcomed = await waitFor(start, "welcome", welcomeFromTheStore);
    assert.equal(announcementsOf(start, welcomed), 0, "the sends made alone were announced");

    await send();
    const announced = await waitFor(welcomed, "announcement", (h) => h.k === "messages" && h.q === "q");

    nowMs += presenceTimeoutMs;
    await send();
    await say("spy", "present");
    const welcomedAgain = await waitFor(announced + 1, "second welcome", welcomeFromTheStore);
    assert.equal(
      announcementsOf(announced + 1, welcomedAgain),
      0,
      "a send after the other node's timeout was announced",
    );
  });

  test("a welcome makes the store tell its broker to resync, and a node not heard before is welcomed", async () => {
    const start = heard.length;
    const eventsBefore = events.length;
    await say("spy-2", "welcome");
    const answer = await waitFor(start, "welcome", welcomeFromTheStore);
    assert.equal(heard[answer]?.to, "spy-2", "the welcome is addressed to the node it answers");
    // The store answers in the same turn as it tells its watchers, so the resync came before.
    assert.ok(
      events.slice(eventsBefore).some((event) => event.kind === "resync"),
      `no resync; events ${JSON.stringify(events.slice(eventsBefore))}`,
    );
  });

  test("a welcome addressed to another node makes no resync, but its sender is welcomed", async () => {
    const start = heard.length;
    const eventsBefore = events.length;
    await say("spy-3", "welcome", "some-other-node");
    const answer = await waitFor(
      start,
      "welcome to spy-3",
      (h) => welcomeFromTheStore(h) && h.to === "spy-3",
    );
    assert.ok(answer >= start);
    // The store answers in the same turn as it would tell its watchers.
    assert.deepEqual(
      events.slice(eventsBefore).filter((event) => event.kind === "resync"),
      [],
      "a welcome to another node made this one resync",
    );
  });
}
