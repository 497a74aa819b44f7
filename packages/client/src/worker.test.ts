import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { FakeClock, settle } from "./testing/fake-clock.js";
import { FakeQueueServer, json } from "./testing/fake-server.js";
import type { ReceivedMessage } from "./types.js";
import type { MessageHandler, WorkerOptions } from "./worker.js";

function deferred() {
  let resolve = () => {};
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

function setup(fetchOverride?: (server: FakeQueueServer) => typeof fetch) {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  const client = new HopperClient({ fetch: fetchOverride?.(server) ?? server.fetch, clock });
  const errors: unknown[] = [];
  const start = (handler: MessageHandler, options: WorkerOptions = {}) =>
    client.worker("q", handler, { onError: (error) => errors.push(error), ...options });
  return { clock, server, client, errors, start };
}

function receiveMaxes(server: FakeQueueServer): unknown[] {
  return server.requestsTo("/receive").map((request) => (request.body as { max: number }).max);
}

function receiptsSentTo(server: FakeQueueServer, suffix: string): string[] {
  return server.requestsTo(suffix).flatMap((request) => (request.body as { receipts: string[] }).receipts);
}

function codes(errors: unknown[]): string[] {
  return errors.map((error) => (error instanceof HopperError ? error.code : String(error)));
}

test("never runs more than `concurrency` handlers and receives only as many as free slots", async () => {
  const { server, errors, start } = setup();
  server.seed("q", 10);
  let running = 0;
  let mostRunning = 0;
  const gates: ReturnType<typeof deferred>[] = [];
  const worker = start(
    async () => {
      running += 1;
      mostRunning = Math.max(mostRunning, running);
      const gate = deferred();
      gates.push(gate);
      await gate.promise;
      running -= 1;
    },
    { concurrency: 3 },
  );

  await settle();
  assert.equal(running, 3);
  for (let released = 0; released < 10; released++) {
    gates[released]?.resolve();
    await settle();
  }

  assert.equal(mostRunning, 3);
  assert.equal(server.acked.length, 10);
  // Three at first, then one per finished handler; the ninth call waits on an empty queue.
  assert.deepEqual(receiveMaxes(server), [3, 1, 1, 1, 1, 1, 1, 1, 1]);
  await worker.stop();
  assert.deepEqual(errors, []);
});

test("extends the lease every heartbeat while a slow handler runs, then acks", async () => {
  const { clock, server, errors, start } = setup();
  server.seed("q", 1);
  const gate = deferred();
  const worker = start(() => gate.promise, { visibilityTimeoutMs: 30_000 });
  await settle();

  await clock.advance(9_999);
  assert.equal(server.requestsTo("/extend").length, 0);
  await clock.advance(1);
  const extends1 = server.requestsTo("/extend");
  assert.equal(extends1.length, 1);
  assert.deepEqual(extends1[0]?.body, { receipts: ["m1.1"], visibilityTimeoutMs: 30_000 });

  // At 30 s the first lease would have ended; the heartbeats kept it, so the ack is accepted.
  await clock.advance(20_000);
  assert.equal(server.requestsTo("/extend").length, 3);
  gate.resolve();
  await settle();
  assert.deepEqual(server.acked, ["m1"]);

  await clock.advance(60_000);
  assert.equal(server.requestsTo("/extend").length, 3);
  await worker.stop();
  assert.deepEqual(errors, []);
});

test("without a lease length, reads the queue's (30 s here), asks for it and heartbeats every third", async () => {
  const { clock, server, start } = setup();
  server.seed("q", 1);
  const gate = deferred();
  const worker = start(() => gate.promise);
  await clock.advance(10_000);

  assert.deepEqual(
    server.requestsTo("/extend").map((request) => request.body),
    [{ receipts: ["m1.1"], visibilityTimeoutMs: 30_000 }],
  );
  // The worker asks for the queue's lease length and long-polls for the longest the server allows.
  assert.deepEqual(server.requestsTo("/receive")[0]?.body, {
    max: 1,
    waitMs: 20_000,
    visibilityTimeoutMs: 30_000,
  });
  gate.resolve();
  await worker.stop();
});

test("a queue with a short lease gets heartbeats inside it, not the 10 s default", async () => {
  const { clock, server, start } = setup();
  server.visibilityTimeoutMs = 3_000;
  server.seed("q", 1);
  const gate = deferred();
  const worker = start(() => gate.promise);
  await clock.advance(2_000);
  assert.deepEqual(
    server.requestsTo("/extend").map((request) => request.body),
    [
      { receipts: ["m1.1"], visibilityTimeoutMs: 3_000 },
      { receipts: ["m1.1"], visibilityTimeoutMs: 3_000 },
    ],
  );
  gate.resolve();
  await worker.stop();
});

test("a lost lease fires the handler's signal with stale_receipt, and the message is not acked", async () => {
  const { clock, server, errors, start } = setup();
  server.seed("q", 1);
  const gate = deferred();
  let signal: AbortSignal | undefined;
  const worker = start(
    async (_message, context) => {
      signal = context.signal;
      await gate.promise;
    },
    { visibilityTimeoutMs: 30_000 },
  );
  await settle();
  server.revokeLease("m1");

  await clock.advance(10_000);
  assert.equal(signal?.aborted, true);
  assert.ok(signal?.reason instanceof HopperError);
  assert.equal(signal.reason.code, "stale_receipt");

  gate.resolve();
  await settle();
  await clock.advance(30_000);
  await worker.stop();
  // The message came back and its second delivery was acked; the lost first lease was left alone.
  assert.deepEqual(receiptsSentTo(server, "/ack"), ["m1.2"]);
  assert.deepEqual(receiptsSentTo(server, "/nack"), []);
  assert.deepEqual(receiptsSentTo(server, "/extend"), ["m1.1"]);
  assert.deepEqual(codes(errors), ["stale_receipt"]);
});

test("a handler that throws gets its message nacked without a delay, and the error reported", async () => {
  const { server, errors, start } = setup();
  server.seed("q", 1);
  let seen: ReceivedMessage | undefined;
  const failure = new Error("smtp down");
  const reported: [unknown, ReceivedMessage | undefined][] = [];
  const worker = start(
    (message) => {
      if (message.deliveryCount > 1) return;
      seen = message;
      throw failure;
    },
    { onError: (error, message) => reported.push([error, message]) },
  );
  await settle();
  await worker.stop();

  assert.deepEqual(
    server.requestsTo("/nack").map((request) => request.body),
    [{ receipts: ["m1.1"] }],
  );
  assert.deepEqual(server.nacked, ["m1"]);
  assert.deepEqual(receiptsSentTo(server, "/ack"), ["m1.2"]);
  assert.deepEqual(reported, [[failure, seen]]);
  assert.deepEqual(errors, []);
});

test("stop() aborts the long poll, waits for running handlers, acks them, and is idempotent", async () => {
  const { server, errors, start } = setup();
  server.seed("q", 1);
  const gate = deferred();
  const worker = start(() => gate.promise, { concurrency: 2 });
  await settle();
  assert.equal(server.parkedReceiveCount, 1);

  let stopped = false;
  const stopping = worker.stop().then(() => {
    stopped = true;
  });
  await settle();
  assert.equal(server.parkedReceiveCount, 0);
  assert.equal(stopped, false);
  assert.equal(worker.stop(), worker.stop());

  server.seed("q", 1);
  gate.resolve();
  await stopping;
  await worker.done;
  assert.deepEqual(server.acked, ["m1"]);
  assert.equal(server.requestsTo("/receive").length, 2);
  assert.deepEqual(errors, []);
});

test("failed receives back off exponentially on the clock, capped at 30 s, without busy looping", async () => {
  const { clock, errors, start } = setup(
    () => async () => json(503, { error: { code: "unavailable", message: "x" } }),
  );
  const times: number[] = [];
  const startMs = clock.now();
  const worker = start(() => {}, {
    onError: (error) => {
      times.push(clock.now() - startMs);
      errors.push(error);
    },
  });

  await clock.advance(150_000);
  // The first error is the failed read of the queue's lease length; the receives' back-off follows.
  const receiveTimes = times.slice(1);
  const gaps = receiveTimes.slice(1).map((time, index) => time - (receiveTimes[index] ?? 0));
  assert.deepEqual(gaps, [250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  assert.ok(codes(errors).every((code) => code === "unavailable"));
  await worker.stop();
});

test("empty answers to short polls are paced, not repeated at once", async () => {
  const { clock, server, start } = setup();
  const worker = start(() => {}, { waitMs: 0 });
  await clock.advance(5_000);
  assert.equal(server.requestsTo("/receive").length, 6);
  await worker.stop();
});

test("messages beyond the free slots, or received while stopping, are released at once", async () => {
  let stopDuringReceive: (() => void) | undefined;
  const { server, start } = setup((server) => async (input, init) => {
    const answer = await server.fetch(input, init);
    if (String(input).endsWith("/receive")) stopDuringReceive?.();
    return answer;
  });
  server.seed("q", 3);
  server.extraMessagesPerReceive = 1;
  const handled: string[] = [];
  const gate = deferred();
  const worker = start(
    async (message) => {
      handled.push(message.id);
      await gate.promise;
    },
    { concurrency: 1 },
  );
  await settle();
  assert.deepEqual(handled, ["m1"]);
  assert.deepEqual(
    server.requestsTo("/nack").map((request) => request.body),
    [{ receipts: ["m2.1"], delayMs: 0 }],
  );

  gate.resolve();
  stopDuringReceive = () => void worker.stop();
  await worker.done;
  // After m1's ack freed the slot, the next receive answered while stop() was under way.
  assert.deepEqual(handled, ["m1"]);
  assert.deepEqual(server.acked, ["m1"]);
  assert.deepEqual(server.nacked, ["m2", "m2", "m3"]);
});

test("an ack refused as stale is reported and the worker goes on", async () => {
  const { server, errors, start } = setup();
  server.seed("q", 2);
  const worker = start((message) => {
    if (message.id === "m1" && message.deliveryCount === 1) server.revokeLease("m1");
  });
  await settle();
  await worker.stop();

  assert.deepEqual(receiptsSentTo(server, "/ack"), ["m1.1", "m1.2", "m2.1"]);
  assert.deepEqual(server.acked, ["m1", "m2"]);
  assert.deepEqual(codes(errors), ["stale_receipt"]);
});

test("options out of range are refused when the worker is created", () => {
  const { client } = setup();
  const handler = () => {};
  assert.throws(() => client.worker("q", handler, { concurrency: 0 }), RangeError);
  assert.throws(() => client.worker("q", handler, { concurrency: 1001 }), RangeError);
  assert.throws(() => client.worker("q", handler, { waitMs: 20_001 }), RangeError);
  assert.throws(
    () => client.worker("q", handler, { visibilityTimeoutMs: 5000, heartbeatMs: 5000 }),
    RangeError,
  );
  assert.throws(() => client.worker("q", handler, { heartbeatMs: 30_000 }), RangeError);
});
