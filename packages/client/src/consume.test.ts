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
