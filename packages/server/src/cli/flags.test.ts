import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperError } from "@hopper/client";
import { CommanderError, InvalidArgumentError } from "commander";
import { durationFlag, exitCodes, headerFlag, integerFlag, reportFailure, UsageError } from "./flags.js";
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
