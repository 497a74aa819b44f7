import assert from "node:assert/strict";
import { test } from "node:test";
import { RandomPool } from "./random.js";

test("the random pool hands out fresh bytes across refills, never the same bytes twice", () => {
  const pool = new RandomPool(64);
  const draws = Array.from({ length: 200 }, () => pool.bytes(16).toString("hex"));
  assert.equal(new Set(draws).size, 200, "no 16-byte draw repeats");
  const tokens = Array.from({ length: 200 }, () => pool.uint48());
  assert.equal(new Set(tokens).size, 200);
  assert.ok(tokens.every((token) => Number.isSafeInteger(token) && token >= 0 && token < 2 ** 48));
});
