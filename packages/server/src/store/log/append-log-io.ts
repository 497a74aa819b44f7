/**
 * The append log's two file operations on the write path, a positional write and an fdatasync, as an
 * interface that tests replace to count, delay or fail them, and as the real operations (fileIo).
 */
import { fdatasync as fdatasyncCallback, fdatasyncSync, writevSync } from "node:fs";
import { promisify } from "node:util";
import { type SegmentFile, totalBytes } from "./log-format.js";

/** The two file operations on the write path, injectable so tests can count, delay or fail them. */
export interface AppendLogIo {
  /** Writes all of `buffers` at `position` with one positional writev. */
  write(file: SegmentFile, buffers: readonly Buffer[], position: number): Promise<void>;
  /** fdatasync. */
  sync(file: SegmentFile): Promise<void>;
  /** fdatasync while the log opens, before anything else runs (recovery's, of the newest segment). */
  syncAtOpen(fd: number): void;
}

const fdatasyncAsync = promisify(fdatasyncCallback);

/**
 * The real file operations. The write is made on the calling thread: it copies the batch into the page
 * cache, tens of microseconds, and on libuv's thread pool it would end only when a busy event loop next
 * came round. The fdatasync, which waits for the disk (a fifth of the event loop's time in W1 when it
 * was made here), runs on the thread pool, so the event loop goes on reading and applying the next calls
 * meanwhile; their records make the next batch, written once this one is durable (invariant 2). Both
 * steps on the thread pool, and both on the calling thread, were measured worse (docs/log-store.md).
 */
export const fileIo: AppendLogIo = {
  async write(file, buffers, position) {
    let pending = buffers;
    let at = position;
    // A positional writev may write less than asked (a signal, a huge batch): write the rest.
    for (;;) {
      const expected = totalBytes(pending);
      const written = writevSync(file.fd, pending as Buffer[], at);
      if (written === expected) return;
      if (written <= 0) throw new Error(`short write to ${file.fileName}: ${written} of ${expected} bytes`);
      pending = dropBytes(pending, written);
      at += written;
    }
  },
  sync(file) {
    return fdatasyncAsync(file.fd);
  },
  syncAtOpen(fd) {
    fdatasyncSync(fd);
  },
};

/** The buffers without their first `count` bytes. */
function dropBytes(buffers: readonly Buffer[], count: number): Buffer[] {
  const rest: Buffer[] = [];
  let skip = count;
  for (const buffer of buffers) {
    if (skip >= buffer.length) {
      skip -= buffer.length;
      continue;
    }
    rest.push(skip > 0 ? buffer.subarray(skip) : buffer);
    skip = 0;
  }
  return rest;
}
