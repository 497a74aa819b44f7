// The consumer's connection handling against a stand-in WebSocket server on a fake clock: capped
// exponential back-off between refused attempts, the server's error reported, and stop() during a pause.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { WebSocketServer } from "ws";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { FakeClock } from "./testing/fake-clock.js";

/** A server that refuses every upgrade with 401 and Hopper's error body, counting the attempts. */
async function refusingServer(): Promise<{
  url: string;
  attempts: () => number;
  close: () => Promise<void>;
}> {
  let attempts = 0;
  const server = new WebSocketServer({
    port: 0,
    host: "127.0.0.1",
    verifyClient: (_info, callback) => {
      attempts++;
      callback(false, 401, "Unauthorized", { "content-type": "application/json" });
    },
  });
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    attempts: () => attempts,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Waits in real time for a network event the fake clock cannot bring about. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`waited 5 s for ${what}`);
    await delay(5);
  }
}

test("refused connections are retried after 250 ms, 500 ms, 1 s, … on the client's clock", async () => {
  const server = await refusingServer();
  const clock = new FakeClock();
  const errors: unknown[] = [];
  const client = new HopperClient({ url: server.url, clock, apiKey: "bad" });
  const consumer = client.consume("q", () => {}, { onError: (error) => errors.push(error) });
  try {
    await until(() => server.attempts() === 1, "the first attempt");
    for (const [step, pauseMs] of [250, 500, 1_000, 2_000].entries()) {
      await until(() => errors.length === step + 1, `the refusal of attempt ${step + 1}`);
      await clock.advance(pauseMs - 1);
      await delay(30);
      assert.equal(server.attempts(), step + 1, `no attempt before ${pauseMs} ms`);
      await clock.advance(1);
      await until(() => server.attempts() === step + 2, `attempt ${step + 2}`);
    }
    const first = errors[0];
    assert.ok(first instanceof HopperError, String(first));
    assert.equal(first.status, 401);
  } finally {
    await consumer.stop();
    await server.close();
  }
  const attemptsAtStop = server.attempts();
  await clock.advance(60_000);
  assert.equal(server.attempts(), attemptsAtStop, "no attempt after stop()");
});

test("prefetch outside 1–1000 is refused at once", () => {
  const client = new HopperClient({ url: "http://127.0.0.1:1" });
  for (const prefetch of [0, 1001, 2.5]) {
    assert.throws(() => client.consume("q", () => {}, { prefetch }), RangeError);
  }
});

/**
 * A stand-in server that consumes as Hopper does: it answers `consume` and delivers `first`. A server
 * with `drain` delivers `second` just before its `draining` answer, as one leased before the drain; a
 * server without it refuses the frame, and delivers `second` once `first` is acked (its credit).
 */
async function drainingServer(
  drains: boolean,
): Promise<{ url: string; ops: string[]; acked: string[]; close: () => Promise<void> }> {
  const ops: string[] = [];
  const acked: string[] = [];
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  const message = (receipt: string) => ({
    id: receipt,
    receipt,
    body: receipt,
    contentType: "application/json",
    headers: {},
    key: null,
    deliveryCount: 1,
    publishedAt: "2026-01-01T00:00:00.000Z",
    firstDeliveredAt: "2026-01-01T00:00:00.000Z",
  });
  server.on("connection", (socket) => {
    const deliver = (receipt: string) =>
      socket.send(JSON.stringify({ op: "deliver", sub: "1", messages: [message(receipt)] }));
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as { op: string; ref: number; receipts?: string[] };
      ops.push(frame.op);
      const answer = (body: object) => socket.send(JSON.stringify({ ...body, ref: frame.ref }));
      if (frame.op === "consume") {
        answer({ op: "consuming", sub: "1" });
        deliver("first");
      } else if (frame.op === "ack") {
        acked.push(...(frame.receipts ?? []));
        answer({ op: "acked", results: frame.receipts?.map(() => ({ ok: true })) });
        if (!drains && frame.receipts?.includes("first")) deliver("second");
      } else if (frame.op === "drain") {
        if (drains) {
          deliver("second");
          answer({ op: "draining", sub: "1" });
        } else answer({ op: "error", error: { code: "invalid_request", message: 'Unknown op "drain"' } });
      }
    });
  });
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    ops,
    acked,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

for (const drains of [true, false]) {
  test(`stop() sends drain first; a delivery that comes while stopping runs only if the server drained (${drains ? "it did" : "it refused"})`, async () => {
    const server = await drainingServer(drains);
    const client = new HopperClient({ url: server.url });
    const handled: unknown[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const consumer = client.consume(
      "q",
      async (message) => {
        handled.push(message.body);
        if (message.body === "first") await released;
      },
      { onError: () => {} },
    );
    try {
      await until(() => handled.length === 1, "the first delivery");
      const stopping = consumer.stop();
      await until(() => server.ops.includes("drain"), "the drain frame");
      release();
      await stopping;
      assert.deepEqual(server.ops.slice(0, 2), ["consume", "drain"], "drain goes before any ack");
      // What a draining server sent before its answer was leased already: it is run and acked. Without
      // drain, a delivery that comes while stopping is held unrun, and the close hands it back.
      const expected = drains ? ["first", "second"] : ["first"];
      assert.deepEqual(handled, expected);
      assert.deepEqual(server.acked.sort(), expected);
    } finally {
      await consumer.stop();
      await server.close();
    }
  });
}
