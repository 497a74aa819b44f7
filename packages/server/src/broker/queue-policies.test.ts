/**
 * The broker's side of FIFO queues, deduplication, priorities, overflow, at-most-once receives and
 * redrive tasks, on a fake clock: what it decides (defaults, refusals, dedupIds, rates) and that the
 * store carries it out.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { HopperError } from "../errors.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { type OutgoingMessage, QueueBroker } from "./queues.js";

const silent = { info() {}, warn() {}, error() {} };

function text(body: string, extra: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return { body: Buffer.from(body), contentType: "text/plain", ...extra };
}

const code = (expected: string) => (error: unknown) =>
  error instanceof HopperError && error.code === expected;

describe("queue policies in the broker", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: SqliteStore;
  let broker: QueueBroker;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new SqliteStore({ path: ":memory:", random: seededRandom(7) });
    broker = new QueueBroker(store, clock, seededRandom(7), silent);
    await broker.start();
  });

  afterEach(async () => {
    broker.stop();
    await store.close();
  });

  /** Receives and acks everything the queue hands out now, and answers the bodies in that order. */
  async function drain(queue: string): Promise<string[]> {
    const bodies: string[] = [];
    for (;;) {
      const messages = await broker.receive(queue, { max: 10 });
      if (messages.length === 0) return bodies;
      bodies.push(...messages.map((m) => m.body.toString()));
      await broker.ack(
        queue,
        messages.map((m) => m.receipt),
      );
    }
  }

  test("a FIFO queue deduplicates for 5 minutes by default; a standard queue only when told", async () => {
    const fifo = await broker.putQueue("f", { kind: "fifo" });
    assert.equal(fifo.queue.attributes.dedupWindowMs, 300_000);
    const standard = await broker.putQueue("s", {});
    assert.equal(standard.queue.attributes.dedupWindowMs, 0);
    const [first] = await broker.send("f", [text("a", { key: "k", dedupId: "x" })]);
    assert.ok(first && "id" in first);
    clock.advance(299_999);
    assert.deepEqual(await broker.send("f", [text("b", { key: "k", dedupId: "x" })]), [
      { id: first.id, duplicate: true },
    ]);
    const plain = await broker.send("s", [text("a", { dedupId: "x" }), text("a", { dedupId: "x" })]);
    assert.deepEqual(
      plain.map((result) => "duplicate" in result && result.duplicate),
      [false, false],
    );
  });

  test("content-based deduplication hashes the body when no dedupId is given", async () => {
    await broker.putQueue("c", { dedupWindowMs: 60_000, contentBasedDedup: true });
    const results = await broker.send("c", [
      text("same"),
      text("same"),
      text("other"),
      text("same", { dedupId: "own" }),
    ]);
    const ids = results.map((result) => ("id" in result ? result.id : "error"));
    assert.equal(ids[1], ids[0]);
    assert.notEqual(ids[2], ids[0]);
    assert.notEqual(ids[3], ids[0], "an explicit dedupId wins over the body");
    assert.equal((await broker.stats("c")).available, 3);
  });

  test("a FIFO queue refuses priorities per item; a standard queue leases by priority", async () => {
    await broker.putQueue("f", { kind: "fifo" });
    const [refused, accepted] = await broker.send("f", [
      text("a", { priority: 3 }),
      text("b", { priority: 0 }),
    ]);
    assert.ok(refused && "error" in refused && refused.error.code === "invalid_request");
    assert.ok(accepted && "id" in accepted);
    await broker.putQueue("p", {});
    await broker.send("p", [text("low"), text("high", { priority: 9 }), text("mid", { priority: 4 })]);
    assert.deepEqual(await drain("p"), ["high", "mid", "low"]);
  });

  test("maxDepth with reject answers queue_full and stores nothing; the counters say what happened", async () => {
    await broker.putQueue("o", { maxDepth: 2 });
    await broker.send("o", [text("1"), text("2")]);
    await assert.rejects(broker.send("o", [text("3")]), code("queue_full"));
    await broker.putQueue("o", { overflow: "drop-oldest" });
    await broker.send("o", [text("3")]);
    const stats = await broker.stats("o");
    assert.deepEqual([stats.available, stats.published, stats.dropped], [2, 3, 1]);
    assert.deepEqual(await drain("o"), ["2", "3"]);
  });

  test("dead-letter-oldest moves the overflow to the dead-letter queue, and its long poll wakes", async () => {
    await broker.putQueue("dlq", {});
    await broker.putQueue("o", {
      maxDepth: 1,
      overflow: "dead-letter-oldest",
      deadLetter: { queue: "dlq", maxDeliveries: 5 },
    });
    const waiting = broker.receive("dlq", { waitMs: 10_000 });
    await broker.send("o", [text("old"), text("new")]);
    const [dead] = await waiting;
    assert.equal(dead?.body.toString(), "old");
    assert.equal(dead?.headers["x-dead-letter-reason"], "max_depth");
    assert.equal(clock.now(), new FakeClock().now(), "woke without the clock moving");
  });

  test("a FIFO long poll wakes when an ack or a dead letter hands the group on", async () => {
    await broker.putQueue("dlq", {});
    await broker.putQueue("f", { kind: "fifo", deadLetter: { queue: "dlq", maxDeliveries: 1 } });
    await broker.send("f", [text("1", { key: "k" }), text("2", { key: "k" }), text("3", { key: "k" })]);
    const [first] = await broker.receive("f", {});
    /** Starts a long poll that finds the group busy, and reports what it got once it returns. */
    const poll = async () => {
      let got: string | undefined;
      const done = broker.receive("f", { waitMs: 10_000 }).then((messages) => {
        got = messages[0]?.body.toString() ?? "nothing";
        return messages[0];
      });
      await settle();
      assert.equal(got, undefined, "the group was busy: the poll waits");
      return { done, got: () => got };
    };
    const afterAck = await poll();
    await broker.ack("f", [first?.receipt ?? ""]);
    await settle();
    assert.equal(afterAck.got(), "2", "woken by the ack, with no time passing");
    const second = await afterAck.done;
    const afterDeadLetter = await poll();
    await broker.nack("f", [second?.receipt ?? ""]); // its last delivery: dead-lettered
    await settle();
    assert.equal(afterDeadLetter.got(), "3", "woken by the dead letter");
  });

  test("pushback refuses publishes whole while the queue is too deep or its oldest too old", async () => {
    await broker.putQueue("p", { pushbackDepth: 3, pushbackAgeMs: 60_000 });
    await broker.send("p", [text("1"), text("2")]);
    await broker.send("p", [text("3"), text("4")]); // the check is before the write: 2 < 3 passes
    const refusal = (error: unknown) =>
      error instanceof HopperError &&
      error.code === "backpressure" &&
      error.status === 429 &&
      error.details?.retryAfterMs === 1000 &&
      error.details?.depth === 4;
    await assert.rejects(broker.send("p", [text("5")]), refusal);
    assert.equal((await broker.stats("p")).published, 4, "nothing of the refused publish was stored");
    const leased = await broker.receive("p", { max: 3 });
    await broker.ack(
      "p",
      leased.map((m) => m.receipt),
    );
    await broker.send("p", [text("6")]); // depth 1, then 2: accepted
    await clock.advance(60_000);
    await assert.rejects(
      broker.send("p", [text("7")]),
      (error: unknown) => error instanceof HopperError && error.details?.oldestAgeMs === 60_000,
    );
    await broker.putQueue("p", { pushbackAgeMs: null, pushbackDepth: null });
    await broker.send("p", [text("8")]);
    assert.equal((await broker.stats("p")).available, 3);
  });

  test("autoAck hands a message out once: it never comes back", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 1_000 });
    await broker.send("q", [text("once")]);
    const [message] = await broker.receive("q", { autoAck: true });
    assert.equal(message?.body.toString(), "once");
    await clock.advance(5_000);
    assert.deepEqual(await broker.receive("q", {}), []);
    const stats = await broker.stats("q");
    assert.deepEqual([stats.delivered, stats.acked, stats.inFlight], [1, 1, 0]);
  });

  describe("redrive", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    /** A dead-letter queue holding `count` messages of `orders`, keys k0..k4 in turn. */
    async function deadLetters(count: number): Promise<void> {
      await broker.putQueue("dlq", {});
      await broker.putQueue("orders", { deadLetter: { queue: "dlq", maxDeliveries: 1 } });
      for (let sent = 0; sent < count; sent += 100) {
        const batch = Array.from({ length: Math.min(100, count - sent) }, (_, i) =>
          text(String(sent + i), { key: `k${(sent + i) % 5}` }),
        );
        await broker.send("orders", batch);
      }
      for (;;) {
        const messages = await broker.receive("orders", { max: 100 });
        if (messages.length === 0) break;
        await broker.nack(
          "orders",
          messages.map((m) => m.receipt),
        );
      }
      assert.equal((await broker.stats("dlq")).available, count);
    }

    test("moves everything back to its queue, in order per key, at the requested rate", async () => {
      await deadLetters(500);
      const task = await broker.redrive("dlq", { ratePerSecond: 50 });
      assert.deepEqual([task.state, task.total], ["running", 500]);
      await clock.advance(0);
      const progress: number[] = [];
      for (let second = 1; second <= 10; second++) {
        await clock.advance(1_000);
        progress.push(broker.task(task.id).moved);
      }
      // 50 a second: within one step (5 messages) of the ideal line, every second.
      progress.forEach((moved, i) => {
        assert.ok(Math.abs(moved - 50 * (i + 1)) <= 5, `after ${i + 1} s moved ${moved}`);
      });
      assert.equal(broker.task(task.id).state, "done");
      const stats = await broker.stats("dlq");
      assert.deepEqual([stats.available, stats.redriven], [0, 500]);
      const bodies = (await drain("orders")).map(Number);
      assert.equal(bodies.length, 500);
      for (let key = 0; key < 5; key++) {
        const ofKey = bodies.filter((n) => n % 5 === key);
        assert.deepEqual(
          ofKey,
          [...ofKey].sort((a, b) => a - b),
          `key k${key} in order`,
        );
      }
    });

    test("a long poll on the target wakes when a step moves messages into it", async () => {
      await deadLetters(5);
      let woke: string[] | undefined;
      const polling = broker.receive("orders", { max: 10, waitMs: 20_000 }).then((messages) => {
        woke = messages.map((message) => message.body.toString());
      });
      const woken = () => woke;
      await clock.advance(0);
      assert.equal(woken(), undefined, "nothing to take before the redrive");
      const task = await broker.redrive("dlq", {});
      await clock.advance(0);
      await settle();
      assert.equal(broker.task(task.id).state, "done");
      assert.ok((woken()?.length ?? 0) > 0, "woken by the step, without its wait ending");
      await polling;
    });

    test("a cancel midway stops it without loss or duplication", async () => {
      await deadLetters(300);
      const task = await broker.redrive("dlq", { ratePerSecond: 100 });
      await clock.advance(1_000);
      const cancelled = broker.cancelTask(task.id);
      assert.equal(cancelled.state, "cancelled");
      await clock.advance(10_000);
      const after = broker.task(task.id);
      assert.ok(after.moved > 0 && after.moved < 300, `moved ${after.moved}`);
      const inDlq = (await broker.stats("dlq")).available;
      const back = await drain("orders");
      assert.equal(back.length, after.moved, "what the task says it moved is what arrived");
      assert.equal(inDlq + back.length, 300, "nothing lost");
      assert.equal(new Set(back).size, back.length, "nothing twice");
    });

    test("without a rate it runs as fast as the store allows; `max` bounds it; one at a time per queue", async () => {
      await deadLetters(250);
      const task = await broker.redrive("dlq", { max: 120 });
      await assert.rejects(broker.redrive("dlq", {}), code("redrive_running"));
      await clock.advance(0);
      assert.deepEqual([broker.task(task.id).state, broker.task(task.id).moved], ["done", 120]);
      assert.equal((await broker.stats("dlq")).available, 130);
    });

    test("a target that is gone fails the task, leaving the rest where it was", async () => {
      await broker.putQueue("dlq", {});
      await broker.send("dlq", [text("orphan", { headers: { "x-original-queue": "deleted" } })]);
      const task = await broker.redrive("dlq", {});
      await clock.advance(0);
      const failed = broker.task(task.id);
      assert.deepEqual([failed.state, failed.moved, failed.error?.code], ["failed", 0, "queue_not_found"]);
      assert.equal((await broker.stats("dlq")).available, 1);
      await assert.rejects(broker.redrive("dlq", { to: "nowhere" }), code("queue_not_found"));
      assert.throws(() => broker.task("nope"), code("task_not_found"));
    });
  });
});
