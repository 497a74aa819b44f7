import assert from "node:assert/strict";
import { test } from "node:test";
import type { Clock, ClockTimer, Task } from "@hopper/client";
import { limits } from "../limits.js";
import { followTask, RateEstimator } from "./redrive-wait.js";

/** A clock whose time moves only when a timer runs: each timer advances it by its own delay. */
class StepClock implements Clock {
  nowMs = 0;
  now(): number {
    return this.nowMs;
  }
  setTimeout(callback: () => void, delayMs: number): ClockTimer {
    return setImmediate(() => {
      this.nowMs += delayMs;
      callback();
    });
  }
  clearTimeout(timer: ClockTimer): void {
    clearImmediate(timer as NodeJS.Immediate);
  }
}

function task(fields: Partial<Task> = {}): Task {
  return {
    id: "t1",
    kind: "redrive",
    state: "running",
    moved: 0,
    total: 50,
    queue: "orders.dlq",
    to: null,
    ratePerSecond: 25,
    createdAt: "2026-01-01T00:00:00.000Z",
    finishedAt: null,
    ...fields,
  };
}

/** A server whose task moves `perPoll` messages between two reads, and ends when all are moved. */
function scriptedServer(perPoll: number, onRead: (reads: number) => void = () => {}) {
  let current = task();
  let reads = 0;
  const cancels: string[] = [];
  const client = {
    async getTask(id: string): Promise<Task> {
      reads += 1;
      onRead(reads);
      if (current.state === "running" || current.state === "cancelled") {
        // After a cancel, the step that was under way still completes once.
        const step = current.state === "cancelled" ? 1 : perPoll;
        const moved = Math.min(current.total, current.moved + step);
        current = { ...current, id, moved };
        if (moved === current.total && current.state === "running") current.state = "done";
      }
      return current;
    },
    async cancelTask(id: string): Promise<Task> {
      cancels.push(id);
      current = { ...current, state: "cancelled", finishedAt: "2026-01-01T00:00:01.000Z" };
      return current;
    },
  };
  return { client, cancels, reads: () => reads };
}

function output(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, progress: { isTTY, write: (text: string) => void writes.push(text) } };
}

const noInterrupts = () => () => {};

test("without a terminal, a progress line at the start, once a second, and at the end", async () => {
  const { client } = scriptedServer(5);
  const { writes, progress } = output(false);
  const clock = new StepClock();
  const result = await followTask(task(), { client, clock, progress, onInterrupt: noInterrupts });

  assert.equal(result.task.state, "done");
  assert.equal(result.interrupted, false);
  assert.equal(clock.now(), 10 * limits.cliTaskPollMs, "one read per poll, ten polls of five");
  assert.equal(limits.cliProgressLineIntervalMs, 5 * limits.cliTaskPollMs);
  assert.deepEqual(writes, [
    "redrive t1: 0/50 moved (0%), - msg/s, ETA -\n",
    "redrive t1: 25/50 moved (50%), 25.0 msg/s, ETA 1.0s\n",
    "redrive t1: 50/50 moved (100%), 25.0 msg/s, ETA 0s\n",
  ]);
});

test("on a terminal, one line redrawn with \\r at each poll, ended with a newline", async () => {
  const { client } = scriptedServer(10);
  const { writes, progress } = output(true);
  await followTask(task(), { client, clock: new StepClock(), progress, onInterrupt: noInterrupts });

  assert.equal(writes.at(-1), "\n");
  const redraws = writes.slice(0, -1);
  assert.equal(redraws.length, 6, "the start, four polls while running, the end");
  for (const text of redraws) {
    assert.ok(text.startsWith("\r") && text.endsWith("\u001b[K"), JSON.stringify(text));
    assert.ok(!text.includes("\n"));
  }
  assert.equal(redraws[2], "\r[##########--------------]  20/50  40%  50.0 msg/s  ETA 1.0s\u001b[K");
  assert.equal(redraws.at(-1), "\r[########################]  50/50  100%  50.0 msg/s  ETA 0s\u001b[K");
});

test("an interrupt cancels the task once and reports where it stopped", async () => {
  let interrupt: (() => void) | undefined;
  let unsubscribed = false;
  const onInterrupt = (handler: () => void) => {
    interrupt = handler;
    return () => {
      unsubscribed = true;
    };
  };
  // The interrupt comes while the third read is under way.
  const server = scriptedServer(5, (reads) => {
    if (reads === 3) interrupt?.();
  });
  const { writes, progress } = output(false);
  const result = await followTask(task(), {
    client: server.client,
    clock: new StepClock(),
    progress,
    onInterrupt,
  });

  assert.equal(result.interrupted, true);
  assert.deepEqual(server.cancels, ["t1"]);
  assert.equal(result.task.state, "cancelled");
  assert.equal(result.task.moved, 16, "the step under way at the cancel is counted");
  assert.equal(server.reads(), 4, "one read after the cancel, then no more");
  assert.ok(unsubscribed);
  assert.equal(writes.at(-1), "redrive t1: 16/50 moved (32%), 25.0 msg/s, ETA -\n");
});

test("a failed read rejects, and the bar's line is still ended", async () => {
  const client = {
    getTask: async (): Promise<Task> => {
      throw new Error("connection reset");
    },
    cancelTask: async () => task(),
  };
  const { writes, progress } = output(true);
  await assert.rejects(
    followTask(task(), { client, clock: new StepClock(), progress, onInterrupt: noInterrupts }),
    /connection reset/,
  );
  assert.equal(writes.at(-1), "\n");
});

test("RateEstimator measures over the last five seconds and has no rate from one sample", () => {
  const rate = new RateEstimator();
  rate.record(0, 0);
  assert.deepEqual(rate.estimate({ moved: 0, total: 100 }), { ratePerSecond: null, etaMs: null });
  rate.record(1_000, 50);
  assert.deepEqual(rate.estimate({ moved: 50, total: 100 }), { ratePerSecond: 50, etaMs: 1_000 });
  // A stall: after five seconds without progress the early burst no longer counts.
  for (let atMs = 2_000; atMs <= 7_000; atMs += 1_000) rate.record(atMs, 50);
  assert.deepEqual(rate.estimate({ moved: 50, total: 100 }), { ratePerSecond: 0, etaMs: null });
});
