/**
 * Message ids are UUIDv7 (RFC 9562): a 48-bit millisecond timestamp then random bits, so ids sort by
 * publish time. Within one millisecond a counter in the random field keeps them increasing.
 */
import type { Clock } from "./clock.js";
import { systemRandomPool } from "./random.js";

export function uuidv7Generator(clock: Clock): () => string {
  let lastMs = -1;
  let counter = 0;
  return () => {
    let ms = clock.now();
    if (ms <= lastMs) {
      ms = lastMs;
      counter++;
      // 12 bits of counter (rand_a); on overflow borrow the next millisecond, keeping ids ordered.
      if (counter > 0xfff) {
        ms = ++lastMs;
        counter = 0;
      }
    } else {
      counter = 0;
    }
    lastMs = ms;
    const bytes = systemRandomPool.bytes(16);
    bytes.writeUIntBE(ms, 0, 6);
    bytes[6] = 0x70 | (counter >>> 8);
    bytes[7] = counter & 0xff;
    bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
    const hex = bytes.toString("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
}
