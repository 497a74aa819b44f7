/**
 * UUIDv7 ids for outbox rows (RFC 9562 §5.7): a 48-bit big-endian Unix timestamp in milliseconds, the
 * version 7, 74 random bits and the variant 10. Ids made in a later millisecond sort after earlier ones,
 * so a row's id says roughly when it was written. Within one millisecond the order is random: the
 * outbox orders rows by their sequence number, never by id.
 *
 *    0                   1                   2                   3
 *   |          unix_ts_ms (48 bits)         |ver|  rand_a (12) |var| rand_b (62 bits) ... |
 */

import { randomFillSync } from "node:crypto";
import { systemClock } from "./clock.js";

export function uuid7(nowMs: number = systemClock.now()): string {
  const bytes = new Uint8Array(16);
  randomFillSync(bytes, 6);
  // 48-bit timestamp, big-endian; `/ 2 ** n` rather than shifts, which are 32-bit in JavaScript.
  let ms = Math.floor(nowMs);
  for (let index = 5; index >= 0; index--) {
    bytes[index] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The millisecond timestamp a UUIDv7 carries. */
export function uuid7Time(id: string): number {
  return Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);
}
