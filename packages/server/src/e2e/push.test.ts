/**
 * Push consumption and signals over `/v1/ws` against the real server process: prefetch bounds what a
 * slow consumer holds, consumers of one queue share it, a socket that dies hands its leases to a
 * waiting consumer at once, signals reach live subscribers and leave nothing behind, bad frames
 * change nothing, and keys are required when configured. The push suite runs on every store (SQLite,
 * log, PostgreSQL when HOPPER_TEST_PG_URL is set); the key check, which no store touches, on SQLite.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient, type QueueStats, type QueueSummary } from "@hopper/client";
import { e2eStores, type OpenedStore } from "../testing/e2e-stores.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";
import { type Frame, receiptsOf, TestSocket } from "../testing/ws-test-client.js";

/** The bound: leases of a closed socket reach a waiting consumer within this. */
const handBackMsMax = 100;

for (const store of e2eStores)
  describe(`push over WebSocket, end to end (${store.name})`, { skip: store.skip }, () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    let opened: OpenedStore | undefined;
    let server: ServerProcess;
    let client: HopperClient;
    const sockets: TestSocket[] = [];

    async function open(): Promise<TestSocket> {
      const socket = await TestSocket.open(server.url);
      sockets.push(socket);
      return socket;
    }

    async function sendNumbers(queue: string, count: number): Promise<Set<string>> {
      const ids = new Set<string>();
      for (let start = 0; start < count; start += 100) {
        const size = Math.min(100, count - start);
        const results = await client.send(
          queue,
          Array.from({ length: size }, (_, i) => ({ body: { n: start + i } })),
        );
        for (const result of results) {
          assert.ok("id" in result, JSON.stringify(result));
          ids.add(result.id);
        }
      }
      return ids;
    }

    const messageId = (frame: Frame) => (frame.message as { id: string }).id;

    before(async () => {
      opened = await store.open("push");
      server = await startServerProcess(opened.options);
      client = new HopperClient({ url: server.url });
    });

    after(async () => {
      for (const socket of sockets) socket.close();
      await server?.stop();
      await opened?.close();
    });

    test("prefetch 5 with a slow consumer: never more than 5 unacked, and every message arrives", async () => {
      const prefetch = 5;
      await client.putQueue("slow", {});
      const ids = await sendNumbers("slow", 40);
      const socket = await open();
      let unacked = 0;
      let unackedMax = 0;
      let inFlightMax = 0;
      const handled = new Set<string>();
      const done = new Promise<void>((resolve, reject) => {
        socket.socket.on("message", (data) => {
          const frame = JSON.parse(String(data)) as Frame;
          if (frame.op !== "deliver") return;
          unacked++;
          unackedMax = Math.max(unackedMax, unacked);
          // A slow handler: 20 ms per message, acked one by one.
          setTimeout(() => {
            handled.add(messageId(frame));
            // Counted as acked when the ack leaves, so this count never runs ahead of the server's.
            unacked--;
            socket.send({ op: "ack", receipts: receiptsOf([frame]) });
            if (handled.size === ids.size) resolve();
          }, 20);
        });
        setTimeout(() => reject(new Error(`only ${handled.size} of ${ids.size} handled`)), 20_000).unref();
      });
      socket.send({ op: "consume", queue: "slow", prefetch });
      // The server's own count, sampled while the consumer works.
      const sampling = (async () => {
        while (handled.size < ids.size) {
          inFlightMax = Math.max(inFlightMax, (await client.getQueue("slow")).stats.inFlight);
          await delay(5);
        }
      })();
      await done;
      await sampling;
      assert.ok(unackedMax <= prefetch, `${unackedMax} deliveries were unacked at once`);
      assert.equal(unackedMax, prefetch, "the consumer was kept full");
      assert.ok(inFlightMax <= prefetch, `the server had ${inFlightMax} in flight`);
      assert.deepEqual([...handled].sort(), [...ids].sort());
      await delay(50);
      const { stats } = await client.getQueue("slow");
      assert.deepEqual([stats.acked, stats.inFlight, stats.available, stats.redelivered], [40, 0, 0, 0]);
    });

    test("two consumers on one queue share it: each gets some, together all, none twice", async () => {
      await client.putQueue("shared", {});
      const first = await open();
      const second = await open();
      await first.request({ op: "consume", queue: "shared", prefetch: 2 });
      await second.request({ op: "consume", queue: "shared", prefetch: 2 });
      // Each consumer acks after a pause, so neither can take the whole queue alone.
      for (const socket of [first, second]) {
        socket.socket.on("message", (data) => {
          const frame = JSON.parse(String(data)) as Frame;
          if (frame.op === "deliver")
            setTimeout(() => socket.send({ op: "ack", receipts: receiptsOf([frame]) }), 10);
        });
      }
      const ids = await sendNumbers("shared", 30);
      await waitUntil(() => first.all("deliver").length + second.all("deliver").length >= 30, 20_000);
      const firstIds = first.all("deliver").map(messageId);
      const secondIds = second.all("deliver").map(messageId);
      assert.ok(firstIds.length > 0 && secondIds.length > 0, `split ${firstIds.length}/${secondIds.length}`);
      assert.deepEqual([...firstIds, ...secondIds].sort(), [...ids].sort());
    });

    test(`a socket closed mid-work: a waiting consumer gets its messages within ${handBackMsMax} ms`, async (t) => {
      await client.putQueue("handback", {});
      const ids = await sendNumbers("handback", 5);
      const holder = await open();
      await holder.request({ op: "consume", queue: "handback", prefetch: 5 });
      const held = await holder.waitForCount("deliver", 5);
      const waiting = await open();
      await waiting.request({ op: "consume", queue: "handback", prefetch: 10 });
      // The waiting consumer's long poll is in place and finds nothing: everything is leased.
      await delay(200);
      assert.equal(waiting.all("deliver").length, 0);

      const closedAt = performance.now();
      holder.close();
      const taken = await waiting.waitForCount("deliver", 5);
      const elapsedMs = performance.now() - closedAt;
      t.diagnostic(`the waiting consumer had all 5 messages ${elapsedMs.toFixed(1)} ms after the close`);
      assert.ok(elapsedMs < handBackMsMax, `the messages came back after ${elapsedMs.toFixed(1)} ms`);
      assert.deepEqual(taken.map(messageId).sort(), [...ids].sort());
      assert.deepEqual(held.map(messageId).sort(), [...ids].sort());
      assert.ok(taken.every((frame) => (frame.message as { deliveryCount: number }).deliveryCount === 2));
    });

    test("signals reach live subscribers only, a later subscriber sees nothing old, and nothing is stored", async () => {
      await client.putQueue("untouched", {});
      const queuesBefore = withoutAges(await client.listQueues());
      const publisher = await open();
      const first = await open();
      const second = await open();
      await first.request({ op: "signal.subscribe", channel: "room.7" });
      await second.request({ op: "signal.subscribe", channel: "room.7" });
      const published = await publisher.request({
        op: "signal.publish",
        channel: "room.7",
        data: { typing: "ann" },
      });
      assert.equal(published.delivered, 2);
      for (const socket of [first, second]) {
        assert.deepEqual(await socket.waitFor((f) => f.op === "signal"), {
          op: "signal",
          channel: "room.7",
          data: { typing: "ann" },
        });
      }
      const later = await open();
      await later.request({ op: "signal.subscribe", channel: "room.7" });
      await delay(100);
      assert.equal(later.all("signal").length, 0, "no signal from before the subscription");
      const nobody = await publisher.request({ op: "signal.publish", channel: "room.empty", data: "x" });
      assert.equal(nobody.delivered, 0);
      assert.deepEqual(
        withoutAges(await client.listQueues()),
        queuesBefore,
        "no queue and no message was written",
      );
    });

    test("a JSON body is stored as its producer sent it, over HTTP and over a WebSocket", async () => {
      await client.putQueue("as-sent", {});
      // Spaced out, an integer past 2^53, an escape: parsed and written again, each would change.
      const sentOverHttp = '{ "big": 12345678901234567890,  "s": "\\u00e9 \\"" }';
      const sentOverWs = '[1.50, {"big":-98765432109876543210}]';
      const response = await fetch(`${server.url}/v1/queues/as-sent/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"messages": [ {"key": "k", "body": ${sentOverHttp}} ]}`,
      });
      assert.equal(response.status, 200);
      const socket = await open();
      socket.socket.send(`{"op":"send","queue":"as-sent","ref":"raw","messages":[{"body":${sentOverWs}}]}`);
      const sent = await socket.waitFor((frame) => frame.ref === "raw");
      assert.equal(sent.op, "sent", JSON.stringify(sent));
      const received = await fetch(`${server.url}/v1/queues/as-sent/receive`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ max: 10 }),
      });
      const text = await received.text();
      assert.ok(text.includes(`"body":${sentOverHttp},`), text);
      assert.ok(text.includes(`"body":${sentOverWs},`), text);
    });

    test("bad frames get an error with the catalog's code and change nothing", async () => {
      await client.putQueue("guarded", {});
      await sendNumbers("guarded", 2);
      const before = (await client.getQueue("guarded")).stats;
      const socket = await open();
      const answers = [
        await socket.request({ op: "consume", queue: "guarded", prefetch: 1, unknown: 1 }),
        await socket.request({ op: "consume", queue: "guarded", prefetch: 5000 }),
        await socket.request({ op: "consume", queue: "no-such-queue", prefetch: 1 }),
        await socket.request({ op: "frobnicate" }),
        await socket.request({ op: "send", queue: "guarded", messages: [{ body: 1, unknown: true }] }),
        await socket.request({ op: "send", queue: "guarded", messages: [] }),
        await socket.request({ op: "send", queue: "no-such-queue", messages: [{ body: 1 }] }),
      ];
      socket.socket.send("{not json");
      const invalidJson = await socket.waitFor((f) => f.op === "error" && f.ref === undefined);
      assert.deepEqual(
        [...answers, invalidJson].map((f) => [f.op, (f.error as { code: string }).code]),
        [
          ["error", "invalid_request"],
          ["error", "invalid_request"],
          ["error", "queue_not_found"],
          ["error", "invalid_request"],
          ["error", "invalid_request"],
          ["error", "invalid_request"],
          ["error", "queue_not_found"],
          ["error", "invalid_json"],
        ],
      );
      await delay(50);
      assert.equal(socket.all("deliver").length, 0);
      const after = (await client.getQueue("guarded")).stats;
      assert.deepEqual(withoutAge(after), withoutAge(before));
      // A good send frame, by contrast, stores its messages and answers their ids.
      const sent = await socket.request({
        op: "send",
        queue: "guarded",
        messages: [{ body: 3 }, { body: 4 }],
      });
      assert.equal(sent.op, "sent");
      assert.equal((sent.results as { id: string }[]).length, 2);
      assert.equal((await client.getQueue("guarded")).stats.published, before.published + 2);
    });
  });

