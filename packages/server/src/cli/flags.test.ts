import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperError } from "@hopper/client";
import { CommanderError, InvalidArgumentError } from "commander";
import {
  boundFlag,
  durationFlag,
  exitCodes,
  headerFlag,
  integerFlag,
  positiveNumberFlag,
  reportFailure,
  UsageError,
} from "./flags.js";
import { attributesFromFlags } from "./queue-commands.js";

test("durationFlag parses durations and refuses anything else as a commander argument error", () => {
  assert.equal(durationFlag("45s"), 45_000);
  assert.equal(durationFlag("4d"), 345_600_000);
  assert.throws(() => durationFlag("45 seconds"), InvalidArgumentError);
});

test("integerFlag takes whole numbers of at least its minimum", () => {
  const parse = integerFlag(1);
  assert.equal(parse("100"), 100);
  for (const text of ["0", "-1", "1.5", "ten", "", "1e3"]) {
    assert.throws(() => parse(text), InvalidArgumentError, text);
  }
});

test("positiveNumberFlag takes numbers above 0, fractions too", () => {
  assert.equal(positiveNumberFlag("50"), 50);
  assert.equal(positiveNumberFlag("0.5"), 0.5);
  for (const text of ["0", "-1", "1e3", "fast", "", "Infinity"]) {
    assert.throws(() => positiveNumberFlag(text), InvalidArgumentError, text);
  }
});

test("boundFlag takes a whole number of at least 1, or none for no bound", () => {
  assert.equal(boundFlag("1000"), 1000);
  assert.equal(boundFlag("none"), "none");
  for (const text of ["0", "1.5", "unlimited"]) {
    assert.throws(() => boundFlag(text), InvalidArgumentError, text);
  }
});

test("headerFlag collects repeated name=value pairs, splitting at the first =", () => {
  const first = headerFlag("a=1");
  assert.deepEqual(headerFlag("b=x=y", first), { a: "1", b: "x=y" });
  assert.deepEqual(headerFlag("empty="), { empty: "" });
  assert.throws(() => headerFlag("novalue"), InvalidArgumentError);
  assert.throws(() => headerFlag("=value"), InvalidArgumentError);
});

test("attributesFromFlags sends only what was given", () => {
  assert.deepEqual(attributesFromFlags({}), {});
  assert.deepEqual(attributesFromFlags({ visibilityTimeout: 45_000, deadLetter: "dlq", maxDeliveries: 3 }), {
    visibilityTimeoutMs: 45_000,
    deadLetter: { queue: "dlq", maxDeliveries: 3 },
  });
  assert.deepEqual(
    attributesFromFlags({
      fifo: true,
      maxDepth: "none",
      overflow: "drop-oldest",
      dedupWindow: 0,
      contentBasedDedup: false,
    }),
    { kind: "fifo", maxDepth: null, overflow: "drop-oldest", dedupWindowMs: 0, contentBasedDedup: false },
  );
  assert.deepEqual(attributesFromFlags({ fifo: false }), {}, "no --fifo leaves the kind as it is");
  assert.throws(() => attributesFromFlags({ deadLetter: "dlq" }), UsageError);
  assert.throws(() => attributesFromFlags({ maxDeliveries: 3 }), UsageError);
});

test("reportFailure: usage errors exit 2, broker errors 1, help 0", (context) => {
  const printed: unknown[] = [];
  context.mock.method(console, "error", (...args: unknown[]) => printed.push(args.join(" ")));
  assert.equal(reportFailure(new UsageError("bad")), exitCodes.usage);
  const notFound = new HopperError({
    code: "queue_not_found",
    message: "Queue x does not exist.",
    status: 404,
  });
  assert.equal(reportFailure(notFound), exitCodes.failure);
  assert.equal(reportFailure(new CommanderError(1, "commander.unknownOption", "x")), exitCodes.usage);
  assert.equal(reportFailure(new CommanderError(0, "commander.helpDisplayed", "x")), exitCodes.ok);
  assert.deepEqual(printed, ["error: bad", "error queue_not_found: Queue x does not exist."]);
});
