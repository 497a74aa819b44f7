/**
 * The client against a real `hopper serve`: FIFO groups, deduplication, a full queue, at-most-once
 * receives, redrive tasks, and rejecting a message for good (`nack` with `deadLetter`, a handler's
 * UnrecoverableError in a pull worker and a push consumer). What the client answers is checked against what the server then holds,
 * so a method cannot pass by parsing an answer the server never gives.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient } from "./client.js";
import { HopperError, UnrecoverableError } from "./errors.js";
import { startTestServer, type TestServer } from "./testing/server-process.js";
import { deadLetterHeaders, isItemError, type QueueStats, type Task } from "./types.js";
import { createWorker } from "./worker.js";

/** How often a test polls a task; the server takes a redrive step about every 100 ms at a rate. */
const pollMs = 20;
/** A redrive of a hundred messages at 100 a second ends in about a second; ten is a hang. */
const taskWaitMsMax = 10_000;
/** A worker settles a message within milliseconds; ten seconds means it never will. */
const settleWaitMsMax = 10_000;

async function rejection(promise: Promise<unknown>): Promise<HopperError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof HopperError, `expected a HopperError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

describe("the client against a real server", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let server: TestServer;
  let client: HopperClient;

  before(async () => {
    server = await startTestServer();
    client = new HopperClient({ url: server.url });
  });

  after(async () => {
    await server?.stop();
  });

  /** Polls the task until `until` holds for it, and answers every distinct state seen on the way. */
  async function follow(id: string, until: (task: Task) => boolean): Promise<Task[]> {
    const seen: Task[] = [];
    const deadline = Date.now() + taskWaitMsMax;
    for (;;) {
      const task = await client.getTask(id);
      if (seen.at(-1)?.moved !== task.moved || seen.at(-1)?.state !== task.state) seen.push(task);
      if (until(task)) return seen;
      if (Date.now() > deadline) assert.fail(`task ${id} still ${task.state} at ${task.moved}`);
      await delay(pollMs);
    }
  }

  /** Puts `count` messages of `queue` (keys k0..k4 in turn) into `dlq` by nacking their one delivery. */
  async function deadLetters(queue: string, dlq: string, count: number): Promise<void> {
    await client.putQueue(dlq);
    await client.putQueue(queue, { deadLetter: { queue: dlq, maxDeliveries: 1 } });
    const messages = Array.from({ length: count }, (_, n) => ({ body: { n }, key: `k${n % 5}` }));
    await client.send(queue, messages);
    const received = await client.receive(queue, { max: 100 });
    await client.nack(
      queue,
      received.map((message) => message.receipt),
    );
    assert.equal((await client.getQueue(dlq)).stats.available, count);
  }

  test("a FIFO queue hands out each key's messages one at a time, in publish order", async () => {
    await client.putQueue("fifo-orders", { kind: "fifo" });
    const keys = ["a", "b", "c"];
    // Interleaved publishes in one turn: one coalesced batch, in call order.
    const published = await Promise.all(
      Array.from({ length: 12 }, (_, n) =>
        client.publish("fifo-orders", { body: { n }, key: keys[n % 3] as string }),
      ),
    );
    assert.ok(published.every((result) => !result.duplicate));

    const delivered = new Map<string, number[]>();
    for (let round = 0; round < 10; round++) {
      // Two consumers in turn: the second must not get a key the first holds.
      const first = await client.receive("fifo-orders", { max: 10 });
      const second = await client.receive("fifo-orders", { max: 10 });
      const inFlight = [...first, ...second];
      if (inFlight.length === 0) break;
      const inFlightKeys = inFlight.map((message) => message.key);
      assert.equal(new Set(inFlightKeys).size, inFlightKeys.length, `one in flight per key: ${inFlightKeys}`);
      for (const message of inFlight) {
        const key = message.key as string;
        delivered.set(key, [...(delivered.get(key) ?? []), (message.body as { n: number }).n]);
      }
      await client.ack(
        "fifo-orders",
        inFlight.map((message) => message.receipt),
      );
    }
    assert.deepEqual(Object.fromEntries(delivered), {
      a: [0, 3, 6, 9],
      b: [1, 4, 7, 10],
      c: [2, 5, 8, 11],
    });
  });

  test("a second publish with the same dedupId is answered duplicate, with the first one's id", async () => {
    const { queue } = await client.putQueue("dedup-fifo", { kind: "fifo" });
    assert.equal(queue.attributes.dedupWindowMs, 300_000, "FIFO queues deduplicate by default");
    const charge = (n: number) => ({ body: `charge ${n}`, key: "acct-1", dedupId: `charge-${n}` });
    const first = await client.publish("dedup-fifo", charge(7));
    const again = await client.publish("dedup-fifo", charge(7));
    const other = await client.publish("dedup-fifo", charge(8));
    assert.deepEqual(first, { id: first.id, duplicate: false });
    assert.deepEqual(again, { id: first.id, duplicate: true });
    assert.equal(other.duplicate, false);
    assert.notEqual(other.id, first.id);
    const peeked = await client.peek("dedup-fifo");
    assert.deepEqual(
      peeked.map((message) => [message.id, message.dedupId, message.priority]),
      [
        [first.id, "charge-7", 0],
        [other.id, "charge-8", 0],
      ],
    );

    await client.putQueue("dedup-content", { dedupWindowMs: 60_000, contentBasedDedup: true });
    const [a, b] = await client.send("dedup-content", [{ body: { x: 1 } }, { body: { x: 1 } }]);
    assert.ok(a && b && !("error" in a) && !("error" in b));
    assert.deepEqual([b.id, b.duplicate], [a.id, true]);
    const info = await client.getQueue("dedup-content");
    assert.equal(info.attributes.contentBasedDedup, true);
    assert.equal(info.stats.available, 1);

    await client.putExchange("dedup-events", { type: "fanout" });
    await client.bind("dedup-events", { queue: "dedup-content", pattern: "#" });
    const published = await client.publishTo("dedup-events", [
      { routingKey: "x", body: "event", dedupId: "event-1" },
      { routingKey: "x", body: "event again", dedupId: "event-1" },
    ]);
    const [firstPublish] = published;
    assert.ok(firstPublish && !("error" in firstPublish));
    assert.deepEqual(published, [
      { id: firstPublish.id, routed: 1, duplicate: false },
      { id: firstPublish.id, routed: 0, duplicate: true },
    ]);
  });

  test("priorities: a standard queue leases higher first; a FIFO queue refuses the item only", async () => {
    await client.putQueue("prioritized");
    await client.send("prioritized", [
      { body: "low" },
      { body: "high", priority: 9 },
      { body: "mid", priority: 4 },
    ]);
    const received = await client.receive("prioritized", { max: 3 });
    assert.deepEqual(
      received.map((message) => message.body),
      ["high", "mid", "low"],
    );

    await client.putQueue("fifo-no-priority", { kind: "fifo" });
    const outcomes = await Promise.allSettled([
      client.publish("fifo-no-priority", { body: 1, key: "k", priority: 5 }),
      client.publish("fifo-no-priority", { body: 2, key: "k" }),
    ]);
    assert.equal(outcomes[0]?.status, "rejected");
    assert.equal(outcomes[1]?.status, "fulfilled");
    const refused = outcomes[0]?.status === "rejected" ? outcomes[0].reason : undefined;
    assert.ok(refused instanceof HopperError);
    assert.equal(refused.code, "invalid_request");
  });

  test("a send into a full reject queue throws queue_full with status 429 and stores nothing", async () => {
    const { queue } = await client.putQueue("bounded", { maxDepth: 2, overflow: "reject" });
    assert.deepEqual([queue.attributes.maxDepth, queue.attributes.overflow], [2, "reject"]);
    await client.send("bounded", [{ body: 1 }, { body: 2 }]);

    const error = await rejection(client.send("bounded", [{ body: 3 }]));
    assert.equal(error.code, "queue_full");
    assert.equal(error.status, 429);

    // A coalesced batch fails as a whole: every caller in it is rejected with the same error.
    const outcomes = await Promise.allSettled([
      client.publish("bounded", { body: 4 }),
      client.publish("bounded", { body: 5 }),
    ]);
    for (const outcome of outcomes) {
      assert.ok(outcome.status === "rejected" && outcome.reason instanceof HopperError);
      assert.deepEqual([outcome.reason.code, outcome.reason.status], ["queue_full", 429]);
    }
    const { stats } = await client.getQueue("bounded");
    assert.deepEqual([stats.available, stats.published], [2, 2]);

    await client.putQueue("bounded", { overflow: "drop-oldest" });
    await client.send("bounded", [{ body: 3 }]);
    const after = await client.getQueue("bounded");
    assert.deepEqual([after.stats.available, after.stats.dropped], [2, 1]);
    assert.deepEqual(
      (await client.peek("bounded")).map((message) => message.body),
      [2, 3],
    );
  });

  test("maxDepth: null removes the bound", async () => {
    await client.putQueue("unbounded", { maxDepth: 1 });
    const { queue } = await client.putQueue("unbounded", { maxDepth: null });
    assert.equal(queue.attributes.maxDepth, null);
    await client.send("unbounded", [{ body: 1 }, { body: 2 }]);
    assert.equal((await client.getQueue("unbounded")).stats.available, 2);
  });

  test("an autoAck receive deletes the messages as it hands them out", async () => {
    await client.putQueue("at-most-once", { visibilityTimeoutMs: 100 });
    await client.send("at-most-once", [{ body: "once" }]);
    const [message] = await client.receive("at-most-once", { autoAck: true });
    assert.equal(message?.body, "once");
    await delay(300);
    assert.deepEqual(await client.receive("at-most-once"), [], "it never comes back, lease or not");
    const { stats } = await client.getQueue("at-most-once");
    assert.deepEqual([stats.available, stats.inFlight, stats.delivered, stats.acked], [0, 0, 1, 1]);
  });

  test("dead-lettered messages say why and where from; a redrive moves them back with progress", async () => {
    await deadLetters("orders", "orders-dlq", 100);
    const [dead] = await client.peek("orders-dlq", { limit: 1 });
    assert.equal(dead?.headers[deadLetterHeaders.reason], "max_deliveries");
    assert.equal(dead?.headers[deadLetterHeaders.originalQueue], "orders");
    assert.equal(dead?.headers[deadLetterHeaders.deliveryCount], "1");
    assert.ok(dead?.headers[deadLetterHeaders.originalPublishedAt]);

    const started = await client.redrive("orders-dlq", { ratePerSecond: 100 });
    assert.equal(started.kind, "redrive");
    assert.equal(started.state, "running");
    assert.deepEqual([started.queue, started.to, started.ratePerSecond], ["orders-dlq", null, 100]);
    assert.equal(started.total, 100);
    const running = await rejection(client.redrive("orders-dlq"));
    assert.deepEqual([running.code, running.status], ["redrive_running", 409]);

    const seen = await follow(started.id, (task) => task.state !== "running");
    const finished = seen.at(-1) as Task;
    assert.equal(finished.state, "done");
    assert.equal(finished.moved, 100);
    assert.ok(finished.finishedAt !== null && finished.error === undefined);
    assert.ok(
      seen.some((task) => task.state === "running" && task.moved > 0 && task.moved < 100),
      `progress was visible on the way: ${seen.map((task) => task.moved)}`,
    );
    assert.ok((await client.listTasks()).some((task) => task.id === started.id));

    const [dlq, orders] = await Promise.all([client.getQueue("orders-dlq"), client.getQueue("orders")]);
    assert.deepEqual([dlq.stats.available, dlq.stats.redriven, orders.stats.available], [0, 100, 100]);
  });

  test("cancelTask stops a redrive midway; what it moved stays moved, nothing twice", async () => {
    await deadLetters("slow", "slow-dlq", 100);
    const started = await client.redrive("slow-dlq", { to: "slow", ratePerSecond: 20 });
    await follow(started.id, (task) => task.moved > 0);
    const cancelled = await client.cancelTask(started.id);
    assert.equal(cancelled.state, "cancelled");
    assert.ok(cancelled.finishedAt !== null);
    await delay(300);
    const later = await client.getTask(started.id);
    assert.equal(later.state, "cancelled");
    assert.ok(later.moved > 0 && later.moved < 100, `moved ${later.moved}`);
    const [dlq, slow] = await Promise.all([client.getQueue("slow-dlq"), client.getQueue("slow")]);
    assert.equal(slow.stats.available, later.moved, "what the task says it moved is what arrived");
    assert.equal(dlq.stats.available + slow.stats.available, 100, "nothing lost or doubled");
    assert.deepEqual(await client.cancelTask(started.id), later, "a cancel after the end changes nothing");
  });

  test("a redrive whose target is gone fails with the reason; unknown tasks are task_not_found", async () => {
    await client.putQueue("orphans");
    await client.send("orphans", [{ body: 1, headers: { [deadLetterHeaders.originalQueue]: "deleted" } }]);
    const started = await client.redrive("orphans");
    const failed = (await follow(started.id, (task) => task.state !== "running")).at(-1) as Task;
    assert.equal(failed.state, "failed");
    assert.equal(failed.error?.code, "queue_not_found");
    assert.equal(failed.moved, 0);

    const missing = await rejection(client.getTask("no-such-task"));
    assert.deepEqual([missing.code, missing.status], ["task_not_found", 404]);
    const cancelMissing = await rejection(client.cancelTask("no-such-task"));
    assert.equal(cancelMissing.code, "task_not_found");
    const noQueue = await rejection(client.redrive("no-such-queue"));
    assert.deepEqual([noQueue.code, noQueue.status], ["queue_not_found", 404]);
  });

  /** Polls the queue's stats until `until` holds for them, and answers them. */
  async function statsWhen(queue: string, until: (stats: QueueStats) => boolean): Promise<QueueStats> {
    const deadline = Date.now() + settleWaitMsMax;
    for (;;) {
      const { stats } = await client.getQueue(queue);
      if (until(stats)) return stats;
      if (Date.now() > deadline) assert.fail(`${queue} never got there: ${JSON.stringify(stats)}`);
      await delay(20);
    }
  }

  test("nack with deadLetter moves the messages now, with the reason; without a target the lease stays", async () => {
    await client.putQueue("tokens.dlq");
    await client.putQueue("tokens", { deadLetter: { queue: "tokens.dlq", maxDeliveries: 10 } });
    await client.putQueue("no-target");
    await client.send("tokens", [{ body: "revoked" }]);
    await client.send("no-target", [{ body: "kept" }]);
    const [revoked] = await client.receive("tokens");
    const [kept] = await client.receive("no-target");
    assert.ok(revoked && kept);
    const options = { deadLetter: true, reason: "token_revoked" };
    assert.deepEqual(await client.nack("tokens", [revoked.receipt], options), [{ ok: true }]);
    const [dead] = await client.peek("tokens.dlq");
    assert.equal(dead?.body, "revoked");
    assert.equal(dead?.headers[deadLetterHeaders.reason], "token_revoked");
    assert.equal(dead?.headers[deadLetterHeaders.originalQueue], "tokens");
    const [refused] = await client.nack("no-target", [kept.receipt], options);
    assert.ok(refused && isItemError(refused));
    assert.equal(refused.error.code, "no_dead_letter_target");
    assert.equal((await client.getQueue("no-target")).stats.inFlight, 1);
    assert.deepEqual(await client.ack("no-target", [kept.receipt]), [{ ok: true }]);
    await assert.rejects(
      client.nack("tokens", ["1.1"], { deadLetter: true, delayMs: 0 }),
      (error: unknown) => error instanceof HopperError && error.code === "invalid_request",
    );
  });

  for (const mode of ["pull", "push"] as const) {
    test(`a ${mode} worker dead-letters a message whose handler throws UnrecoverableError, on its first delivery`, async () => {
      const queue = `push-${mode}`;
      await client.putQueue(`${queue}.dlq`);
      await client.putQueue(queue, {
        deadLetter: { queue: `${queue}.dlq`, maxDeliveries: 10 },
        retry: { initialDelayMs: 0, multiplier: 1, maxDelayMs: 0, jitter: "none" },
      });
      await client.send(queue, [
        { body: { token: "revoked" } },
        { body: { token: "flaky" } },
        { body: { token: "good" } },
      ]);
      const errors: unknown[] = [];
      const flakyTries: number[] = [];
      const worker = createWorker(
        client,
        queue,
        (message) => {
          const { token } = message.body as { token: string };
          if (token === "revoked") {
            throw new UnrecoverableError("the vendor revoked the token", { reason: "token_revoked" });
          }
          if (token === "flaky" && message.deliveryCount === 1) {
            flakyTries.push(message.deliveryCount);
            throw new Error("vendor timeout");
          }
        },
        { mode, concurrency: 3, onError: (error) => errors.push(error) },
      );
      const stats = await statsWhen(queue, (s) => s.acked === 2 && s.deadLettered === 1);
      await worker.stop();
      assert.deepEqual([stats.nacked, stats.available, stats.inFlight, stats.delayed], [2, 0, 0, 0]);
      const dead = await client.peek(`${queue}.dlq`);
      assert.deepEqual(
        dead.map((m) => [
          m.body,
          m.headers[deadLetterHeaders.reason],
          m.headers[deadLetterHeaders.deliveryCount],
        ]),
        [[{ token: "revoked" }, "token_revoked", "1"]],
      );
      assert.deepEqual(flakyTries, [1], "an ordinary throw is retried");
      assert.ok(errors.some((error) => error instanceof UnrecoverableError));
    });
  }

  test("an UnrecoverableError in a queue with no dead-letter target is reported, and its lease runs on", async () => {
    await client.putQueue("plain-worker");
    await client.send("plain-worker", [{ body: 1 }]);
    const errors: unknown[] = [];
    let refusal: (error: HopperError) => void = () => {};
    const refused = new Promise<HopperError>((resolve) => {
      refusal = resolve;
    });
    const worker = createWorker(
      client,
      "plain-worker",
      () => {
        throw new UnrecoverableError();
      },
      {
        onError: (error) => {
          errors.push(error);
          if (error instanceof HopperError) refusal(error);
        },
      },
    );
    assert.equal((await refused).code, "no_dead_letter_target");
    await worker.stop();
    const { stats } = await client.getQueue("plain-worker");
    assert.deepEqual([stats.inFlight, stats.nacked, stats.deadLettered], [1, 0, 0]);
    assert.ok(errors[0] instanceof UnrecoverableError);
  });

  test("UnrecoverableError refuses a reason the server would not take", () => {
    assert.throws(() => new UnrecoverableError("x", { reason: "" }), RangeError);
    assert.throws(() => new UnrecoverableError("x", { reason: "r".repeat(129) }), RangeError);
    const error = new UnrecoverableError("gone", { reason: "r".repeat(128) });
    assert.deepEqual([error.name, error.message, error.reason?.length], ["UnrecoverableError", "gone", 128]);
  });
});
