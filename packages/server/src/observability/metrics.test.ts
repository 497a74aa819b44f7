import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ExchangeBroker } from "../broker/exchanges.js";
import { QueueBroker } from "../broker/queues.js";
import { FakeClock } from "../clock.js";
import { limits } from "../limits.js";
import { seededRandom } from "../random.js";
import { LogStore } from "../store/log/log-store.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { checkpointed } from "../testing/checkpoints.js";
import { Metrics } from "./metrics.js";

const silent = { info() {}, warn() {}, error() {} };

/** The value of the sample `name` (with its labels as written) in Prometheus text, or undefined. */
function sample(text: string, name: string): number | undefined {
  const line = text.split("\n").find((row) => row.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/** Runs `check` with a started broker over `store` and its Metrics; stops both after. */
async function withMetrics(
  store: SqliteStore | LogStore,
  check: (broker: QueueBroker, metrics: Metrics) => Promise<void>,
): Promise<void> {
  const clock = new FakeClock();
  const broker = new QueueBroker(store, clock, seededRandom(3), silent);
  await broker.start();
  try {
    const exchanges = new ExchangeBroker(store, clock, broker.router, broker);
    await check(broker, new Metrics(broker, exchanges, store));
  } finally {
    broker.stop();
    await store.close();
  }
}

test("a scrape reports each queue's depth by state and counters, and the store's commits and checkpoints", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-metrics-"));
  const store = new SqliteStore({ path: join(dir, "hopper.db"), random: seededRandom(3) });
  try {
    await withMetrics(store, async (broker, metrics) => {
      await broker.putQueue("q", {});
      const body = Buffer.alloc(1000, 120);
      for (let i = 0; i < 30; i++) {
        await broker.send(
          "q",
          Array.from({ length: 100 }, () => ({ body, contentType: "application/octet-stream" })),
        );
      }
      const [leased] = await broker.receive("q", { max: 1 });
      assert.ok(leased);
      // 3,000 rows of 1 KB are about 1,000 WAL pages: wait for the checkpoint thread to copy them.
      await checkpointed(store, 500);
      const text = await metrics.render();
      assert.equal(sample(text, 'hopper_queue_depth{queue="q",state="available"}'), 2999);
      assert.equal(sample(text, 'hopper_queue_depth{queue="q",state="in_flight"}'), 1);
      assert.equal(sample(text, 'hopper_queue_messages_total{queue="q",event="published"}'), 3000);
      assert.equal(sample(text, 'hopper_queue_messages_total{queue="q",event="delivered"}'), 1);
      assert.equal(sample(text, "hopper_store_commits_total"), store.commitStats.commits);
      const frames = sample(text, "hopper_store_checkpoint_frames_total") ?? 0;
      assert.ok(frames >= 500, `checkpoint frames: ${frames}`);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a scrape on the log store reports its flushes as commits, and no checkpoints (it has none)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-metrics-"));
  const store = LogStore.open({ dir, random: seededRandom(3) });
  try {
    await withMetrics(store, async (broker, metrics) => {
      await broker.putQueue("q", {});
      await broker.send("q", [{ body: Buffer.from("x"), contentType: "text/plain" }]);
      const text = await metrics.render();
      const commits = sample(text, "hopper_store_commits_total") ?? 0;
      assert.ok(commits >= 2, `commits: ${commits}`);
      assert.equal(commits, store.commitStats.commits);
      assert.ok((sample(text, "hopper_store_commit_jobs_total") ?? 0) >= commits);
      assert.equal(sample(text, "hopper_store_checkpoint_frames_total"), undefined);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a scrape of more queues than one turn's page lists every queue once per series and lets the event loop run between pages", async () => {
  const store = new SqliteStore({ path: ":memory:", random: seededRandom(4) });
  await withMetrics(store, async (broker, metrics) => {
    const pages = 3;
    const count = limits.listQueuesPerTurn * (pages - 1) + 1;
    const names = Array.from({ length: count }, (_, i) => `q-${String(i).padStart(5, "0")}`);
    await Promise.all(names.map((name) => broker.putQueue(name, {})));
    const body = Buffer.from("x");
    await broker.send("q-00001", [
      { body, contentType: "text/plain" },
      { body, contentType: "text/plain" },
    ]);

    // Turns of the event loop that run while the scrape is under way (the store answers without I/O,
    // so a scrape that never yielded would let none run).
    let turns = 0;
    let scraping = true;
    const tick = () => {
      if (!scraping) return;
      turns++;
      setImmediate(tick);
    };
    setImmediate(tick);
    const text = await metrics.render();
    scraping = false;
    assert.ok(turns >= pages - 1, `the event loop ran ${turns} times during a scrape of ${pages} pages`);

    const series = (family: string) => text.split("\n").filter((line) => line.startsWith(`${family}{`));
    assert.equal(series("hopper_queue_messages_total").length, count * 10);
    assert.equal(series("hopper_queue_depth").length, count * 3);
    const ages = series("hopper_queue_oldest_message_age_seconds");
    assert.deepEqual(
      ages.map((line) => line.slice(line.indexOf('"') + 1, line.lastIndexOf('"'))),
      names,
      "each queue once, in name order",
    );
    assert.equal(series("hopper_queue_consumers").length, count);
    assert.deepEqual(
      (await broker.listQueues()).map(({ name }) => name),
      names,
      "the listing (GET /v1/queues) reads the same pages",
    );
    assert.equal(sample(text, 'hopper_queue_depth{queue="q-00001",state="available"}'), 2);
    assert.equal(sample(text, 'hopper_queue_messages_total{queue="q-00001",event="published"}'), 2);
    assert.equal(sample(text, 'hopper_queue_depth{queue="q-00002",state="available"}'), 0);
    for (const family of ["hopper_queue_messages_total", "hopper_queue_depth", "hopper_queue_consumers"]) {
      const lines = text.split("\n");
      assert.equal(lines.filter((line) => line.startsWith(`# HELP ${family} `)).length, 1, family);
      assert.equal(lines.filter((line) => line.startsWith(`# TYPE ${family} `)).length, 1, family);
    }
  });
});
