import assert from "node:assert/strict";
import { test } from "node:test";
import { seededRandom } from "../random.js";
import { retryDelayMs } from "./queue-attributes.js";

const policy = { initialDelayMs: 1_000, multiplier: 2, maxDelayMs: 900_000, jitter: "full" as const };

test("full jitter draws from [0, min(cap, initial × multiplierⁿ)]", () => {
  const random = seededRandom(3);
  for (const [deliveryCount, ceiling] of [
    [1, 1_000],
    [2, 2_000],
    [4, 8_000],
    [30, 900_000],
  ] as const) {
    const draws = Array.from({ length: 2_000 }, () => retryDelayMs(policy, deliveryCount, random.float));
    assert.ok(Math.min(...draws) >= 0);
    assert.ok(
      Math.max(...draws) <= ceiling,
      `delivery ${deliveryCount}: max ${Math.max(...draws)} > ${ceiling}`,
    );
    // Spread over the range, not stuck at one end: the mean of a uniform draw is about half the ceiling.
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    assert.ok(Math.abs(mean - ceiling / 2) < ceiling * 0.05, `delivery ${deliveryCount}: mean ${mean}`);
  }
});

test("without jitter the delay is the exponential ceiling", () => {
  const none = { ...policy, jitter: "none" as const };
  assert.deepEqual(
    [1, 2, 3, 11, 12].map((n) => retryDelayMs(none, n, () => 0.5)),
    [1_000, 2_000, 4_000, 900_000, 900_000],
  );
});