describe("push authentication, end to end", () => {
  let dir: TempDir;
  let server: ServerProcess;

  before(async () => {
    dir = createTempDir();
    server = await startServerProcess({ dataFile: dir.file("hopper.db"), apiKeys: ["k-one"] });
  });

  after(async () => {
    await server?.stop();
    dir?.remove();
  });

  test("with keys configured, a socket without the key is refused with 401 before any upgrade", async () => {
    const refusal = await TestSocket.open(server.url).then(
      () => assert.fail("connected without a key"),
      (error: { status?: number; body?: string }) => error,
    );
    assert.equal(refusal.status, 401);
    assert.equal(
      (JSON.parse(refusal.body ?? "{}") as { error: { code: string } }).error.code,
      "unauthorized",
    );
    const socket = await TestSocket.open(server.url, { apiKey: "k-one" });
    assert.equal((await socket.request({ op: "signal.subscribe", channel: "c" })).op, "signal.subscribed");
    socket.close();
  });
});

/** Stats but for the age of the oldest message, which grows by itself. */
function withoutAge(stats: QueueStats): QueueStats {
  return { ...stats, oldestMessageAgeMs: 0 };
}

function withoutAges(queues: QueueSummary[]): QueueSummary[] {
  return queues.map((queue) => ({ ...queue, stats: withoutAge(queue.stats) }));
}

async function waitUntil(check: () => boolean, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not true within ${waitMs} ms`);
    await delay(10);
  }
}
