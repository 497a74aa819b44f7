/**
 * Inbox subscriptions through the real server process and the real client, on each store: appends run
 * without pause while 100 devices drop and reconnect from their cursors at random moments, and every
 * device ends with every sequence exactly once, in order; a backlog replayed to a reader that stops
 * reading stays bounded on the server and arrives whole once it reads again.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { HopperClient, type InboxEntry, type InboxSubscription } from "@hopper/client";
import { e2eStores } from "../testing/e2e-stores.js";
import { httpJson, deviceToken as tokenFor } from "../testing/inbox-e2e.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";
import { TestSocket } from "../testing/ws-test-client.js";

const secret = "e2e-secret-of-at-least-thirty-two-bytes!";
const devicesCount = 100;
const seamAppendsCount = 300;
/**
 * A smaller backlog than inbox-backlog.test.ts's 100,000 (which seeds its store directly), since this one
 * appends over HTTP: it stays well under a minute on two cores. HOPPER_TEST_BACKLOG and
 * HOPPER_TEST_BACKLOG_BYTES (the padding of each body) run it larger.
 */
const backlogCount = Number(process.env.HOPPER_TEST_BACKLOG ?? 1_000);
const backlogPaddingBytes = Number(process.env.HOPPER_TEST_BACKLOG_BYTES ?? 8192);
/**
 * The backlog's own namespace keeps every entry: under the default maxDepth (10,000) a larger backlog
 * loses its oldest entries to overflow, and the reader rightly gets `inbox.gap` and the rest.
 */
const backlogMaxDepth = 1_000_000;

const deviceToken = (sub: string) => tokenFor(secret, sub);

const http = httpJson;

/** Appends `count` messages to `recipients` in namespace `ns`, `parallel` calls at a time. */
async function appendMany(
  server: ServerProcess,
  recipients: string[],
  count: number,
  prefix: string,
  parallel = 8,
  padding = "",
  ns = "chat",
) {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        const i = next++;
        await http(server, "POST", `/v1/inboxes/${ns}/append`, {
          recipients,
          message: { id: `${prefix}${i}`, body: { i, padding } },
        });
      }
    }),
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Why a store is not tested here (PostgreSQL without HOPPER_TEST_PG_URL). */
function skipOf(store: (typeof e2eStores)[number]): string | undefined {
  return store.skip;
}

