/**
 * Message ids are UUIDv7 (RFC 9562): a 48-bit millisecond timestamp then random bits, so ids sort by
 * publish time. Within one millisecond a counter in the random field keeps them increasing.
 */
import type { Clock } from "./clock.js";
import { systemRandomPool } from "./random.js";

/** Each byte's two lowercase hex digits, as character codes. */
const hexDigits = "0123456789abcdef";
const highDigit = Uint8Array.from({ length: 256 }, (_, byte) => hexDigits.charCodeAt(byte >> 4));
const lowDigit = Uint8Array.from({ length: 256 }, (_, byte) => hexDigits.charCodeAt(byte & 15));
const dash = 0x2d;

export function uuidv7Generator(
  clock: Clock,
  fill: (target: Buffer) => void = (target) => systemRandomPool.fill(target),
): () => string {
  let lastMs = -1;
  let counter = 0;
  // The id's bytes and its text are written into the same two buffers every time: one string is made
  // per id, by one copy out of `text` (half the cost of hex-encoding a Buffer, then slicing and joining).
  const bytes = Buffer.alloc(16);
  const text = Buffer.alloc(36);
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
    fill(bytes);
    bytes.writeUIntBE(ms, 0, 6);
    bytes[6] = 0x70 | (counter >>> 8);
    bytes[7] = counter & 0xff;
    bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f);
    // 8-4-4-4-12 hex digits: a dash before bytes 4, 6, 8 and 10.
    let at = 0;
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) text[at++] = dash;
      const byte = bytes[i] as number;
      text[at++] = highDigit[byte] as number;
      text[at++] = lowDigit[byte] as number;
    }
    return text.toString("latin1");
  };
}
