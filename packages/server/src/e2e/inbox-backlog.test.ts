/**
 * The requirement, at its size: "a backlog of 100,000 replays with flow control (a full send
 * buffer pauses the subscription and it resumes from the store), never buffered whole and never
 * dropped". The backlog is seeded into the store in this process (appending 100,000 over HTTP takes
 * half a minute per store; in process, with the OS flushing, a few seconds), then the real server
 * process opens that store and replays it over the WebSocket to a reader that stops reading twice:
 * from before its subscribe, and once a third of the backlog has come. The reader must get every
 * sequence once, in order, with no gap, and the server's RSS must stay bounded while it is paused.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { InboxBroker } from "../broker/inboxes.js";
import { systemClock } from "../clock.js";
import { systemRandom } from "../random.js";
import { LogStore } from "../store/log/log-store.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { e2eStores } from "../testing/e2e-stores.js";
import { type ServerProcessOptions, startServerProcess } from "../testing/server-process.js";
import { TestSocket } from "../testing/ws-test-client.js";

const backlogCount = Number(process.env.HOPPER_TEST_BACKLOG_LARGE ?? 100_000);
/** A chat entry's size: the body `{"i":…,"padding":"…"}` is about 200 bytes. */
const paddingBytes = 180;
/** Appends in flight while seeding: the store's group commit takes them a batch at a time. */
const seedAppendsInFlight = 256;
/** How long the reader stops reading, each of the two times. */
const pauseMs = 2_500;
/**
 * The server's RSS growth while the reader is paused from the start. The backlog is about 30 MiB of
 * frames. A paused subscription holds one read's batch (100 entries, 20 KiB) and the send buffer its
 * 1 MiB high mark and a frame; but before the send buffer fills, the loopback's socket buffers (several
 * MiB each way, outside the RSS) take about a third of the backlog, and replaying that leaves garbage
 * the heap keeps: measured 25 MiB, flat for the rest of the pause. With the pause switched off the
 * server grew 40 MiB within 2 s of pause and 100 MiB within 5 s (2 cores, loaded).
 */
const rssGrowthBytesMax = 40 * 1024 * 1024;
/** The replay of 100,000 entries takes a few seconds on two cores; this bounds a stuck one. */
const liveWaitMs = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Opens the store the server process will serve, in this process; undefined for PostgreSQL. */
function openSeedStore(options: ServerProcessOptions): SqliteStore | LogStore | undefined {
  if (options.dataFile !== undefined) {
    return new SqliteStore({ path: options.dataFile, durability: "os", random: systemRandom });
  }
  if (options.store?.startsWith("log:")) {
    return LogStore.open({ dir: options.store.slice("log:".length), durability: "os", random: systemRandom });
  }
  return undefined;
}

/** Appends `count` entries to recipient `slow` of namespace `backlog`, then closes the store. */
async function seed(store: SqliteStore | LogStore, count: number): Promise<void> {
  const broker = new InboxBroker(store, systemClock, systemRandom);
  await broker.putInbox("backlog", { maxDepth: 1_000_000 });
  const padding = "x".repeat(paddingBytes);
  let next = 1;
  await Promise.all(
    Array.from({ length: seedAppendsInFlight }, async () => {
      while (next <= count) {
        const i = next++;
        await broker.append("backlog", {
          recipients: ["slow"],
          message: { id: `b${i}`, body: { i, padding } },
        });
      }
    }),
  );
  broker.stop();
  // A log compacted into a snapshot opens in a few seconds; 100,000 append records take four times longer.
  if (store instanceof LogStore) await store.compact();
  await store.close();
}

/** The highest RSS of process `pid` over `pauseMs`, sampled every 100 ms. */
async function pausedRssMax(pid: number): Promise<number> {
  let max = 0;
  const until = Date.now() + pauseMs;
  while (Date.now() < until) {
    await sleep(100);
    max = Math.max(max, processRssBytes(pid));
  }
  return max;
}

/** The resident set of a process, from /proc (Linux). */
function processRssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

/** Why a store is not tested here. */
function skipOf(store: (typeof e2eStores)[number]): string | undefined {
  if (store.skip) return store.skip;
  if (store.name === "PostgreSQL")
    return "the backlog is seeded in process into an SQLite file or a log directory";
  return undefined;
}

for (const store of e2eStores) {
  describe(`a large inbox backlog on ${store.name}`, { skip: skipOf(store) }, () => {
    test(`a backlog of ${backlogCount} replays to a reader that stops reading: whole, once, in order, bounded`, async (t) => {
      const opened = await store.open("inbox_backlog");
      const seedStore = openSeedStore(opened.options);
      assert.ok(seedStore, "an embedded store");
      const seededAt = Date.now();
      await seed(seedStore, backlogCount);
      const seedMs = Date.now() - seededAt;
      // Replaying 100,000 entries' records takes seconds on a busy machine.
      const server = await startServerProcess({ ...opened.options, startTimeoutMs: 60_000 });
      const reader = await TestSocket.open(server.url);
      try {
        const rssBefore = processRssBytes(server.pid);
        const subscribedAt = Date.now();
        // The first pause starts before the subscribe: the server replays into a socket nobody reads.
        reader.socket.pause();
        reader.send({
          op: "inbox.subscribe",
          ref: "s",
          ns: "backlog",
          recipient: "slow",
          device: "slow",
          after: 0,
        });
        const rssPausedMax = await pausedRssMax(server.pid);
        reader.socket.resume();
        const answer = await reader.waitFor((f) => f.ref === "s", liveWaitMs);
        assert.equal(answer.op, "inbox.subscribed");
        assert.equal(answer.oldest, 1, "every entry is retained");
        assert.equal(answer.head, backlogCount);
        // The second pause, once a third of the backlog has come.
        const third = Math.floor(backlogCount / 3);
        await reader.waitFor(
          (f) => f.op === "inbox.entry" && (f.entries as { seq: number }[]).some((e) => e.seq >= third),
          liveWaitMs,
        );
        reader.socket.pause();
        await sleep(pauseMs);
        reader.socket.resume();
        const liveFrame = await reader.waitFor(
          (f) => f.op === "inbox.live" && f.sub === answer.sub,
          liveWaitMs,
        );
        const replayMs = Date.now() - subscribedAt;
        const entryFrames = reader.all("inbox.entry");
        const seqs = entryFrames.flatMap((f) => (f.entries as { seq: number }[]).map((e) => e.seq));
        assert.equal(liveFrame.head, backlogCount);
        assert.deepEqual(reader.all("inbox.gap"), [], "no gap");
        assert.equal(seqs.length, backlogCount, "every entry once");
        const outOfOrder = seqs.findIndex((seq, i) => seq !== i + 1);
        assert.equal(outOfOrder, -1, `entry ${outOfOrder} is seq ${seqs[outOfOrder]}, not ${outOfOrder + 1}`);
        const grownBytes = rssPausedMax - rssBefore;
        t.diagnostic(
          `seeded ${backlogCount} in ${seedMs} ms; replayed in ${replayMs} ms (with ${2 * pauseMs} ms paused) ` +
            `in ${entryFrames.length} frames; server RSS ${Math.round(rssBefore / 2 ** 20)} MiB before, ` +
            `grew at most ${(grownBytes / 2 ** 20).toFixed(1)} MiB in the first pause`,
        );
        assert.ok(
          grownBytes < rssGrowthBytesMax,
          `the server's RSS grew ${grownBytes} bytes while the reader paused`,
        );
      } finally {
        reader.close();
        await server.stop();
        await opened.close();
      }
    });
  });
}
