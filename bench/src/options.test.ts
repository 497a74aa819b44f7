import assert from "node:assert/strict";
import { test } from "node:test";
import { parseBenchOptions } from "./options.js";

test("compare runs every target by default, Hopper first", () => {
  const { runs } = parseBenchOptions(["compare"]);
  assert.equal(runs.length, 13);
  assert.deepEqual(runs[0], { target: "hopper", store: "sqlite", consumer: "pull" });
  assert.deepEqual(runs[1], { target: "hopper", store: "sqlite", consumer: "push" });
  assert.deepEqual(runs[2], { target: "hopper", store: "log", consumer: "pull" });
  assert.deepEqual(runs[3], { target: "hopper", store: "log", consumer: "push" });
  assert.deepEqual(runs[5], { target: "hopper", store: "postgres", nodes: 1, consumer: "push" });
  assert.ok(runs.some((run) => run.target === "rabbitmq" && run.queueType === "quorum"));
});

test("compare --hopper-client sdk,plain runs each push target with both clients, pull with the sdk", () => {
  const { runs } = parseBenchOptions([
    "compare",
    "--targets",
    "hopper-log,hopper-log-push,redis-streams",
    "--hopper-client",
    "sdk,plain",
  ]);
  assert.deepEqual(runs, [
    { target: "hopper", store: "log", consumer: "pull" },
    { target: "hopper", store: "log", consumer: "push" },
    { target: "hopper", store: "log", consumer: "push", client: "plain" },
    { target: "redis-streams" },
  ]);
  assert.throws(
    () => parseBenchOptions(["compare", "--targets", "hopper-log", "--hopper-client", "plain"]),
    /consumes by push/,
  );
  assert.throws(() => parseBenchOptions(["compare", "--hopper-client", "fast"]), /not "fast"/);
  assert.throws(() => parseBenchOptions(["queue", "--hopper-client", "plain"]), /applies to compare/);
});

test("queue --store log runs Hopper on the log store; it has one node", () => {
  assert.deepEqual(parseBenchOptions(["queue", "--store", "log", "--consumer", "push"]).runs, [
    { target: "hopper", store: "log", consumer: "push" },
  ]);
  assert.throws(
    () => parseBenchOptions(["queue", "--store", "log", "--nodes", "3"]),
    /needs --store postgres/,
  );
});

test("compare --targets runs the named targets in the given order", () => {
  const options = parseBenchOptions([
    "compare",
    "--targets",
    "bullmq, nats,rabbitmq-classic",
    "--backlog",
    "500",
  ]);
  assert.deepEqual(options.runs, [
    { target: "bullmq" },
    { target: "nats" },
    { target: "rabbitmq", queueType: "classic" },
  ]);
  assert.equal(options.backlog, 500);
});

test("compare refuses unknown and repeated targets, and the options it chooses itself", () => {
  assert.throws(() => parseBenchOptions(["compare", "--targets", "kafka"]), /not "kafka"/);
  assert.throws(() => parseBenchOptions(["compare", "--targets", "nats,nats"]), /twice/);
  assert.throws(() => parseBenchOptions(["compare", "--store", "postgres"]), /chooses its targets/);
  assert.throws(
    () => parseBenchOptions(["compare", "--targets", "nats", "--workloads", "fanout"]),
    /only on Hopper/,
  );
});

test("queue runs one broker by its compare name, without Hopper's options", () => {
  assert.deepEqual(parseBenchOptions(["queue", "--target", "redis-streams"]).runs, [
    { target: "redis-streams" },
  ]);
  assert.throws(
    () => parseBenchOptions(["queue", "--target", "nats", "--consumer", "push"]),
    /Hopper's consumer/,
  );
});

test("W2 has one consumer unless told more, within its limit", () => {
  assert.equal(parseBenchOptions(["queue"]).latencyConsumers, 1);
  assert.equal(parseBenchOptions(["queue", "--latency-consumers", "20"]).latencyConsumers, 20);
  assert.throws(() => parseBenchOptions(["queue", "--latency-consumers", "0"]), /latency-consumers/);
  assert.throws(() => parseBenchOptions(["queue", "--latency-consumers", "201"]), /latency-consumers/);
});
