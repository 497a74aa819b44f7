import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { FakeClock } from "./testing/fake-clock.js";
import { FakeQueueServer, json } from "./testing/fake-server.js";

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A fetch that records each call and answers with `respond`. */
function recordingFetch(respond: (call: Call) => Response | Promise<Response>) {
  const calls: Call[] = [];
  const fetchFn: typeof fetch = async (input, init) => {
    const call: Call = {
      url: String(input),
      method: init?.method ?? "GET",
      headers: Object.fromEntries(new Headers(init?.headers).entries()),
      body: typeof init?.body === "string" ? JSON.parse(init.body) : undefined,
    };
    calls.push(call);
    return respond(call);
  };
  return { calls, fetchFn };
}

const queueInfo = { name: "jobs:email", kind: "standard", attributes: {}, stats: {} };

async function rejection(promise: Promise<unknown>): Promise<HopperError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof HopperError, `expected a HopperError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

test("putQueue encodes the name, sends attributes and the API key, and tells 201 from 200", async () => {
  let status = 201;
  const { calls, fetchFn } = recordingFetch(() => json(status, queueInfo));
  const client = new HopperClient({ url: "http://broker:9000/", apiKey: "k1", fetch: fetchFn });

  const first = await client.putQueue("jobs:email", { visibilityTimeoutMs: 60_000, kind: "fifo" });
  status = 200;
  const second = await client.putQueue("jobs:email");

  assert.equal(first.created, true);
  assert.equal(second.created, false);
  assert.deepEqual(first.queue, queueInfo);
  assert.equal(calls[0]?.url, "http://broker:9000/v1/queues/jobs%3Aemail");
  assert.equal(calls[0]?.method, "PUT");
  assert.deepEqual(calls[0]?.body, { visibilityTimeoutMs: 60_000, kind: "fifo" });
  assert.equal(calls[0]?.headers.authorization, "Bearer k1");
  assert.equal(calls[0]?.headers["content-type"], "application/json");
  assert.deepEqual(calls[1]?.body, {});
});

test("queue calls use the paths and bodies of API.md", async () => {
  const { calls, fetchFn } = recordingFetch((call) => {
    if (call.method === "DELETE") return new Response(null, { status: 204 });
    if (call.url.endsWith("/v1/queues")) return json(200, { queues: [] });
    if (call.url.includes("/messages?")) return json(200, { messages: [] });
    if (call.url.endsWith("/purge")) return json(200, { purged: 7 });
    if (call.url.endsWith("/receive")) return json(200, { messages: [] });
    const receipts = (call.body as { receipts: string[] }).receipts;
    return json(200, { results: receipts.map(() => ({ ok: true })) });
  });
  const client = new HopperClient({ fetch: fetchFn });

  await client.receive("q", { max: 10, waitMs: 5000, visibilityTimeoutMs: 9000 });
  await client.ack("q", ["r1", "r2"]);
  await client.nack("q", ["r1"], { delayMs: 2500 });
  await client.nack("q", ["r2"]);
  await client.extend("q", ["r3"], 45_000);
  await client.peek("q", { state: "in-flight", limit: 5 });
  assert.deepEqual(await client.purge("q"), { purged: 7 });
  assert.deepEqual(await client.listQueues(), []);
  await client.deleteQueue("q");

  const sent = calls.map((call) => [call.method, call.url.replace("http://127.0.0.1:7171", ""), call.body]);
  assert.deepEqual(sent, [
    ["POST", "/v1/queues/q/receive", { max: 10, waitMs: 5000, visibilityTimeoutMs: 9000 }],
    ["POST", "/v1/queues/q/ack", { receipts: ["r1", "r2"] }],
    ["POST", "/v1/queues/q/nack", { receipts: ["r1"], delayMs: 2500 }],
    ["POST", "/v1/queues/q/nack", { receipts: ["r2"] }],
    ["POST", "/v1/queues/q/extend", { receipts: ["r3"], visibilityTimeoutMs: 45_000 }],
    ["GET", "/v1/queues/q/messages?state=in-flight&limit=5", undefined],
    ["POST", "/v1/queues/q/purge", undefined],
    ["GET", "/v1/queues", undefined],
    ["DELETE", "/v1/queues/q", undefined],
  ]);
});

test("task calls use the paths of API.md and answer the task", async () => {
  const task = {
    id: "t:1",
    kind: "redrive",
    state: "running",
    moved: 0,
    total: 3,
    queue: "q.dlq",
    to: "q",
    ratePerSecond: 10,
    createdAt: "2026-01-01T00:00:00.000Z",
    finishedAt: null,
  };
  const { calls, fetchFn } = recordingFetch((call) => {
    if (call.url.endsWith("/redrive")) return json(202, { task });
    if (call.url.endsWith("/v1/tasks")) return json(200, { tasks: [task] });
    if (call.url.endsWith("/receive")) return json(200, { messages: [] });
    return json(200, task);
  });
  const client = new HopperClient({ fetch: fetchFn });

  assert.deepEqual(await client.redrive("q.dlq", { to: "q", max: 3, ratePerSecond: 10 }), task);
  await client.redrive("q.dlq");
  assert.deepEqual(await client.getTask("t:1"), task);
  assert.deepEqual(await client.listTasks(), [task]);
  assert.deepEqual(await client.cancelTask("t:1"), task);
  await client.receive("q", { autoAck: true });

  const sent = calls.map((call) => [call.method, call.url.replace("http://127.0.0.1:7171", ""), call.body]);
  assert.deepEqual(sent, [
    ["POST", "/v1/queues/q.dlq/redrive", { to: "q", max: 3, ratePerSecond: 10 }],
    ["POST", "/v1/queues/q.dlq/redrive", {}],
    ["GET", "/v1/tasks/t%3A1", undefined],
    ["GET", "/v1/tasks", undefined],
    ["POST", "/v1/tasks/t%3A1/cancel", undefined],
    ["POST", "/v1/queues/q/receive", { autoAck: true }],
  ]);
});

test("a redrive answer without its task fails with invalid_response", async () => {
  const { fetchFn } = recordingFetch(() => json(202, { id: "t1" }));
  const error = await rejection(new HopperClient({ fetch: fetchFn }).redrive("q"));
  assert.equal(error.code, "invalid_response");
});

test("send, receive, ack and extend round-trip through the in-memory server", async () => {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  const client = new HopperClient({ fetch: server.fetch, clock });

  const sent = await client.send("q", [{ body: { n: 1 } }, { body: { n: 2 }, headers: { a: "b" } }]);
  const received = await client.receive("q", { max: 5 });
  assert.deepEqual(
    received.map((message) => message.id),
    sent.map((result) => ("id" in result ? result.id : "")),
  );
  assert.deepEqual(received[1]?.headers, { a: "b" });

  const receipt = received[0]?.receipt ?? "";
  assert.deepEqual(await client.extend("q", [receipt], 60_000), [{ ok: true }]);
  assert.deepEqual(await client.ack("q", [receipt]), [{ ok: true }]);
  const [again] = await client.ack("q", [receipt]);
  assert.equal(again && "error" in again ? again.error.code : undefined, "stale_receipt");
});

test("a Hopper error body becomes a HopperError with code, status, details and Retry-After", async () => {
  const body = { error: { code: "backpressure", message: "queue too deep", details: { depth: 9 } } };
  const { fetchFn } = recordingFetch(() => json(429, body, { "retry-after": "3" }));
  const error = await rejection(new HopperClient({ fetch: fetchFn }).send("q", [{ body: 1 }]));

  assert.equal(error.code, "backpressure");
  assert.equal(error.status, 429);
  assert.equal(error.message, "queue too deep");
  assert.deepEqual(error.details, { depth: 9 });
  assert.equal(error.retryAfterMs, 3000);
});

test("a non-JSON error body becomes http_error with the status", async () => {
  const { fetchFn } = recordingFetch(() => new Response("<html>Bad Gateway</html>", { status: 502 }));
  const error = await rejection(new HopperClient({ fetch: fetchFn }).getQueue("q"));

  assert.equal(error.code, "http_error");
  assert.equal(error.status, 502);
  assert.match(error.message, /Bad Gateway/);
});

test("a JSON error body without a code is not mistaken for a Hopper error", async () => {
  const { fetchFn } = recordingFetch(() => json(500, { message: "oops" }));
  const error = await rejection(new HopperClient({ fetch: fetchFn }).getQueue("q"));
  assert.equal(error.code, "http_error");
});

test("a request that gets no answer fails with network_error and status 0", async () => {
  const fetchFn: typeof fetch = async () => {
    throw new TypeError("fetch failed");
  };
  const error = await rejection(new HopperClient({ fetch: fetchFn }).listQueues());

  assert.equal(error.code, "network_error");
  assert.equal(error.status, 0);
  assert.ok(error.cause instanceof TypeError);
});

test("a 2xx answer that breaks the contract fails with invalid_response", async () => {
  const { fetchFn } = recordingFetch(() => json(200, { results: [{ ok: true }] }));
  const client = new HopperClient({ fetch: fetchFn });

  assert.equal((await rejection(client.ack("q", ["a", "b"]))).code, "invalid_response");
  assert.equal((await rejection(client.listQueues())).code, "invalid_response");
});

test("an aborted receive fails with aborted, and one with no answer times out on the clock", async () => {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  const client = new HopperClient({ fetch: server.fetch, clock, requestTimeoutMs: 1000 });

  const controller = new AbortController();
  const aborted = rejection(client.receive("q", { waitMs: 20_000, signal: controller.signal }));
  controller.abort();
  assert.equal((await aborted).code, "aborted");

  const hanging: typeof fetch = (_input, init) =>
    new Promise((_resolve, reject) =>
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)),
    );
  const slowClient = new HopperClient({ fetch: hanging, clock, requestTimeoutMs: 1000 });
  let settled = false;
  const timedOut = rejection(slowClient.getQueue("q")).finally(() => {
    settled = true;
  });
  await clock.advance(999);
  assert.equal(settled, false);
  await clock.advance(1);
  const error = await timedOut;
  assert.equal(error.code, "timeout");
  assert.equal(clock.pendingTimerCount, 0);
});

test("a receive's timeout includes its long poll", async () => {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  const client = new HopperClient({ fetch: server.fetch, clock, requestTimeoutMs: 1000 });

  const answer = client.receive("q", { waitMs: 5000 });
  await clock.advance(5000);
  assert.deepEqual(await answer, []);
});

test("names that URLs would resolve as dot segments are refused before any request", async () => {
  const { calls, fetchFn } = recordingFetch(() => json(200, queueInfo));
  const client = new HopperClient({ fetch: fetchFn });

  assert.equal((await rejection(client.deleteQueue(".."))).code, "invalid_name");
  assert.equal((await rejection(client.getQueue("."))).code, "invalid_name");
  assert.equal(calls.length, 0);
});

test("health checks accept a plain-text answer and throw on failure", async () => {
  let status = 200;
  const { calls, fetchFn } = recordingFetch(() => new Response("ok", { status }));
  const client = new HopperClient({ fetch: fetchFn });

  await client.health();
  status = 503;
  assert.equal((await rejection(client.ready())).status, 503);
  assert.deepEqual(
    calls.map((call) => call.url),
    ["http://127.0.0.1:7171/healthz", "http://127.0.0.1:7171/readyz"],
  );
});
