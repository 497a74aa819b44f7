import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperError } from "@hopper/client";
import { backoffDelayMs } from "./backoff.js";
import { outboxLimits } from "./limits.js";
import { classifyItemError, classifyRequestError } from "./publish-errors.js";

test("full jitter: a uniform draw under a ceiling that doubles per attempt, up to the cap", () => {
  const top = () => 0.999999;
  assert.equal(backoffDelayMs(1, top, undefined, { baseMs: 100, maxMs: 10_000 }), 99);
  assert.equal(backoffDelayMs(3, top, undefined, { baseMs: 100, maxMs: 10_000 }), 399);
  assert.equal(backoffDelayMs(20, top, undefined, { baseMs: 100, maxMs: 10_000 }), 9999);
  assert.equal(backoffDelayMs(500, top, undefined), outboxLimits.backoffMaxMs - 1);
  assert.equal(
    backoffDelayMs(5, () => 0, undefined),
    0,
  );
});

test("a Retry-After is a floor, itself capped", () => {
  assert.equal(
    backoffDelayMs(1, () => 0, 1000),
    1000,
  );
  assert.equal(
    backoffDelayMs(1, () => 0, 10 * 3600_000),
    outboxLimits.retryAfterMsMax,
  );
});

test("errors are classified as the outbox promises", () => {
  const error = (code: string, status: number) => new HopperError({ code, message: code, status });
  assert.equal(classifyRequestError(error("network_error", 0)), "retry");
  assert.equal(classifyRequestError(error("timeout", 0)), "retry");
  assert.equal(classifyRequestError(error("backpressure", 429)), "retry");
  assert.equal(classifyRequestError(error("queue_full", 429)), "retry");
  assert.equal(classifyRequestError(error("unavailable", 503)), "retry");
  assert.equal(classifyRequestError(error("internal", 500)), "retry");
  assert.equal(classifyRequestError(error("unauthorized", 401)), "pause");
  assert.equal(classifyRequestError(error("forbidden", 403)), "pause");
  assert.equal(classifyRequestError(error("queue_not_found", 404)), "pause");
  assert.equal(classifyRequestError(error("exchange_not_found", 404)), "pause");
  assert.equal(classifyRequestError(error("invalid_request", 400)), "reject");
  assert.equal(classifyRequestError(error("request_too_large", 413)), "reject");
  assert.equal(classifyRequestError(new Error("socket hang up")), "retry");
  assert.equal(classifyItemError("message_too_large"), "reject");
  assert.equal(classifyItemError("unroutable"), "reject");
  assert.equal(classifyItemError("queue_not_found"), "pause");
});
