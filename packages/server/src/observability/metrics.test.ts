import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ExchangeBroker } from "../broker/exchanges.js";
import { QueueBroker } from "../broker/queues.js";
import { FakeClock } from "../clock.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { checkpointed } from "../testing/checkpoints.js";
import { Metrics } from "./metrics.js";

const silent = { info() {}, warn() {}, error() {} };

/** The value of the sample `name` (with its labels as written) in Prometheus text, or undefined. */
function sample(text: string, name: string): number | undefined {
  const line = text.split("\n").find((row) => row.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

test("a scrape reports each queue's depth by state and counters, and the store's commits and checkpoints", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-metrics-"));
  const store = new SqliteStore({ path: join(dir, "hopper.db"), random: seededRandom(3) });
  const clock = new FakeClock();
  const broker = new QueueBroker(store, clock, seededRandom(3), silent);
  await broker.start();
  try {
    const exchanges = new ExchangeBroker(store, clock, broker.router, broker);
    const metrics = new Metrics(broker, exchanges, store);
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
  } finally {
    broker.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
