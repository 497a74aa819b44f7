/**
 * The worker helper against the real server process: many messages at bounded concurrency with none
 * lost and none handled twice, and a slow handler that keeps its lease by heartbeat.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient } from "@hopper/client";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

describe("worker end to end", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let dir: TempDir;
  let server: ServerProcess;
  let client: HopperClient;

  before(async () => {
    dir = createTempDir();
    server = await startServerProcess({ dataFile: dir.file("hopper.db") });
    client = new HopperClient({ url: server.url });
  });

  after(async () => {
    await server?.stop();
    dir?.remove();
  });

  test("1,000 messages at concurrency 8: every one handled exactly once, never more than 8 at a time", async () => {
    await client.putQueue("jobs", {});
    const sentIds = new Set<string>();
    for (let batch = 0; batch < 10; batch++) {
      const results = await client.send(
        "jobs",
        Array.from({ length: 100 }, (_, i) => ({ body: { n: batch * 100 + i } })),
      );
      for (const result of results) {
        assert.ok("id" in result, JSON.stringify(result));
        sentIds.add(result.id);
      }
    }
    const handled = new Map<string, number>();
    let running = 0;
    let runningMax = 0;
    let allHandled!: () => void;
    const finished = new Promise<void>((resolve) => {
      allHandled = resolve;
    });
    const worker = client.worker(
      "jobs",
      async (message) => {
        running++;
        runningMax = Math.max(runningMax, running);
        // Yield so that handlers overlap, as real work would.
        await delay(1);
        handled.set(message.id, (handled.get(message.id) ?? 0) + 1);
        running--;
        if (handled.size === sentIds.size) allHandled();
      },
      { concurrency: 8, waitMs: 1_000 },
    );
    const timeout = new AbortController();
    const deadline = delay(60_000, undefined, { signal: timeout.signal }).then(() => {
      throw new Error(`timed out with ${handled.size} of ${sentIds.size} handled`);
    });
    deadline.catch(() => {});
    try {
      await Promise.race([finished, deadline]);
    } finally {
      timeout.abort();
      await worker.stop();
    }

    assert.equal(handled.size, 1_000);
    assert.deepEqual([...handled.keys()].sort(), [...sentIds].sort());
    const twice = [...handled].filter(([, count]) => count > 1);
    assert.deepEqual(twice, [], "no message was handled twice");
    assert.ok(runningMax <= 8, `${runningMax} handlers ran at once`);
    assert.ok(runningMax > 1, "handlers did run concurrently");
    const { stats } = await client.getQueue("jobs");
    assert.deepEqual(
      {
        available: stats.available,
        inFlight: stats.inFlight,
        acked: stats.acked,
        redelivered: stats.redelivered,
      },
      { available: 0, inFlight: 0, acked: 1_000, redelivered: 0 },
    );
  });

  test("a handler that outlives the visibility timeout keeps its lease by heartbeat", async () => {
    await client.putQueue("slow", { visibilityTimeoutMs: 1_500 });
    await client.send("slow", [{ body: "long job" }]);
    let lostLease = false;
    let handledDeliveryCount = 0;
    let handlerDone!: () => void;
    const done = new Promise<void>((resolve) => {
      handlerDone = resolve;
    });
    let handlerStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      handlerStarted = resolve;
    });
    const worker = client.worker(
      "slow",
      async (message, { signal }) => {
        handlerStarted();
        signal.addEventListener("abort", () => {
          lostLease = true;
        });
        handledDeliveryCount = message.deliveryCount;
        // Over two lease lengths of work: without heartbeats the lease would end twice over.
        await delay(3_500);
        handlerDone();
      },
      // Heartbeats come six times per lease, so a busy machine that delays one still keeps the lease.
      { concurrency: 1, heartbeatMs: 250, waitMs: 1_000 },
    );
    try {
      await started;
      // A competing consumer polls throughout the handler's run; it must never get the message.
      const competitor = await client.receive("slow", { waitMs: 3_000, visibilityTimeoutMs: 1_000 });
      assert.deepEqual(competitor, [], "the message stayed leased to the slow handler");
      await done;
    } finally {
      await worker.stop();
    }
    assert.equal(lostLease, false);
    assert.equal(handledDeliveryCount, 1);
    const { stats } = await client.getQueue("slow");
    assert.deepEqual(
      {
        available: stats.available,
        inFlight: stats.inFlight,
        acked: stats.acked,
        delivered: stats.delivered,
      },
      { available: 0, inFlight: 0, acked: 1, delivered: 1 },
    );
  });
});
