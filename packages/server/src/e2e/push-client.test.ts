/**
 * The client's `consume` and push-mode worker against the real server process: every message handled
 * once within prefetch, a throw nacks, stop() finishes what runs, and a connection cut by the network
 * is replaced (through a TCP proxy the test can sever) with the lost lease redelivered. On every store:
 * SQLite, log, and PostgreSQL when HOPPER_TEST_PG_URL is set.
 */
import assert from "node:assert/strict";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient, type HopperError } from "@hopper/client";
import { e2eStores, type OpenedStore } from "../testing/e2e-stores.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

/** A TCP proxy to the server whose connections the test can cut, as a network fault would. */
async function startProxy(
  targetUrl: string,
): Promise<{ url: string; cut: () => void; close: () => Promise<void> }> {
  const target = new URL(targetUrl);
  const open = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = createConnection({ host: target.hostname, port: Number(target.port) });
    open.add(inbound);
    open.add(outbound);
    inbound.pipe(outbound).pipe(inbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
      open.delete(inbound);
      open.delete(outbound);
    };
    inbound.on("error", end).on("close", end);
    outbound.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    cut: () => {
      for (const socket of open) socket.destroy();
      open.clear();
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function waitUntil(
  check: () => boolean | Promise<boolean>,
  what: string,
  waitMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`not true within ${waitMs} ms: ${what}`);
    await delay(10);
  }
}

