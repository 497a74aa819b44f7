/**
 * Reads back bytes the append log placed in its segment files (a record's payload, or part of one,
 * that append's `located` or replay pointed at): what lets the state keep a body on disk and only its
 * place in memory (inbox-state.ts). One read-only descriptor per segment, opened at its first read
 * and closed when the segment is deleted or the log closes.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { segmentFileName } from "./log-format.js";

export class SegmentReads {
  private readonly fds = new Map<number, number>();

  constructor(private readonly dir: string) {}

  /** The `length` bytes at `offset` of segment `seq`; the segment must exist. */
  read(seq: number, offset: number, length: number): Buffer {
    let fd = this.fds.get(seq);
    if (fd === undefined) {
      fd = openSync(join(this.dir, segmentFileName(seq)), "r");
      this.fds.set(seq, fd);
    }
    const bytes = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const read = readSync(fd, bytes, filled, length - filled, offset + filled);
      if (read === 0)
        throw new Error(`segment ${segmentFileName(seq)} ends before offset ${offset + length}`);
      filled += read;
    }
    return bytes;
  }

  /** The segment is gone: its descriptor closes. */
  forget(seq: number): void {
    const fd = this.fds.get(seq);
    if (fd === undefined) return;
    this.fds.delete(seq);
    closeSync(fd);
  }

  close(): void {
    for (const seq of [...this.fds.keys()]) this.forget(seq);
  }
}
