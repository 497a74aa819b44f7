/**
 * Damage done on purpose to a closed (or killed) SQLite store's files, for the tests and experiments
 * of docs/reliability.md: a changed run of bytes, a page overwritten, and a reading of the WAL's frame
 * headers to tell which frames it holds.
 */
import { readFileSync, writeFileSync } from "node:fs";

/** SQLite's page size as Hopper's files use it (the default). */
export const pageBytes = 4096;
/** A WAL file starts with a 32-byte header; each frame is a 24-byte header and one page. */
const walHeaderBytes = 32;
const walFrameHeaderBytes = 24;

/** Replaces every occurrence of `from` in the file by `to` (of the same length); answers how many. */
export function replaceBytes(path: string, from: string, to: string): number {
  if (Buffer.byteLength(from) !== Buffer.byteLength(to)) throw new Error("replaceBytes keeps the length");
  const bytes = readFileSync(path);
  const needle = Buffer.from(from);
  let count = 0;
  for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + needle.length)) {
    Buffer.from(to).copy(bytes, at);
    count++;
  }
  writeFileSync(path, bytes);
  return count;
}

/** Overwrites page `page` (1-based, as SQLite counts) of a database file with `fill`. */
export function overwritePage(path: string, page: number, fill: (offset: number) => number): void {
  const bytes = readFileSync(path);
  const start = (page - 1) * pageBytes;
  if (start + pageBytes > bytes.length) throw new Error(`${path} has no page ${page}`);
  for (let offset = 0; offset < pageBytes; offset++) bytes[start + offset] = fill(offset) & 0xff;
  writeFileSync(path, bytes);
}

/** Flips every bit of the byte at `offset`. */
export function flipByte(path: string, offset: number): void {
  const bytes = readFileSync(path);
  if (offset >= bytes.length) throw new Error(`${path} is ${bytes.length} bytes, shorter than ${offset + 1}`);
  bytes[offset] = (bytes[offset] as number) ^ 0xff;
  writeFileSync(path, bytes);
}

export interface WalFrame {
  /** 1-based, in file order. */
  index: number;
  /** Where the frame's header starts in the file; its page follows the 24-byte header. */
  offset: number;
  page: number;
  /** Nonzero on a commit's last frame: the database's size in pages after that commit. */
  commitSize: number;
}

/**
 * The frames of a WAL file that carry its header's salts, in order: what a recovery may replay. (A
 * restarted WAL keeps older frames with older salts past its new end; those are not listed.)
 */
export function walFrames(path: string): WalFrame[] {
  const bytes = readFileSync(path);
  if (bytes.length < walHeaderBytes) return [];
  const salt1 = bytes.readUInt32BE(16);
  const salt2 = bytes.readUInt32BE(20);
  const frames: WalFrame[] = [];
  for (
    let offset = walHeaderBytes;
    offset + walFrameHeaderBytes + pageBytes <= bytes.length;
    offset += walFrameHeaderBytes + pageBytes
  ) {
    if (bytes.readUInt32BE(offset + 8) !== salt1 || bytes.readUInt32BE(offset + 12) !== salt2) break;
    frames.push({
      index: frames.length + 1,
      offset,
      page: bytes.readUInt32BE(offset),
      commitSize: bytes.readUInt32BE(offset + 4),
    });
  }
  return frames;
}

/** Where the page image of a frame starts. */
export function framePageOffset(frame: WalFrame): number {
  return frame.offset + walFrameHeaderBytes;
}

/**
 * How many of the WAL's frames its last checkpoint copied into the database (nBackfill), as the
 * wal-index (-shm) file records it: after two 48-byte copies of its header, little-endian here as on
 * every machine Hopper runs on (the file is in the machine's byte order).
 */
export function framesCopied(shmPath: string): number {
  return readFileSync(shmPath).readUInt32LE(96);
}
