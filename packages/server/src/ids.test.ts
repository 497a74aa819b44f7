import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeClock } from "./clock.js";
import { uuidv7Generator } from "./ids.js";

const uuidv7Pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The 48-bit millisecond timestamp an id carries. */
function msOf(id: string): number {
  return Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);
}

test("ids are UUIDv7: version 7, RFC variant, the clock's millisecond, random bits as drawn", () => {
  const clock = new FakeClock(Date.UTC(2026, 11, 1));
  // Random bytes 0x00, 0x11, …, 0xff: every hex digit shows up in its place.
  const next = uuidv7Generator(clock, (target) => {
    for (let i = 0; i < target.length; i++) target[i] = (i * 0x11) & 0xff;
  });
  const id = next();
  assert.match(id, uuidv7Pattern);
  assert.equal(msOf(id), clock.now());
  // Bytes 8–15 are random but for the variant's two bits (0x88 → 0x88; 0x99 …).
  assert.equal(id.slice(19), "8899-aabbccddeeff");
});

test("ids increase within one millisecond, and borrow the next one past 4,096 of them", async () => {
  const clock = new FakeClock(Date.UTC(2026, 11, 1));
  const next = uuidv7Generator(clock);
  const ids = Array.from({ length: 5_000 }, () => next());
  for (let i = 1; i < ids.length; i++) assert.ok((ids[i - 1] as string) < (ids[i] as string), `${i}`);
  assert.equal(msOf(ids[4095] as string), clock.now());
  assert.equal(msOf(ids[4096] as string), clock.now() + 1, "the counter's overflow borrows a millisecond");
  for (const id of ids) assert.match(id, uuidv7Pattern);
  // When the clock catches up, the borrowed millisecond is not given again.
  await clock.advance(1);
  const after = next();
  assert.ok((ids.at(-1) as string) < after);
});
