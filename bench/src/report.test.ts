import assert from "node:assert/strict";
import { test } from "node:test";
import type { RunSpec } from "./options.js";
import { compareNotes, consumersVerdict } from "./report.js";
import type { RunReport } from "./run.js";
import type { ThroughputResult } from "./throughput.js";

function run(
  label: string,
  spec: RunSpec,
  endToEndPerSecond: number,
  confirmsAfterFsync: boolean,
): RunReport {
  return {
    spec,
    label,
    startedAt: "2026-11-30T00:00:00Z",
    loadAverage1m: 1,
    versions: `${label} 1.0`,
    semantics: "confirm = …",
    confirmsAfterFsync,
    throughput: { endToEndPerSecond } as ThroughputResult,
  };
}

test("the ratio is against the best peer that confirms after fsync, and also the best of all when that differs", () => {
  const lines = compareNotes([
    run("Hopper pull", { target: "hopper", store: "sqlite", consumer: "pull" }, 5000, true),
    run("Hopper push", { target: "hopper", store: "sqlite", consumer: "push" }, 6000, true),
    run("RabbitMQ", { target: "rabbitmq", queueType: "quorum" }, 12000, true),
    run("NATS", { target: "nats" }, 24000, false),
  ]);
  assert.ok(
    lines.includes(
      "- W1 end to end, Hopper's best (Hopper push, 6,000 msg/s) ÷ the best peer that confirms after fsync (RabbitMQ, 12,000 msg/s) = **0.5×**",
    ),
  );
  assert.ok(lines.some((line) => line.includes("the best peer of all (NATS, 24,000 msg/s) = **0.25×**")));
  assert.ok(lines.some((line) => line.startsWith("- NATS (confirms **before fsync**)")));
  assert.ok(
    lines.some((line) => line.includes("BEFORE fsync")),
    "the JetStream caveat is listed when it ran",
  );
});

test("a Hopper run that does not fsync is not Hopper's best", () => {
  const lines = compareNotes([
    run("Hopper os", { target: "hopper", store: "sqlite", consumer: "pull" }, 9000, false),
    run("Hopper fsync", { target: "hopper", store: "sqlite", consumer: "pull" }, 4000, true),
    run("Redis Streams", { target: "redis-streams" }, 8000, true),
  ]);
  assert.ok(lines.some((line) => line.includes("Hopper's best (Hopper fsync, 4,000 msg/s)")));
  assert.ok(!lines.some((line) => line.includes("best peer of all")));
  assert.ok(!lines.some((line) => line.includes("BEFORE fsync")));
});

test("push is weighed against pull of the same store and node count, each pair on its own lines", () => {
  const lines = consumersVerdict([
    run("SQLite", { target: "hopper", store: "sqlite", consumer: "pull" }, 12000, true),
    run("PG 1", { target: "hopper", store: "postgres", nodes: 1, consumer: "pull" }, 7000, true),
    run("PG 1 push", { target: "hopper", store: "postgres", nodes: 1, consumer: "push" }, 8000, true),
    run("PG 3", { target: "hopper", store: "postgres", nodes: 3, consumer: "pull" }, 9000, true),
    run("PG 3 push", { target: "hopper", store: "postgres", nodes: 3, consumer: "push" }, 6000, true),
  ]);
  const w1 = lines.filter((line) => line.includes("W1 end to end"));
  assert.deepEqual(w1, [
    "- PG 1: W1 end to end: push 8,000 msg/s, pull 7,000 msg/s: push ÷ pull = 1.14× (push beats pull)",
    "- PG 3: W1 end to end: push 6,000 msg/s, pull 9,000 msg/s: push ÷ pull = 0.67× (push does NOT beat pull)",
  ]);
});

test("one pair's lines need no name, and a pull run without its push twin gives none", () => {
  const pair = consumersVerdict([
    run("pull", { target: "hopper", store: "log", consumer: "pull" }, 10000, true),
    run("push", { target: "hopper", store: "log", consumer: "push" }, 20000, true),
  ]);
  assert.ok(
    pair.includes(
      "- W1 end to end: push 20,000 msg/s, pull 10,000 msg/s: push ÷ pull = 2× (push beats pull)",
    ),
  );
  const alone = consumersVerdict([
    run("SQLite", { target: "hopper", store: "sqlite", consumer: "pull" }, 12000, true),
    run("PG push", { target: "hopper", store: "postgres", nodes: 1, consumer: "push" }, 8000, true),
  ]);
  assert.deepEqual(alone, []);
});
