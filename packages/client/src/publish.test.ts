import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperClient } from "./client.js";
import { HopperError } from "./errors.js";
import { FakeClock, settle } from "./testing/fake-clock.js";
import { FakeQueueServer } from "./testing/fake-server.js";
import type { SendMessage } from "./types.js";

function setup() {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  const client = new HopperClient({ fetch: server.fetch, clock });
  return { clock, server, client };
}

test("250 concurrent publishes become 3 send requests and each caller gets its own id", async () => {
  const { server, client } = setup();
  const results = await Promise.all(
    Array.from({ length: 250 }, (_, index) => client.publish("q", { body: { index } })),
  );

  const sends = server.requestsTo("/messages");
  assert.deepEqual(
    sends.map((request) => (request.body as { messages: unknown[] }).messages.length),
    [100, 100, 50],
  );
  // Each message was delivered to the server in call order, so caller i must get the i-th id.
  const received = await client.receive("q", { max: 100 });
  assert.equal(new Set(results.map((result) => result.id)).size, 250);
  received.forEach((message, index) => {
    assert.deepEqual(message.body, { index });
    assert.equal(results[index]?.id, message.id);
  });
  assert.ok(results.every((result) => result.duplicate === false));
});

test("an item error rejects only the caller whose message failed", async () => {
  const { server, client } = setup();
  server.rejectItem = (message) =>
    (message.body as { index: number }).index === 3
      ? { code: "message_too_large", message: "too big", details: { maxMessageBytes: 10 } }
      : undefined;

  const outcomes = await Promise.allSettled(
    Array.from({ length: 6 }, (_, index) => client.publish("q", { body: { index } })),
  );

  assert.equal(server.requestsTo("/messages").length, 1);
  assert.deepEqual(
    outcomes.map((outcome) => outcome.status),
    ["fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled"],
  );
  const failure = outcomes[3];
  assert.ok(failure?.status === "rejected" && failure.reason instanceof HopperError);
  assert.equal(failure.reason.code, "message_too_large");
  assert.deepEqual(failure.reason.details, { maxMessageBytes: 10 });
});

test("a failed request rejects every caller in its batch and no other batch", async () => {
  const clock = new FakeClock();
  const server = new FakeQueueServer(clock);
  let sendCount = 0;
  const flakyFetch: typeof fetch = async (input, init) => {
    sendCount += 1;
    if (sendCount === 1) throw new TypeError("connection reset");
    return server.fetch(input, init);
  };
  const client = new HopperClient({ fetch: flakyFetch, clock });

  const outcomes = await Promise.allSettled(
    Array.from({ length: 150 }, (_, index) => client.publish("q", { body: { index } })),
  );

  const rejected = outcomes.filter((outcome) => outcome.status === "rejected");
  assert.equal(rejected.length, 100);
  assert.ok(outcomes.slice(0, 100).every((outcome) => outcome.status === "rejected"));
  assert.ok(outcomes.slice(100).every((outcome) => outcome.status === "fulfilled"));
  const first = rejected[0];
  assert.ok(first?.status === "rejected" && first.reason instanceof HopperError);
  assert.equal(first.reason.code, "network_error");
});

test("publishes to different queues, or in different turns, do not share a batch", async () => {
  const { server, client } = setup();
  await Promise.all([client.publish("a", { body: 1 }), client.publish("b", { body: 2 })]);
  await client.publish("a", { body: 3 });
  await client.publish("a", { body: 4 });

  const batches = server.requestsTo("/messages").map((request) => {
    const messages = (request.body as { messages: SendMessage[] }).messages;
    return [request.path, messages.map((message) => message.body)];
  });
  assert.deepEqual(batches, [
    ["/v1/queues/a/messages", [1]],
    ["/v1/queues/b/messages", [2]],
    ["/v1/queues/a/messages", [3]],
    ["/v1/queues/a/messages", [4]],
  ]);
});

test("publishes made in separate callbacks of the same event-loop turn share a batch", async () => {
  const { server, client } = setup();
  const answers: Promise<unknown>[] = [];
  // Immediates queued together run in one turn; timers are not used because their due times can differ.
  await new Promise<void>((resolve) => {
    setImmediate(() => answers.push(client.publish("q", { body: 1 })));
    setImmediate(() => answers.push(client.publish("q", { body: 2 })));
    setImmediate(resolve);
  });
  await Promise.all(answers);
  assert.equal(server.requestsTo("/messages").length, 1);
});

test("ackLater, nackLater and extendLater coalesce receipts per queue and per argument", async () => {
  const { server, client } = setup();
  server.seed("q", 5);
  const receipts = (await client.receive("q", { max: 5 })).map((message) => message.receipt);
  const [r0 = "", r1 = "", r2 = "", r3 = "", r4 = ""] = receipts;

  const answers = await Promise.all([
    client.ackLater("q", r0),
    client.ackLater("q", r1),
    client.nackLater("q", r2),
    client.nackLater("q", r3, { delayMs: 500 }),
    client.extendLater("q", r4, 9000),
    client.ackLater("q", "not-a-receipt"),
  ]);
  await settle();

  assert.deepEqual(
    server.requests.slice(1).map((request) => [request.path, request.body]),
    [
      ["/v1/queues/q/ack", { receipts: [r0, r1, "not-a-receipt"] }],
      ["/v1/queues/q/nack", { receipts: [r2] }],
      ["/v1/queues/q/nack", { receipts: [r3], delayMs: 500 }],
      ["/v1/queues/q/extend", { receipts: [r4], visibilityTimeoutMs: 9000 }],
    ],
  );
  assert.deepEqual(answers.slice(0, 5), [
    { ok: true },
    { ok: true },
    { ok: true },
    { ok: true },
    { ok: true },
  ]);
  assert.deepEqual(answers[5], { error: { code: "stale_receipt", message: "the lease is gone" } });
});

test("publish passes dedupId and priority through and answers the server's duplicate", async () => {
  const { clock, server } = setup();
  const wrapped: typeof fetch = async (input, init) => {
    const answer = await server.fetch(input, init);
    const body = JSON.parse(String(init?.body ?? "{}")) as { messages?: SendMessage[] };
    if (!String(input).endsWith("/messages") || !body.messages) return answer;
    // The fake server does not deduplicate: mark the items with dedupId "seen" as duplicates.
    const { results } = (await answer.json()) as { results: { id: string; duplicate: boolean }[] };
    const marked = results.map((result, index) =>
      body.messages?.[index]?.dedupId === "seen" ? { id: "first-id", duplicate: true } : result,
    );
    return new Response(JSON.stringify({ results: marked }), { status: 200 });
  };
  const dedupClient = new HopperClient({ fetch: wrapped, clock });
  const [fresh, duplicate] = await Promise.all([
    dedupClient.publish("q", { body: 1, dedupId: "new", priority: 7 }),
    dedupClient.publish("q", { body: 2, dedupId: "seen" }),
  ]);

  const requests = server.requestsTo("/messages");
  assert.equal(requests.length, 1);
  assert.deepEqual((requests[0]?.body as { messages: SendMessage[] } | undefined)?.messages, [
    { body: 1, dedupId: "new", priority: 7 },
    { body: 2, dedupId: "seen" },
  ]);
  assert.equal(fresh.duplicate, false);
  assert.deepEqual(duplicate, { id: "first-id", duplicate: true });
});
