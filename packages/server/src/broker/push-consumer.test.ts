/**
 * Push consumers on a fake clock over a real broker and an in-memory SQLite store: credit, hand-back
 * on cancel, pause and resume, the ack timeout, and a deleted queue.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { LeasedMessage } from "../model/message.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import type { Store } from "../store/store.js";
import { PushConsumer, type PushConsumerOptions } from "./push-consumer.js";
import { QueueBroker } from "./queues.js";

const silent = { info() {}, warn() {}, error() {} };

describe("push consumer", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  let clock: FakeClock;
  let store: SqliteStore;
  let broker: QueueBroker;
  const consumers: PushConsumer[] = [];
  /** Lets held leases go (holdLeases), so that a failed test still ends. */
  let releaseLeases = () => {};

  beforeEach(async () => {
    clock = new FakeClock();
    store = new SqliteStore({ path: ":memory:", random: seededRandom(7) });
    broker = new QueueBroker(store, clock, seededRandom(7), silent);
    await broker.start();
    await broker.putQueue("q", {});
  });

  afterEach(async () => {
    releaseLeases();
    await Promise.all(consumers.splice(0).map((consumer) => consumer.cancel()));
    broker.stop();
    await store.close();
  });

  async function send(count: number, queue = "q"): Promise<void> {
    const messages = Array.from({ length: count }, (_, i) => ({
      body: Buffer.from(String(i)),
      contentType: "text/plain",
    }));
    await broker.send(queue, messages);
    await settle();
  }

  function start(prefetch: number, extra: Partial<PushConsumerOptions> = {}) {
    const delivered: LeasedMessage[] = [];
    const warnings: unknown[] = [];
    const consumer = new PushConsumer({
      broker,
      clock,
      queue: "q",
      prefetch,
      deliver: (messages) => delivered.push(...messages),
      onWarning: (error) => warnings.push(error),
      ...extra,
    });
    consumers.push(consumer);
    consumer.start();
    return { consumer, delivered, warnings };
  }

  test("holds at most prefetch deliveries; each ack lets one more through", async () => {
    await send(10);
    const { consumer, delivered } = start(3);
    await settle();
    assert.equal(delivered.length, 3);
    assert.equal(consumer.unacked, 3);
    const results = await consumer.ack([(delivered[0] as LeasedMessage).receipt]);
    assert.deepEqual(results, [{ ok: true }]);
    await settle();
    assert.equal(delivered.length, 4);
    assert.equal(consumer.unacked, 3);
    while (delivered.length < 10) {
      await consumer.ack(delivered.slice(-consumer.unacked).map((message) => message.receipt));
      await settle();
      assert.ok(consumer.unacked <= 3);
    }
    assert.equal(new Set(delivered.map((message) => message.id)).size, 10);
  });

  test("a message sent later reaches a consumer that was waiting with credit", async () => {
    const { delivered } = start(2);
    await settle();
    assert.equal(delivered.length, 0);
    await send(1);
    assert.equal(delivered.length, 1);
  });

  test("cancel hands every held lease back at once: another receive takes them with no time passing", async () => {
    await send(4);
    const { consumer, delivered } = start(4);
    await settle();
    assert.equal(delivered.length, 4);
    await consumer.cancel();
    const again = await broker.receive("q", { max: 10, waitMs: 0 });
    assert.deepEqual(
      again.map((message) => message.id).sort(),
      delivered.map((message) => message.id).sort(),
    );
    assert.ok(again.every((message) => message.deliveryCount === 2));
  });

  test("a push consumer counts in the queue's consumers while it lives, even at full credit", async () => {
    await send(1);
    const { consumer, delivered } = start(1);
    await settle();
    assert.equal(delivered.length, 1, "credit used up: the consumer is not polling now");
    assert.equal((await broker.stats("q")).consumers, 1);
    await consumer.cancel();
    assert.equal((await broker.stats("q")).consumers, 0);
  });

  test("cancel while a long poll waits leaves nothing leased", async () => {
    const { consumer, delivered } = start(2);
    await settle();
    await consumer.cancel();
    await send(2);
    assert.equal(delivered.length, 0);
    assert.equal((await broker.stats("q")).inFlight, 0);
  });

  test("paused, it delivers nothing; resumed, it delivers what it leased, in order, then more", async () => {
    const { consumer, delivered } = start(3);
    consumer.pause();
    await send(5);
    assert.equal(delivered.length, 0);
    assert.ok(consumer.unacked <= 3);
    consumer.resume();
    await settle();
    assert.equal(delivered.length, 3);
    assert.deepEqual(
      delivered.map((message) => message.body.toString()),
      ["0", "1", "2"],
    );
    await consumer.ack(delivered.map((message) => message.receipt));
    await settle();
    assert.equal(delivered.length, 5);
  });

  test("a delivery held past the ack timeout is lost: the message comes back and so does the credit", async () => {
    await send(2);
    const { consumer, delivered, warnings } = start(1, { ackTimeoutMs: 60_000 });
    await settle();
    assert.equal(delivered.length, 1);
    const first = delivered[0] as LeasedMessage;
    await clock.advance(59_999);
    assert.equal(delivered.length, 1, "nothing more while the delivery is held");
    await clock.advance(1);
    // The credit came back: the consumer took the next message (or the first one again).
    assert.equal(delivered.length, 2);
    assert.equal(consumer.unacked, 1);
    assert.ok(warnings.some((w) => w instanceof HopperError && w.code === "stale_receipt"));
    const [late] = await consumer.ack([first.receipt]);
    assert.ok(late && "error" in late && late.error.code === "stale_receipt");
    await clock.advance(60_000);
    const redelivered = delivered.find((message) => message.id === first.id && message.deliveryCount === 2);
    assert.ok(redelivered, "the timed-out message was delivered again");
  });

  test("deliveries leased together time out alone: those acked in time stay acked", async () => {
    await send(3);
    const { consumer, delivered, warnings } = start(3, { ackTimeoutMs: 60_000 });
    await settle();
    assert.equal(delivered.length, 3, "one receive leased the three");
    const [first, second, third] = delivered as [LeasedMessage, LeasedMessage, LeasedMessage];
    await clock.advance(30_000);
    await consumer.ack([first.receipt]);
    await clock.advance(30_000);
    const timedOut = () =>
      warnings.filter((w) => w instanceof HopperError && w.code === "stale_receipt").length;
    assert.equal(timedOut(), 2, "the two unacked deliveries timed out, the acked one did not");
    assert.equal(consumer.unacked, 2, "their credit came back and they were delivered again");
    const again = delivered.slice(3).map((message) => message.id);
    assert.deepEqual(again.sort(), [second.id, third.id].sort());
    // The second receive's deliveries, all acked in time, never time out.
    await consumer.ack(delivered.slice(3).map((message) => message.receipt));
    await clock.advance(120_000);
    assert.equal(timedOut(), 2);
    assert.equal((await broker.stats("q")).acked, 3);
  });

  test("a held delivery's short lease is renewed until the ack timeout, then handed back", async () => {
    await send(1);
    const { delivered } = start(1);
    await settle();
    assert.equal(delivered.length, 1);
    // Far past one lease (30 s), the delivery is still held: the consumer renews it.
    await clock.advance(10 * limits.pushLeaseMs);
    assert.equal((await broker.stats("q")).inFlight, 1);
    assert.equal(delivered.length, 1);
    await clock.advance(limits.consumerAckTimeoutMs - 10 * limits.pushLeaseMs);
    // Redelivered to the same consumer, whose credit came back with the handed-back lease.
    assert.equal(delivered.length, 2);
    assert.equal(delivered[1]?.deliveryCount, 2);
  });

  test("a delivery's lease on disk is short, so a server crash frees it within one lease", async () => {
    await send(1);
    const { delivered } = start(1);
    await settle();
    assert.equal(delivered.length, 1);
    await clock.advance(limits.pushLeaseMs * 2);
    // What the store holds is what survives a crash: a lease ending within one lease length from now.
    const [held] = await broker.peek("q", "in-flight", 10);
    assert.ok(held);
    assert.ok(held.visibleAt - clock.now() <= limits.pushLeaseMs, "the stored lease ends within one lease");
  });

  test("ack and nack answer per receipt in order; a receipt not held answers stale_receipt", async () => {
    await send(3);
    const { consumer, delivered } = start(3);
    await settle();
    const [a, b, c] = delivered.map((message) => message.receipt) as [string, string, string];
    const results = await consumer.nack(["nope", a, b, a], { delayMs: 0 });
    assert.deepEqual(
      results.map((r) => ("ok" in r ? "ok" : r.error.code)),
      ["stale_receipt", "ok", "ok", "ok"],
    );
    await settle();
    assert.equal(consumer.unacked, 3, "the two nacked came back to this consumer");
    assert.deepEqual(
      (await consumer.ack([c])).map((r) => "ok" in r),
      [true],
    );
  });

  test("an ack or nack gives the credit back once the store has applied it, before its answer", async () => {
    // Acks and nacks apply at once and answer when let go, as the log store's wait for their fdatasync.
    let letGo = () => {};
    const answering = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const { queueAck, queueNack } = store;
    store.queueAck = async (params: Parameters<Store["queueAck"]>[0]) => {
      const results = await queueAck.call(store, params);
      params.applied?.(results);
      await answering;
      return results;
    };
    store.queueNack = async (params: Parameters<Store["queueNack"]>[0]) => {
      const outcome = await queueNack.call(store, params);
      params.applied?.(outcome.results);
      await answering;
      return outcome;
    };
    await send(6);
    const { consumer, delivered } = start(2);
    await settle();
    assert.equal(delivered.length, 2);
    const [a, b] = delivered.map((message) => message.receipt) as [string, string];
    const acking = consumer.ack([a]);
    const nacking = consumer.nack([b], { delayMs: 60_000 });
    for (let turn = 0; turn < 10 && delivered.length < 4; turn++) await settle();
    assert.equal(delivered.length, 4, "two more delivered while the ack and the nack wait for their answers");
    assert.equal(consumer.unacked, 2);
    letGo();
    assert.deepEqual(await acking, [{ ok: true }]);
    assert.deepEqual(await nacking, [{ ok: true }]);
    assert.equal(consumer.unacked, 2, "the answers give nothing back twice");
  });

  test("a deleted queue ends the consumer, which then holds nothing", async () => {
    let ended: HopperError | undefined;
    const { consumer } = start(2, {
      onEnd: (error) => {
        ended = error;
      },
    });
    await settle();
    await broker.deleteQueue("q");
    await settle();
    assert.equal(ended?.code, "queue_not_found");
    assert.equal(consumer.unacked, 0);
  });

  /**
   * Holds the store's leases while `hold` is set, counting them: a look is then under way for as long
   * as the test wants.
   */
  function holdLeases(): { count: () => number; hold: (passing?: number) => void; release: () => void } {
    const lease = store.queueLease.bind(store);
    let leases = 0;
    let gate: { promise: Promise<void>; open: () => void; passing: number } | undefined;
    store.queueLease = async (params) => {
      leases++;
      if (gate && gate.passing-- <= 0) await gate.promise;
      return lease(params);
    };
    releaseLeases = () => {
      gate?.open();
      gate = undefined;
    };
    return {
      count: () => leases,
      /** Holds every lease from now on but the next `passing`. */
      hold: (passing = 0) => {
        let open = () => {};
        const promise = new Promise<void>((resolve) => {
          open = resolve;
        });
        gate = { promise, open, passing };
      },
      release: () => releaseLeases(),
    };
  }

  /**
   * With a consumer started on a queue holding one message delayed by 1 s: lets the consumer find the
   * queue drained, then holds its leases and lets the delayed message fall due, which starts a look.
   */
  async function holdLookAtDelayDue(leases: ReturnType<typeof holdLeases>): Promise<void> {
    await settle();
    await clock.advance(999);
    leases.hold();
    await clock.advance(1);
  }

  /** Sends one message visible now, with `text` as its body, and lets what follows settle. */
  async function sendText(text: string): Promise<void> {
    await broker.send("q", [{ body: Buffer.from(text), contentType: "text/plain" }]);
    await settle();
  }

  test("while its look is under way, credit beyond it takes a send's messages as they are written", async () => {
    const leases = holdLeases();
    await broker.send("q", [{ body: Buffer.from("delayed"), contentType: "text/plain", delayMs: 1_000 }]);
    const { delivered } = start(256);
    await holdLookAtDelayDue(leases);
    assert.equal(delivered.length, 0);
    const looksBefore = leases.count();
    await sendText("now");
    assert.deepEqual(
      delivered.map((message) => message.body.toString()),
      ["now"],
      "the send leased its message to the consumer while the look was held",
    );
    assert.equal(leases.count(), looksBefore, "and no look of the consumer's was needed for it");
    leases.release();
    await settle();
    await settle();
    assert.deepEqual(
      delivered.map((message) => message.body.toString()),
      ["now", "delayed"],
    );
    assert.equal(delivered[0]?.deliveryCount, 1);
  });

  test("credit takes no hand-off while the last look left messages behind: older ones go first", async () => {
    const leases = holdLeases();
    await send(100);
    await send(50);
    // The first look takes 100 of 150 (receiveMax), so the queue was not drained then; the next is held.
    leases.hold(1);
    const { delivered } = start(256);
    await settle();
    assert.equal(leases.count(), 2);
    assert.equal(delivered.length, 100);
    await sendText("late");
    assert.equal(delivered.length, 100, "the late message waits for the look, behind the older 50");
    leases.release();
    await settle();
    assert.equal(delivered.length, 151);
    assert.equal(delivered.at(-1)?.body.toString(), "late", "the look took the older messages first");
  });

  test("credit under hand-offs, held and the receive under way never exceed the prefetch", async () => {
    const leases = holdLeases();
    await broker.send("q", [{ body: Buffer.from("delayed"), contentType: "text/plain", delayMs: 1_000 }]);
    const { consumer, delivered } = start(130);
    await holdLookAtDelayDue(leases);
    // The held look asks for 100 of the 130, so a send may hand off only 30 of its 50.
    await send(50);
    assert.equal(delivered.length, 30);
    assert.equal(consumer.unacked, 30);
    leases.release();
    await settle();
    await settle();
    assert.equal(consumer.unacked, 51, "the look took the delayed message and the 20 left");
    assert.equal(delivered.length, 51);
  });

  test("a consumer cancelled while a send hands off to it waits for the send, then gives its leases back", async () => {
    const leases = holdLeases();
    await broker.send("q", [{ body: Buffer.from("delayed"), contentType: "text/plain", delayMs: 1_000 }]);
    const { consumer, delivered } = start(256);
    await holdLookAtDelayDue(leases);
    // The send claims the consumer's credit, and its write is held until the consumer has stopped.
    const sendMany = store.queueSendMany.bind(store);
    let writeSend = () => {};
    const sendHeld = new Promise<void>((resolve) => {
      writeSend = resolve;
    });
    store.queueSendMany = async (params) => {
      await sendHeld;
      return sendMany(params);
    };
    const sending = broker.send("q", [{ body: Buffer.from("now"), contentType: "text/plain" }]);
    await settle();
    let cancelled = false;
    const cancelling = consumer.cancel().then(() => {
      cancelled = true;
    });
    leases.release();
    for (let turn = 0; turn < 5; turn++) await settle();
    assert.equal(cancelled, false, "cancel waits for the send that hands off to the consumer");
    writeSend();
    await Promise.all([sending, cancelling]);
    assert.equal(delivered.length, 0, "a cancelled consumer delivers nothing");
    const again = await broker.receive("q", { max: 10, waitMs: 0 });
    assert.deepEqual(again.map((message) => message.body.toString()).sort(), ["delayed", "now"]);
    assert.equal(again.find((message) => message.body.toString() === "now")?.deliveryCount, 2);
  });

  test("prefetch outside 1 to prefetchMax is refused", () => {
    for (const prefetch of [0, limits.prefetchMax + 1, 1.5]) {
      assert.throws(
        () => new PushConsumer({ broker, clock, queue: "q", prefetch, deliver: () => {} }),
        (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
      );
    }
  });
});