for (const store of e2eStores)
  describe(`client consume, end to end (${store.name})`, { skip: store.skip }, () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    let opened: OpenedStore | undefined;
    let server: ServerProcess;
    let client: HopperClient;

    before(async () => {
      opened = await store.open("push_client");
      server = await startServerProcess(opened.options);
      client = new HopperClient({ url: server.url });
    });

    after(async () => {
      await server?.stop();
      await opened?.close();
    });

    test("200 messages at prefetch 4: each handled once, never more than 4 at a time, all acked", async () => {
      await client.putQueue("jobs", {});
      const sent = new Set<string>();
      for (let batch = 0; batch < 2; batch++) {
        const results = await client.send(
          "jobs",
          Array.from({ length: 100 }, (_, i) => ({ body: { n: batch * 100 + i } })),
        );
        for (const result of results) if ("id" in result) sent.add(result.id);
      }
      const handled = new Map<string, number>();
      let running = 0;
      let runningMax = 0;
      const errors: unknown[] = [];
      const consumer = client.consume(
        "jobs",
        async (message) => {
          running++;
          runningMax = Math.max(runningMax, running);
          await delay(2);
          handled.set(message.id, (handled.get(message.id) ?? 0) + 1);
          running--;
        },
        { prefetch: 4, onError: (error) => errors.push(error) },
      );
      try {
        await waitUntil(() => handled.size === sent.size, `${handled.size} of ${sent.size} handled`);
      } finally {
        await consumer.stop();
      }
      assert.deepEqual([...handled.keys()].sort(), [...sent].sort());
      assert.deepEqual(
        [...handled].filter(([, count]) => count > 1),
        [],
      );
      assert.ok(runningMax <= 4, `${runningMax} ran at once`);
      assert.ok(runningMax > 1, "handlers overlapped");
      assert.deepEqual(errors, []);
      const { stats } = await client.getQueue("jobs");
      assert.deepEqual([stats.acked, stats.inFlight, stats.available], [200, 0, 0]);
    });

    test("a handler that throws nacks its message, which comes back", async () => {
      await client.putQueue("flaky", {
        retry: { initialDelayMs: 10, multiplier: 1, maxDelayMs: 10, jitter: "none" },
      });
      await client.send("flaky", [{ body: "once" }]);
      const deliveryCounts: number[] = [];
      const errors: unknown[] = [];
      const consumer = client.consume(
        "flaky",
        (message) => {
          deliveryCounts.push(message.deliveryCount);
          if (message.deliveryCount === 1) throw new Error("first try fails");
        },
        { onError: (error) => errors.push(error) },
      );
      try {
        await waitUntil(() => deliveryCounts.length === 2, "the redelivery");
      } finally {
        await consumer.stop();
      }
      assert.deepEqual(deliveryCounts, [1, 2]);
      assert.equal((errors[0] as Error).message, "first try fails");
      const { stats } = await client.getQueue("flaky");
      assert.deepEqual([stats.nacked, stats.acked, stats.inFlight], [1, 1, 0]);
    });

    test("stop() lets a running handler finish and acks it; messages it did not run go back", async () => {
      await client.putQueue("graceful", {});
      await client.send("graceful", [{ body: 1 }, { body: 2 }, { body: 3 }]);
      let started = 0;
      let finished = 0;
      const consumer = client.consume(
        "graceful",
        async () => {
          started++;
          await delay(300);
          finished++;
        },
        { prefetch: 1 },
      );
      await waitUntil(() => started === 1, "the first handler started");
      await consumer.stop();
      assert.equal(finished, 1, "the running handler finished before stop() resolved");
      await waitUntil(
        async () => (await client.getQueue("graceful")).stats.inFlight === 0,
        "leases handed back",
      );
      const { stats } = await client.getQueue("graceful");
      assert.deepEqual([stats.acked, stats.available], [1, 2]);
    });

    test("the push-mode worker runs on consume", async () => {
      await client.putQueue("pushed", {});
      await client.send(
        "pushed",
        Array.from({ length: 20 }, (_, n) => ({ body: { n } })),
      );
      const seen = new Set<number>();
      const worker = client.worker(
        "pushed",
        (message) => {
          seen.add((message.body as { n: number }).n);
        },
        { mode: "push", prefetch: 3 },
      );
      try {
        await waitUntil(() => seen.size === 20, `${seen.size} of 20`);
      } finally {
        await worker.stop();
      }
      await waitUntil(async () => (await client.getQueue("pushed")).stats.acked === 20, "all acked");
    });

    test("a push worker's stop() takes no more deliveries: the messages it did not run were never counted", async () => {
      await client.putQueue("stop-uncounted", {});
      await client.send(
        "stop-uncounted",
        Array.from({ length: 6 }, (_, n) => ({ body: { n } })),
      );
      let started = 0;
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      const errors: unknown[] = [];
      const worker = client.worker(
        "stop-uncounted",
        async () => {
          started++;
          await released;
        },
        { mode: "push", prefetch: 2, onError: (error) => errors.push(error) },
      );
      await waitUntil(() => started === 2, "the first two handlers started");
      const stopping = worker.stop();
      // The two running handlers finish and are acked while stop() is under way: their credit must not
      // bring more deliveries, which the worker would hold unrun and hand back with a delivery counted.
      await delay(100);
      release();
      await stopping;
      assert.equal(started, 2, "no handler ran after stop()");
      assert.deepEqual(errors, []);
      await waitUntil(
        async () => (await client.getQueue("stop-uncounted")).stats.inFlight === 0,
        "nothing left leased",
      );
      const { stats } = await client.getQueue("stop-uncounted");
      assert.deepEqual([stats.acked, stats.available], [2, 4]);
      const next = await client.receive("stop-uncounted", { max: 10 });
      assert.deepEqual(
        next.map((message) => message.deliveryCount),
        [1, 1, 1, 1],
        "each message the worker did not run is delivered now for the first time",
      );
    });

    test("client.signals: live subscribers hear a publish; a dropped connection subscribes again", async () => {
      const proxy = await startProxy(server.url);
      const publisher = new HopperClient({ url: server.url });
      const listener = new HopperClient({ url: proxy.url });
      const heard: unknown[] = [];
      const errors: unknown[] = [];
      listener.signals.configure({ onError: (error) => errors.push(error) });
      try {
        const subscription = await listener.signals.subscribe("presence", (data) => heard.push(data));
        assert.equal(await publisher.signals.publish("presence", { online: "ann" }), 1);
        await waitUntil(() => heard.length === 1, "the first signal");
        assert.deepEqual([...heard], [{ online: "ann" }]);

        proxy.cut();
        // Signals published while the listener is away are gone; once it is back it hears new ones.
        await waitUntil(
          async () => (await publisher.signals.publish("presence", "back?")) === 1,
          "resubscribed",
        );
        // Until the server sees the cut connection close, a publish may count its old subscription (and
        // go to it): publish again until the listener, subscribed anew, hears one.
        await waitUntil(async () => {
          if (heard.includes("back?")) return true;
          await publisher.signals.publish("presence", "back?");
          return false;
        }, "a signal after the reconnect");

        await subscription.unsubscribe();
        assert.equal(await publisher.signals.publish("presence", "gone"), 0);
      } finally {
        await listener.signals.close();
        await publisher.signals.close();
        await proxy.close();
      }
    });

    test("a connection cut by the network is replaced; the lease lost with it is redelivered", async () => {
      const proxy = await startProxy(server.url);
      const viaProxy = new HopperClient({ url: proxy.url });
      await client.putQueue("resilient", {});
      await client.send("resilient", [{ body: "a" }, { body: "late" }]);
      const deliveries: { id: string; body: unknown; deliveryCount: number }[] = [];
      const lost: unknown[] = [];
      let firstAborted = false;
      let releaseLate!: () => void;
      const lateReleased = new Promise<void>((resolve) => {
        releaseLate = resolve;
      });
      let lateSignal: { aborted: boolean; reason: unknown } | undefined;
      const consumer = viaProxy.consume(
        "resilient",
        async (message, context) => {
          deliveries.push({ id: message.id, body: message.body, deliveryCount: message.deliveryCount });
          if (message.deliveryCount > 1) return;
          if (message.body === "a") {
            // Held until the connection goes; the signal says the lease went with it.
            await new Promise<void>((resolve) =>
              context.signal.addEventListener("abort", () => resolve(), { once: true }),
            );
            firstAborted = true;
          } else {
            // Looks at its signal only after the lease is gone: it must still read as aborted.
            await lateReleased;
            lateSignal = { aborted: context.signal.aborted, reason: context.signal.reason };
          }
        },
        { prefetch: 2, onError: (error) => lost.push(error) },
      );
      try {
        await waitUntil(() => deliveries.length === 2, "the first deliveries");
        proxy.cut();
        await waitUntil(() => deliveries.length === 4, "the redeliveries on a new connection");
        releaseLate();
        await waitUntil(() => lateSignal !== undefined, "the late handler's look at its signal");
        assert.ok(firstAborted, "the first handler's signal fired");
        assert.equal(lateSignal?.aborted, true, "a signal read after the loss is aborted");
        assert.equal((lateSignal?.reason as HopperError | undefined)?.code, "stale_receipt");
        for (const body of ["a", "late"]) {
          const [first, again] = deliveries.filter((delivery) => delivery.body === body);
          assert.equal(again?.id, first?.id, `${body} redelivered`);
          assert.deepEqual([first?.deliveryCount, again?.deliveryCount], [1, 2]);
        }
        assert.equal(lost.filter((error) => (error as HopperError).code === "stale_receipt").length, 2);
        await waitUntil(
          async () => (await client.getQueue("resilient")).stats.acked === 2,
          "the redeliveries acked",
        );
        // Consuming goes on over the new connection.
        await client.send("resilient", [{ body: "b" }]);
        await waitUntil(() => deliveries.length === 5, "a message sent after the reconnect");
      } finally {
        await consumer.stop();
        await proxy.close();
      }
    });
  });