for (const store of e2eStores) {
  describe(`inbox subscriptions on ${store.name}`, { skip: skipOf(store) }, () => {
    // Over 80 lines: one describe block per store, its two tests sharing one server.
    let opened: Awaited<ReturnType<typeof store.open>>;
    let server: ServerProcess;

    before(async () => {
      opened = await store.open("inbox_subscribe", { jwtSecret: secret });
      server = await startServerProcess(opened.options);
      await http(server, "PUT", "/v1/inboxes/chat", {});
      await http(server, "PUT", "/v1/inboxes/backlog", { maxDepth: backlogMaxDepth });
    });
    after(async () => {
      await server?.stop();
      await opened?.close();
    });

    test("100 devices reconnecting at random moments while appends run get every sequence once, in order", async (t) => {
      // Over 80 lines: the seam scenario: devices, appends and reconnects running together.
      const received = new Map<string, number[]>();
      let appendsDuringReplay = 0;
      const clients: HopperClient[] = [];
      // Closed whatever the outcome: a client left open reconnects forever and keeps the process alive.
      t.after(() => Promise.all(clients.map((client) => client.close().catch(() => {}))));
      const subscriptions = new Map<string, InboxSubscription>();
      const subscribe = async (device: string) => {
        const client = new HopperClient({ url: server.url, token: await deviceToken(device) });
        clients.push(client);
        const cursor = subscriptions.get(device)?.cursor;
        const subscription = await client.inboxes.subscribe({
          ns: "chat",
          device: "phone",
          after: cursor?.seq ?? 0,
          ...(cursor?.epoch !== undefined && { epoch: cursor.epoch }),
          onEntry: (entry: InboxEntry) => {
            const seqs = received.get(device) ?? [];
            seqs.push(entry.seq);
            received.set(device, seqs);
          },
          onError: () => {},
        });
        subscriptions.set(device, subscription);
        await subscription.ready;
        return { client, subscription };
      };
      const devices = Array.from({ length: devicesCount }, (_, i) => `user${i}`);
      const live = new Map<string, Awaited<ReturnType<typeof subscribe>>>();
      for (const device of devices) live.set(device, await subscribe(device));

      // A raw socket watches one device's replays: entries above the subscribed head that come before
      // live landed during the replay.
      const watcher = await TestSocket.open(server.url, {});
      t.after(() => watcher.close());
      let appending = true;
      const appends = appendMany(server, devices, seamAppendsCount, "s", 4).finally(() => {
        appending = false;
      });
      const reconnects = (async () => {
        while (appending) {
          const device = devices[Math.floor(Math.random() * devices.length)] as string;
          const current = live.get(device);
          await current?.subscription.close();
          await current?.client.close();
          live.set(device, await subscribe(device));
          const frames = watcher.frames.length;
          const answer = await watcher.request({
            op: "inbox.subscribe",
            ns: "chat",
            recipient: device,
            device: `w${frames}`,
            after: 0,
          });
          const liveFrame = await watcher.waitFor(
            (f) => f.op === "inbox.live" && f.sub === answer.sub,
            30_000,
          );
          const replayed = watcher.frames
            .slice(watcher.frames.indexOf(answer), watcher.frames.indexOf(liveFrame))
            .filter((f) => f.op === "inbox.entry" && f.sub === answer.sub)
            .flatMap((f) => (f.entries as { seq: number }[]).map((e) => e.seq));
          appendsDuringReplay += replayed.filter((seq) => seq > Number(answer.head)).length;
          await watcher.request({ op: "inbox.unsubscribe", sub: answer.sub });
          await sleep(Math.random() * 20);
        }
      })();
      await Promise.all([appends, reconnects]);
      const expected = Array.from({ length: seamAppendsCount }, (_, i) => i + 1);
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline && devices.some((d) => (received.get(d)?.length ?? 0) < seamAppendsCount))
        await sleep(50);
      for (const device of devices)
        assert.deepEqual(received.get(device), expected, `${device} got every sequence once, in order`);
      assert.ok(appendsDuringReplay > 0, "some appends landed while a replay was under way");
      watcher.close();
      await Promise.all(
        [...live.values()].map(async ({ subscription, client }) => {
          await subscription.close();
          await client.close();
        }),
      );
    });

    test(`a backlog of ${backlogCount} replayed to a reader that stops reading stays bounded and arrives whole`, async (t) => {
      // 8 KiB entries: the whole backlog is 40 MiB of frames, which the server must never hold at once.
      const padding = "x".repeat(backlogPaddingBytes);
      await appendMany(server, ["slow"], backlogCount, "b", 16, padding, "backlog");
      const rssBefore = processRssBytes(server.pid);
      const reader = await TestSocket.open(server.url);
      t.after(() => reader.close());
      const answer = await reader.request({
        op: "inbox.subscribe",
        ns: "backlog",
        recipient: "slow",
        device: "slow",
        after: 0,
      });
      // The whole backlog is retained: a trimmed one would replay its tail after a gap, not all of it.
      assert.equal(answer.oldest, 1, `the backlog's namespace keeps all ${backlogCount} entries (maxDepth)`);
      await reader.waitFor((f) => f.op === "inbox.entry");
      // The reader stops reading: the server fills the socket and its send buffer, then pauses.
      reader.socket.pause();
      await sleep(2_000);
      const rssPaused = processRssBytes(server.pid);
      reader.socket.resume();
      const liveFrame = await reader.waitFor((f) => f.op === "inbox.live" && f.sub === answer.sub, 50_000);
      const seqs = reader
        .all("inbox.entry")
        .flatMap((f) => (f.entries as { seq: number }[]).map((e) => e.seq));
      assert.equal(liveFrame.head, backlogCount);
      assert.deepEqual(reader.all("inbox.gap"), [], "no gap: nothing of the backlog was trimmed");
      assert.deepEqual(
        seqs,
        Array.from({ length: backlogCount }, (_, i) => i + 1),
      );
      // A paused subscription holds one read's batch (800 KiB with 8 KiB entries) and the send buffer its 1 MiB mark
      // and a frame, plus what the kernel's socket buffers took: far below the 40 MiB backlog.
      const grownBytes = rssPaused - rssBefore;
      assert.ok(
        grownBytes < 20 * 1024 * 1024,
        `the server's RSS grew ${grownBytes} bytes while the reader paused`,
      );
      reader.close();
    });
  });
}

/** The resident set of a process, from /proc (Linux). */
function processRssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}
