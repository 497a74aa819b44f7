import assert from "node:assert/strict";
import { test } from "node:test";
import { uuid7, uuid7Time } from "./uuid7.js";

test("a UUIDv7 has version 7, the RFC 4122 variant and the timestamp it was made at", () => {
  const at = Date.UTC(2026, 11, 1, 12, 30, 45, 123);
  const id = uuid7(at);
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(uuid7Time(id), at);
});

test("ids of later milliseconds sort after earlier ones, and none repeat", () => {
  const ids: string[] = [];
  const start = 1_700_000_000_000;
  for (let offset = 0; offset < 1000; offset++) ids.push(uuid7(start + offset));
  assert.deepEqual([...ids].sort(), ids);
  const same = new Set(Array.from({ length: 10_000 }, () => uuid7(start)));
  assert.equal(same.size, 10_000);
});

test("the largest 48-bit timestamp is encoded whole", () => {
  const max = 2 ** 48 - 1;
  assert.equal(uuid7Time(uuid7(max)), max);
  assert.ok(uuid7(max).startsWith("ffffffff-ffff-7"));
});
