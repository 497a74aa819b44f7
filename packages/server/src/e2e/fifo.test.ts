/**
 * FIFO queues through the real server process: four competing consumers, fifty groups, one poison
 * message. Each group is handled in send order and never two of its messages at once; the poison
 * message holds back only its own group until it is dead-lettered, and then that group resumes.
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

const groups = 50;
const perGroup = 10;
const poison = { group: 7, n: 3 };
const maxDeliveries = 3;
/** Each failed delivery of the poison message waits this long: it blocks its group ≥ 2 × this. */
const retryDelayMs = 2_000;

interface Job {
  group: number;
  n: number;
}

describe("FIFO queue end to end", () => {
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

  test("4 consumers, 50 groups: each group in send order; a poison message holds back only its group", async () => {
    // Over 80 lines: one scenario, four consumers against one FIFO queue, told step by step.
    await client.putQueue("orders-dlq", {});
    await client.putQueue("orders", {
      kind: "fifo",
      deadLetter: { queue: "orders-dlq", maxDeliveries },
      retry: { initialDelayMs: retryDelayMs, multiplier: 1, maxDelayMs: retryDelayMs, jitter: "none" },
    });
    // Round-robin over the groups, so every batch mixes them.
    const jobs: Job[] = [];
    for (let n = 0; n < perGroup; n++) for (let group = 0; group < groups; group++) jobs.push({ group, n });
    for (let i = 0; i < jobs.length; i += 100) {
      const batch = jobs.slice(i, i + 100).map((job) => ({ body: job, key: `g${job.group}` }));
      const results = await client.send("orders", batch);
      assert.ok(results.every((result) => "id" in result && !result.duplicate));
    }

    /** Every handler start, in order: the log the assertions read. */
    const started: Job[] = [];
    const runningPerGroup = new Map<number, number>();
    let overlapping = 0;
    const completed = new Set<string>();
    let allDone!: () => void;
    const finished = new Promise<void>((resolve) => {
      allDone = resolve;
    });
    const clients = Array.from({ length: 4 }, () => new HopperClient({ url: server.url }));
    const workers = clients.map((consumer) =>
      consumer.worker(
        "orders",
        async (message) => {
          const job = message.body as Job;
          started.push(job);
          const running = (runningPerGroup.get(job.group) ?? 0) + 1;
          runningPerGroup.set(job.group, running);
          if (running > 1) overlapping++;
          await delay(1);
          runningPerGroup.set(job.group, running - 1);
          if (job.group === poison.group && job.n === poison.n) throw new Error("poison");
          completed.add(`${job.group}.${job.n}`);
          if (completed.size === groups * perGroup - 1) allDone();
        },
        { concurrency: 1, waitMs: 1_000, onError: () => {} },
      ),
    );
    const timeout = new AbortController();
    const deadline = delay(60_000, undefined, { signal: timeout.signal }).then(() => {
      throw new Error(`timed out with ${completed.size} handled`);
    });
    deadline.catch(() => {});
    try {
      await Promise.race([finished, deadline]);
    } finally {
      timeout.abort();
      await Promise.all(workers.map((worker) => worker.stop()));
    }

    assert.equal(overlapping, 0, "never two messages of one group at once");
    for (let group = 0; group < groups; group++) {
      const order = started.filter((job) => job.group === group).map((job) => job.n);
      const expected = Array.from({ length: perGroup }, (_, n) => n);
      if (group === poison.group) expected.splice(poison.n, 0, poison.n, poison.n); // three deliveries
      assert.deepEqual(order, expected, `group ${group} in send order`);
    }
    // The other 49 groups finished while the poison message was still waiting out its retries.
    const resumed = started.findIndex((job) => job.group === poison.group && job.n === poison.n + 1);
    const lastOfOthers = Math.max(
      ...Array.from({ length: groups }, (_, group) =>
        group === poison.group ? -1 : started.findLastIndex((job) => job.group === group),
      ),
    );
    assert.ok(lastOfOthers < resumed, `others done at ${lastOfOthers}, poison group resumed at ${resumed}`);

    const dead = await client.peek("orders-dlq", { state: "available" });
    assert.equal(dead.length, 1);
    assert.deepEqual(dead[0]?.body, poison);
    assert.equal(dead[0]?.headers["x-dead-letter-reason"], "max_deliveries");
    assert.equal(dead[0]?.headers["x-delivery-count"], String(maxDeliveries));
    assert.equal(dead[0]?.key, `g${poison.group}`);
    const stats = (await client.getQueue("orders")).stats;
    assert.deepEqual([stats.available, stats.inFlight, stats.deadLettered], [0, 0, 1]);
  });
});
