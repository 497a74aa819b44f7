/**
 * Queue semantics on a fake clock: leases, redelivery, stale receipts, dead letters, delays,
 * retention and long polls. Time moves only when a test advances it.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { HopperError } from "../errors.js";
import type { LeasedMessage } from "../model/message.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { type OutgoingMessage, QueueBroker } from "./queues.js";

const silent = { info() {}, warn() {}, error() {} };

/** Follows a promise without awaiting it; the getter says what it resolved to so far. */
function track<T>(promise: Promise<T>): () => T | undefined {
  let value: T | undefined;
  void promise.then((resolved) => {
    value = resolved;
  });
  return () => value;
}

function text(body: string, extra: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return { body: Buffer.from(body), contentType: "text/plain", ...extra };
}

describe("queue broker", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: SqliteStore;
  let broker: QueueBroker;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new SqliteStore({ path: ":memory:", random: seededRandom(42) });
    broker = new QueueBroker(store, clock, seededRandom(42), silent);
    await broker.start();
  });

  afterEach(async () => {
    broker.stop();
    await store.close();
  });

  async function receiveOne(queue: string, visibilityTimeoutMs?: number): Promise<LeasedMessage> {
    const [message] = await broker.receive(queue, {
      max: 1,
      ...(visibilityTimeoutMs && { visibilityTimeoutMs }),
    });
    assert.ok(message, `expected a message in ${queue}`);
    return message;
  }

  test("an expired lease gives redelivery with deliveryCount + 1", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 10_000 });
    await broker.send("q", [text("a")]);
    const first = await receiveOne("q");
    assert.equal(first.deliveryCount, 1);
    await clock.advance(9_999);
    assert.deepEqual(await broker.receive("q", {}), [], "still leased before the timeout");
    await clock.advance(1);
    const second = await receiveOne("q");
    assert.equal(second.id, first.id);
    assert.equal(second.deliveryCount, 2);
    const stats = await broker.stats("q");
    assert.equal(stats.delivered, 2);
    assert.equal(stats.redelivered, 1);
  });

  test("an ack with a stale receipt answers stale_receipt and leaves the message with its holder", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 1_000 });
    await broker.send("q", [text("a")]);
    const first = await receiveOne("q");
    await clock.advance(1_000);
    const second = await receiveOne("q");
    const [result] = await broker.ack("q", [first.receipt]);
    assert.ok(result && "error" in result);
    assert.equal(result.error.code, "stale_receipt");
    assert.equal((await broker.stats("q")).inFlight, 1, "the new holder still holds it");
    assert.deepEqual(await broker.ack("q", [second.receipt]), [{ ok: true }]);
    const stats = await broker.stats("q");
    assert.deepEqual([stats.inFlight, stats.available, stats.acked], [0, 0, 1]);
    await clock.advance(60_000);
    assert.deepEqual(await broker.receive("q", {}), [], "an acked message never comes back");
  });

  describe("dead letters", () => {
    beforeEach(async () => {
      await broker.putQueue("dlq", {});
      await broker.putQueue("q", {
        visibilityTimeoutMs: 1_000,
        deadLetter: { queue: "dlq", maxDeliveries: 2 },
      });
    });

    test("after maxDeliveries expired leases the message moves to the dead-letter queue with headers", async () => {
      const [sent] = await broker.send("q", [text("poison", { headers: { traceparent: "00-abc-def-01" } })]);
      assert.ok(sent && "id" in sent);
      await receiveOne("q");
      await clock.advance(1_000);
      await receiveOne("q");
      // The second lease ends; the scheduler sweeps the queue at that moment, with no receive needed.
      await clock.advance(1_000);
      const stats = await broker.stats("q");
      assert.deepEqual([stats.available, stats.inFlight, stats.deadLettered], [0, 0, 1]);
      const [dead] = await broker.peek("dlq", "available", 10);
      assert.ok(dead);
      assert.equal(dead.id, sent.id);
      assert.equal(dead.body.toString(), "poison");
      assert.deepEqual(
        {
          reason: dead.headers["x-dead-letter-reason"],
          queue: dead.headers["x-original-queue"],
          count: dead.headers["x-delivery-count"],
          trace: dead.headers.traceparent,
        },
        { reason: "max_deliveries", queue: "q", count: "2", trace: "00-abc-def-01" },
      );
    });

    test("a nack of the last delivery dead-letters at once", async () => {
      await broker.send("q", [text("poison")]);
      await broker.nack("q", [(await receiveOne("q")).receipt], { delayMs: 0 });
      await broker.nack("q", [(await receiveOne("q")).receipt], { delayMs: 0 });
      assert.equal((await broker.stats("dlq")).available, 1);
      assert.equal((await broker.stats("q")).nacked, 2);
    });

    test("messages arriving in a dead-letter queue expire by its retention", async () => {
      await broker.putQueue("dlq", { retentionMs: 60_000 });
      await broker.send("q", [text("poison")]);
      await broker.nack("q", [(await receiveOne("q")).receipt], { delayMs: 0 });
      await broker.nack("q", [(await receiveOne("q")).receipt], { delayMs: 0 });
      assert.equal((await broker.stats("dlq")).available, 1);
      await clock.advance(60_000);
      const stats = await broker.stats("dlq");
      assert.deepEqual([stats.available, stats.expired], [0, 1]);
    });

    test("a lease handed back at the instant of a sweep is still dead-lettered by the sweep", async () => {
      await broker.send("q", [text("poison")]);
      await broker.nack("q", [(await receiveOne("q")).receipt], { delayMs: 0 });
      const last = await receiveOne("q");
      await clock.advance(10);
      // A sweep runs now (an update of the queue asks for one)...
      await broker.putQueue("q", {});
      await clock.advance(0);
      // ...and the last lease ends in that same millisecond, after it.
      await broker.extend("q", [last.receipt], 0);
      await clock.advance(0);
      assert.equal((await broker.stats("dlq")).available, 1);
    });

    test("a dead-letter queue in use cannot be deleted", async () => {
      await assert.rejects(
        broker.deleteQueue("dlq"),
        (e: unknown) => (e as HopperError).code === "queue_in_use",
      );
    });
  });

  test("a delayed message is invisible until due, and a waiting long poll wakes when it falls due", async () => {
    await broker.putQueue("q", {});
    await broker.send("q", [text("later", { delayMs: 5_000 })]);
    assert.equal((await broker.stats("q")).delayed, 1);
    assert.deepEqual(await broker.receive("q", {}), []);
    const received = track(broker.receive("q", { waitMs: 20_000 }));
    await clock.advance(4_999);
    assert.equal(received(), undefined);
    await clock.advance(1);
    assert.equal(received()?.length, 1);
    assert.equal(received()?.[0]?.body.toString(), "later");
  });

  test("a queue's default delay applies when the message gives none", async () => {
    await broker.putQueue("q", { delayMs: 2_000 });
    await broker.send("q", [text("a"), text("b", { delayMs: 0 })]);
    const stats = await broker.stats("q");
    assert.deepEqual([stats.available, stats.delayed], [1, 1]);
  });

  test("retention expires messages when due, counted as expired", async () => {
    await broker.putQueue("q", { retentionMs: 60_000 });
    await broker.send("q", [text("old")]);
    await clock.advance(30_000);
    await broker.send("q", [text("young")]);
    await clock.advance(30_000);
    let stats = await broker.stats("q");
    assert.deepEqual([stats.available, stats.expired], [1, 1]);
    assert.equal(stats.oldestMessageAgeMs, 30_000);
    await clock.advance(30_000);
    stats = await broker.stats("q");
    assert.deepEqual([stats.available, stats.expired], [0, 2]);
  });

  test("a long poll returns at once when a message arrives during the wait", async () => {
    await broker.putQueue("q", {});
    const received = track(broker.receive("q", { waitMs: 20_000 }));
    await clock.advance(3_000);
    assert.equal(received(), undefined, "nothing to return yet");
    assert.equal((await broker.stats("q")).consumers, 1);
    await broker.send("q", [text("now")]);
    await settle();
    assert.equal(received()?.length, 1, "returned without any more time passing");
  });

  test("a long poll sees a message committed together with its own empty look", async () => {
    await broker.putQueue("q", {});
    // Both calls join one group commit; the lease runs first and finds nothing.
    const received = track(broker.receive("q", { waitMs: 20_000 }));
    await broker.send("q", [text("same commit")]);
    await settle();
    assert.equal(received()?.length, 1, "woken without any time passing");
  });

  test("a long poll returns empty only when the wait is over", async () => {
    await broker.putQueue("q", {});
    const received = track(broker.receive("q", { waitMs: 20_000 }));
    await clock.advance(19_999);
    assert.equal(received(), undefined);
    await clock.advance(1);
    assert.deepEqual(received(), []);
  });

  test("a long poll ends when its caller goes away, leasing nothing", async () => {
    await broker.putQueue("q", {});
    const controller = new AbortController();
    const pending = broker.receive("q", { waitMs: 20_000, signal: controller.signal });
    controller.abort();
    assert.deepEqual(await pending, []);
    await broker.send("q", [text("a")]);
    assert.equal((await broker.stats("q")).available, 1);
  });

  /** Counts the store's lease calls, each a write transaction. */
  function countLeases(): () => number {
    let leases = 0;
    const lease = store.queueLease.bind(store);
    store.queueLease = (params) => {
      leases++;
      return lease(params);
    };
    return () => leases;
  }

  test("a long poll told the queue drained at an unchanged version waits without a lease", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 5_000 });
    await broker.send("q", [text("a")]);
    const version = broker.queueVersion("q");
    const first = await broker.receive("q", { max: 10, waitMs: 20_000 });
    assert.equal(first.length, 1, "fewer than asked for: the queue was drained");
    const leases = countLeases();
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: version }));
    await settle();
    assert.equal(leases(), 0, "no look that could only find nothing");
    await broker.send("q", [text("b")]);
    await settle();
    assert.deepEqual(
      received()?.map((message) => message.body.toString()),
      ["b"],
    );
    assert.equal(leases(), 0, "the send handed its message to the waiting receive: no lease either");
  });

  test("a drained version that is out of date, or a receive that does not wait, still looks", async () => {
    await broker.putQueue("q", {});
    const version = broker.queueVersion("q");
    await broker.send("q", [text("a")]);
    assert.notEqual(broker.queueVersion("q"), version, "a send notifies");
    const afterSend = await broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: version });
    assert.equal(afterSend.length, 1);
    await broker.send("q", [text("b")]);
    const leases = countLeases();
    const unchanged = broker.queueVersion("q");
    const noWait = await broker.receive("q", { max: 10, waitMs: 0, drainedAtVersion: unchanged });
    assert.equal(noWait.length, 1, "a receive without a wait always looks");
    assert.equal(leases(), 1);
  });

  test("receiveLooking answers the version of the look that found the queue drained", async () => {
    await broker.putQueue("q", {});
    const first = track(broker.receiveLooking("q", { max: 10, waitMs: 20_000 }));
    await settle();
    await broker.send("q", [text("a")]);
    await settle();
    const answered = first();
    assert.equal(answered?.messages.length, 1, "fewer than asked for: the queue was drained");
    const leases = countLeases();
    const next = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: answered?.version }));
    await settle();
    assert.equal(leases(), 0, "nothing notified since that look, so the next receive waits at once");
    await broker.send("q", [text("b")]);
    await settle();
    assert.deepEqual(
      next()?.map((message) => message.body.toString()),
      ["b"],
    );
  });

  test("a long poll woken by a send leases in the send's own commit", async () => {
    await broker.putQueue("q", {});
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settle();
    const commitsBefore = store.commitStats.commits;
    await broker.send("q", [text("a")]);
    await settle();
    assert.deepEqual(
      received()?.map((message) => message.body.toString()),
      ["a"],
    );
    assert.equal(
      store.commitStats.commits - commitsBefore,
      1,
      "one commit (one fsync) for the send and the lease",
    );
  });

  /** Starts a long poll that the test ends with leave(), which answers what the receive answered. */
  async function longPoll(queue: string) {
    const leaving = new AbortController();
    const receiving = broker.receive(queue, { max: 10, waitMs: 20_000, signal: leaving.signal });
    const received = track(receiving);
    await settle();
    return {
      received,
      leave: () => {
        leaving.abort();
        return receiving;
      },
    };
  }

  test("a send hands its message to the longest-waiting long poll and wakes no other", async () => {
    await broker.putQueue("q", {});
    const first = await longPoll("q");
    const second = await longPoll("q");
    const leases = countLeases();
    const versionBefore = broker.queueVersion("q");
    await broker.send("q", [text("a")]);
    await settle();
    assert.deepEqual(
      first.received()?.map((message) => [message.body.toString(), message.deliveryCount]),
      [["a", 1]],
    );
    assert.equal(second.received(), undefined, "the other long poll waits on: the send left it nothing");
    assert.equal(leases(), 0, "no lease: the send leased the message as it wrote it");
    assert.equal(broker.queueVersion("q"), versionBefore, "nothing was made available");
    const stats = await broker.stats("q");
    assert.deepEqual([stats.available, stats.inFlight, stats.delivered], [0, 1, 1]);
    assert.deepEqual(await second.leave(), []);
  });

  test("the sends of one turn hand their messages to one long poll, as one batch", async () => {
    await broker.putQueue("q", {});
    const first = await longPoll("q");
    const second = await longPoll("q");
    await Promise.all([
      broker.send("q", [text("a")]),
      broker.send("q", [text("b")]),
      broker.send("q", [text("c")]),
    ]);
    await settle();
    assert.deepEqual(
      first.received()?.map((message) => message.body.toString()),
      ["a", "b", "c"],
    );
    assert.equal(second.received(), undefined, "the other long poll waits on");
    assert.deepEqual(await second.leave(), []);
  });

  test("what a hand-off cannot take wakes the other long polls", async () => {
    await broker.putQueue("q", {});
    const takesOne = track(broker.receive("q", { max: 1, waitMs: 20_000 }));
    await settle();
    const takesMore = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settle();
    await broker.send("q", [text("a"), text("b"), text("c")]);
    await settle();
    assert.deepEqual(
      takesOne()?.map((message) => message.body.toString()),
      ["a"],
    );
    assert.deepEqual(
      takesMore()?.map((message) => message.body.toString()),
      ["b", "c"],
    );
  });

  test("a handed-off message whose receive was abandoned meanwhile goes to the next long poll", async () => {
    await broker.putQueue("q", {});
    const abandoned = await longPoll("q");
    const next = await longPoll("q");
    // The caller leaves after the send claimed its receive, before the send's commit.
    const sendMany = store.queueSendMany.bind(store);
    store.queueSendMany = (params) => {
      assert.ok(params.sends[0]?.handoff, "the send hands off");
      void abandoned.leave();
      return sendMany(params);
    };
    await broker.send("q", [text("a")]);
    await settle();
    assert.deepEqual(abandoned.received(), [], "the receive that left answers nothing");
    await clock.advance(0);
    assert.deepEqual(
      next.received()?.map((message) => [message.body.toString(), message.deliveryCount]),
      [["a", 2]],
      "handed back at once, it wakes the next long poll (the hand-off counted a delivery)",
    );
  });

  test("a send that fails after claiming a long poll leaves it waiting, and the next send reaches it", async () => {
    await broker.putQueue("q", {});
    const poll = await longPoll("q");
    const sendMany = store.queueSendMany.bind(store);
    store.queueSendMany = async () => {
      throw new Error("disk full");
    };
    await assert.rejects(broker.send("q", [text("lost")]), /disk full/);
    await settle();
    assert.equal(poll.received(), undefined, "it looked, found nothing, and waits on");
    store.queueSendMany = sendMany;
    await broker.send("q", [text("b")]);
    await settle();
    assert.deepEqual(
      poll.received()?.map((message) => message.body.toString()),
      ["b"],
    );
  });

  test("a long poll woken by a send that cannot hand off still leases in the send's own commit", async () => {
    // maxDepth gives the send an overflow policy: no hand-off, the long poll is woken as the send is called.
    await broker.putQueue("q", { maxDepth: 10 });
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settle();
    const leases = countLeases();
    const commitsBefore = store.commitStats.commits;
    await broker.send("q", [text("a")]);
    await settle();
    assert.deepEqual(
      received()?.map((message) => message.body.toString()),
      ["a"],
    );
    assert.equal(leases(), 1, "a lease, not a hand-off");
    assert.equal(store.commitStats.commits - commitsBefore, 1, "one commit for the send and the lease");
  });

  test("a long poll woken by a send that is refused looks, finds nothing, and waits on", async () => {
    await broker.putQueue("q", { maxDepth: 1 });
    await broker.send("q", [text("a")]);
    const a = await receiveOne("q");
    const received = track(broker.receive("q", { max: 10, waitMs: 20_000 }));
    await settle();
    await assert.rejects(broker.send("q", [text("refused")]), { code: "queue_full" });
    await settle();
    assert.equal(received(), undefined, "still waiting");
    await broker.ack("q", [a.receipt]);
    await broker.send("q", [text("b")]);
    await settle();
    assert.deepEqual(
      received()?.map((message) => message.body.toString()),
      ["b"],
    );
  });

  test("after a drained look, a nack, an expired lease and a delay falling due each wake the long poll", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 5_000, retry: { initialDelayMs: 0, jitter: "none" } });
    await broker.send("q", [text("a")]);
    let version = broker.queueVersion("q");
    const [a] = await broker.receive("q", { max: 10 });
    assert.ok(a);
    // A nack makes "a" available again at once.
    let received = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: version }));
    await settle();
    assert.equal(received(), undefined);
    await broker.nack("q", [a.receipt]);
    await settle();
    assert.equal(received()?.[0]?.id, a.id, "woken by the nack");
    // The lease just taken expires after 5 s.
    version = broker.queueVersion("q");
    received = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: version }));
    await clock.advance(4_999);
    assert.equal(received(), undefined);
    await clock.advance(1);
    assert.equal(received()?.[0]?.id, a.id, "woken when the lease ran out");
    // A message sent with a delay falls due.
    const [again] = received() ?? [];
    assert.ok(again);
    await broker.ack("q", [again.receipt]);
    await broker.send("q", [text("later", { delayMs: 3_000 })]);
    version = broker.queueVersion("q");
    received = track(broker.receive("q", { max: 10, waitMs: 20_000, drainedAtVersion: version }));
    await clock.advance(2_999);
    assert.equal(received(), undefined);
    await clock.advance(1);
    assert.equal(received()?.[0]?.body.toString(), "later", "woken when the delay ended");
  });

  test("messages leased for a caller that left are handed back at once", async () => {
    await broker.putQueue("q", {});
    await broker.send("q", [text("a")]);
    const controller = new AbortController();
    const pending = broker.receive("q", { signal: controller.signal });
    controller.abort();
    assert.deepEqual(await pending, []);
    const again = await receiveOne("q");
    assert.equal(again.deliveryCount, 2, "the abandoned lease counted as a delivery");
  });

  test("nack without a delay uses the retry policy: exponential, capped", async () => {
    await broker.putQueue("q", {
      retry: { initialDelayMs: 1_000, multiplier: 2, maxDelayMs: 3_000, jitter: "none" },
    });
    await broker.send("q", [text("a")]);
    const expected = [1_000, 2_000, 3_000, 3_000];
    for (const delayMs of expected) {
      await broker.nack("q", [(await receiveOne("q")).receipt]);
      await clock.advance(delayMs - 1);
      assert.deepEqual(await broker.receive("q", {}), [], `not before ${delayMs} ms`);
      await clock.advance(1);
    }
    assert.equal((await receiveOne("q")).deliveryCount, 5);
  });

  test("extend keeps a lease past its original end", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 1_000 });
    await broker.send("q", [text("a")]);
    const leased = await receiveOne("q");
    await clock.advance(900);
    assert.deepEqual(await broker.extend("q", [leased.receipt], 1_000), [{ ok: true }]);
    await clock.advance(900);
    assert.deepEqual(await broker.receive("q", {}), []);
    assert.deepEqual(await broker.ack("q", [leased.receipt]), [{ ok: true }]);
  });

  test("a batch stores its valid items and rejects the oversized one alone", async () => {
    await broker.putQueue("q", { maxMessageBytes: 4 });
    const results = await broker.send("q", [text("ok"), text("too big"), text("fine")]);
    assert.ok(results[0] && "id" in results[0]);
    assert.ok(results[1] && "error" in results[1] && results[1].error.code === "message_too_large");
    assert.ok(results[2] && "id" in results[2]);
    const stats = await broker.stats("q");
    assert.deepEqual([stats.available, stats.published], [2, 2]);
  });

  test("bad attributes are refused and change nothing", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 5_000 });
    const refuse = async (input: object, code: string) =>
      assert.rejects(
        broker.putQueue("q", input),
        (e: unknown) => e instanceof HopperError && e.code === code,
      );
    await refuse({ retentionMs: 10 }, "invalid_attribute");
    await refuse({ deadLetter: { queue: "q", maxDeliveries: 3 } }, "invalid_attribute");
    await refuse({ deadLetter: { queue: "absent", maxDeliveries: 3 } }, "dead_letter_queue_not_found");
    await refuse({ alerts: { oldestAgeMs: 10 } }, "not_implemented");
    await refuse({ pushbackAgeMs: 14 * 24 * 3600 * 1000 + 1 }, "invalid_attribute");
    await refuse({ maxDepth: 10, overflow: "dead-letter-oldest" }, "invalid_attribute");
    await refuse({ contentBasedDedup: true }, "invalid_attribute");
    await refuse({ dedupWindowMs: 24 * 3600 * 1000 + 1 }, "invalid_attribute");
    await refuse({ deadLetter: { queue: "no spaces", maxDeliveries: 3 } }, "invalid_name");
    await assert.rejects(
      broker.putQueue("..", {}),
      (e: unknown) => (e as HopperError).code === "invalid_name",
    );
    assert.equal((await broker.getQueue("q")).attributes.visibilityTimeoutMs, 5_000);
    await assert.rejects(
      broker.putQueue("q", { kind: "fifo" }),
      (e: unknown) => (e as HopperError).code === "queue_kind_mismatch",
    );
    assert.deepEqual(
      (await broker.listQueues()).map((queue) => queue.name),
      ["q"],
    );
  });

  test("update keeps attributes it is not given", async () => {
    await broker.putQueue("q", { visibilityTimeoutMs: 5_000 });
    const { created, queue } = await broker.putQueue("q", { delayMs: 100 });
    assert.equal(created, false);
    assert.equal(queue.attributes.visibilityTimeoutMs, 5_000);
    assert.equal(queue.attributes.delayMs, 100);
  });

  test("operations on a missing queue answer queue_not_found", async () => {
    const missing = (e: unknown) => e instanceof HopperError && e.code === "queue_not_found";
    await assert.rejects(broker.send("nope", [text("a")]), missing);
    await assert.rejects(broker.receive("nope", {}), missing);
    await assert.rejects(broker.ack("nope", ["1.1"]), missing);
    await assert.rejects(broker.getQueue("nope"), missing);
  });
});
