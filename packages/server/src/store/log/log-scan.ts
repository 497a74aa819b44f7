/**
 * Reading a segment file of the append log (format in log-format.ts) and telling, when a frame fails
 * its check, whether the damage is an unfinished last write or damage to bytes that were written.
 * Read-only: recovery (log-recovery.ts), `hopper log verify` and `hopper log salvage` (log-salvage.ts)
 * decide what to do with what this finds.
 */
import { readSync } from "node:fs";
import { limits } from "../../limits.js";
import {
  decodeFrameHeader,
  frameHeaderBytes,
  frameKind,
  payloadCrc,
  segmentHeaderBytes,
} from "./log-format.js";

/** The unit a disk writes whole: an unfinished write leaves each such aligned block either written or
 * zero (never stale data: a segment only grows), so a zero block is what "not written" looks like. A
 * fact of the disk that recovery's reading of the format rests on, so it stays here, not in limits.ts. */
export const diskBlockBytes = 512;
const frameMagicBytes = Buffer.from([0xb7, 0x1e]);

/** Reads a file in chunks; a chunk is never reused, so views handed out stay valid. */
export class SegmentReader {
  private chunk = Buffer.alloc(0);
  private chunkStart = 0;

  constructor(
    private readonly fd: number,
    readonly fileBytes: number,
  ) {}

  /** The bytes [position, position + length), which the caller knows lie inside the file. */
  bytesAt(position: number, length: number): Buffer {
    const end = position + length;
    if (position < this.chunkStart || end > this.chunkStart + this.chunk.length) {
      const chunkBytes = Math.min(Math.max(limits.logReadChunkBytes, length), this.fileBytes - position);
      this.chunk = Buffer.allocUnsafe(chunkBytes);
      this.chunkStart = position;
      let filled = 0;
      while (filled < chunkBytes) {
        const read = readSync(this.fd, this.chunk, filled, chunkBytes - filled, position + filled);
        if (read === 0)
          throw new Error(`a segment file shrank while it was read, at offset ${position + filled}`);
        filled += read;
      }
    }
    return this.chunk.subarray(position - this.chunkStart, end - this.chunkStart);
  }

  /** Whether every byte of [from, to) is zero. */
  allZero(from: number, to: number): boolean {
    for (let at = from; at < to; at += limits.logReadChunkBytes) {
      const bytes = this.bytesAt(at, Math.min(limits.logReadChunkBytes, to - at));
      for (const byte of bytes) if (byte !== 0) return false;
    }
    return true;
  }
}

/** A frame whose header and payload both pass their checks. */
export interface IntactFrame {
  offset: number;
  end: number;
  kind: number;
  batchEnd: boolean;
  payload: Buffer;
}

type FrameRead =
  | { kind: "intact"; frame: IntactFrame }
  /** Fewer bytes left than a frame header, or an intact header whose payload passes the end. */
  | { kind: "runs past the end"; reason: string }
  | { kind: "bad"; reason: string };

/** The frame at `offset`, checked. */
export function readFrame(reader: SegmentReader, offset: number): FrameRead {
  const left = reader.fileBytes - offset;
  if (left < frameHeaderBytes)
    return { kind: "runs past the end", reason: `${left} bytes at the end, fewer than a frame header` };
  const header = decodeFrameHeader(reader.bytesAt(offset, frameHeaderBytes), 0);
  if (header === undefined) return { kind: "bad", reason: "a frame header fails its check" };
  const end = offset + frameHeaderBytes + header.length;
  if (end > reader.fileBytes)
    return {
      kind: "runs past the end",
      reason: `a record of ${header.length} bytes runs past the end of the file`,
    };
  const payload = reader.bytesAt(offset + frameHeaderBytes, header.length);
  if (header.kind === frameKind.record && payloadCrc(payload) !== header.payloadCrc)
    return { kind: "bad", reason: "a record's payload fails its CRC" };
  return { kind: "intact", frame: { offset, end, kind: header.kind, batchEnd: header.batchEnd, payload } };
}

/** The first intact frame starting after `from`, found by its magic bytes; undefined if none. */
export function nextIntactFrame(reader: SegmentReader, from: number): IntactFrame | undefined {
  let position = from;
  while (position + frameHeaderBytes <= reader.fileBytes) {
    const window = reader.bytesAt(position, Math.min(limits.logReadChunkBytes, reader.fileBytes - position));
    const found = window.indexOf(frameMagicBytes);
    if (found < 0) {
      // The magic may straddle two windows: look again from the window's last byte.
      position += Math.max(1, window.length - 1);
      continue;
    }
    const read = readFrame(reader, position + found);
    if (read.kind === "intact") return read.frame;
    position += found + 1;
  }
  return undefined;
}

/** What lies between the end of the last complete batch and the end of a segment that failed. */
export interface TailDamage {
  /** Where the first frame that failed starts (the end of the file when the last batch is whole but has
   * no batch end). */
  offset: number;
  reason: string;
  /** The end of the last complete batch: a cut keeps the bytes before it. */
  tailStart: number;
  tailBytes: number;
  /** Intact records in the tail, before and after the damage: what a cut would drop. */
  tailRecords: number;
  /** Intact batch ends after the damage, except one that ends the file: each is a batch that was
   * written after the damaged one. */
  batchEndsAfter: number;
  /** Every region that fails either runs past the end of the file or holds a zero disk block: what an
   * unfinished write leaves, and what a flipped bit or a lost length never does. */
  looksUnfinished: boolean;
}

/** A segment read frame by frame, as far as its frames check. */
export interface SegmentScan {
  /** Complete batches: the records of each were handed to onBatch. */
  batches: number;
  records: number;
  /** The end of the last complete batch (of the snapshot marker, in a base). */
  completeEnd: number;
  /** The end of the snapshot marker, when one was read. */
  markerEnd?: number;
  damage?: TailDamage;
}

/**
 * Reads the frames of a segment after its header and hands each complete batch's records to `onBatch`
 * (a base's snapshot goes in pieces, each a complete batch of the rewrite). Stops at the first frame
 * that fails, or at a batch that the file ends inside, and then looks at the rest of the file.
 */
export function scanSegment(
  reader: SegmentReader,
  isBase: boolean,
  onBatch: ((records: Buffer[], offsets: number[]) => void) | undefined,
): SegmentScan {
  const scan: SegmentScan = { batches: 0, records: 0, completeEnd: segmentHeaderBytes };
  let pending: Buffer[] = [];
  /** Where each pending record's payload starts in the file. */
  let pendingOffsets: number[] = [];
  let offset = segmentHeaderBytes;
  while (offset < reader.fileBytes) {
    const read = readFrame(reader, offset);
    let reason = read.kind === "intact" ? undefined : read.reason;
    if (read.kind === "intact" && read.frame.kind === frameKind.marker) {
      if (!isBase || scan.markerEnd !== undefined) reason = "a snapshot marker outside a base's snapshot";
    } else if (read.kind === "intact" && scan.markerEnd !== undefined) {
      reason = "a record after a base's snapshot marker";
    }
    if (read.kind !== "intact" || reason !== undefined) {
      scan.damage = tailDamage(reader, offset, reason ?? "", scan.completeEnd, pending.length);
      return scan;
    }
    const frame = read.frame;
    if (frame.kind === frameKind.record) {
      pending.push(frame.payload);
      pendingOffsets.push(frame.offset + frameHeaderBytes);
    } else scan.markerEnd = frame.end;
    offset = frame.end;
    if (frame.batchEnd || frame.kind === frameKind.marker) {
      if (pending.length > 0) onBatch?.(pending, pendingOffsets);
      scan.batches += 1;
      scan.records += pending.length;
      scan.completeEnd = offset;
      pending = [];
      pendingOffsets = [];
    }
  }
  if (pending.length > 0)
    scan.damage = {
      offset,
      reason: "the file ends inside a batch: its last frame is not marked as the batch's end",
      tailStart: scan.completeEnd,
      tailBytes: reader.fileBytes - scan.completeEnd,
      tailRecords: pending.length,
      batchEndsAfter: 0,
      looksUnfinished: true,
    };
  return scan;
}

/** Looks past a frame that failed at `offset`: which regions fail, and what intact frames follow. */
export function tailDamage(
  reader: SegmentReader,
  offset: number,
  reason: string,
  tailStart: number,
  pendingRecords: number,
): TailDamage {
  const damage: TailDamage = {
    offset,
    reason,
    tailStart,
    tailBytes: reader.fileBytes - tailStart,
    tailRecords: pendingRecords,
    batchEndsAfter: 0,
    looksUnfinished: true,
  };
  let badFrom = offset;
  while (badFrom < reader.fileBytes) {
    const first = readFrame(reader, badFrom);
    // A frame that was intact but misplaced (a marker out of place) is damage that no crash makes.
    if (first.kind === "intact") damage.looksUnfinished = false;
    if (first.kind === "runs past the end") return damage;
    const next = nextIntactFrame(reader, badFrom + 1);
    const badTo = next?.offset ?? reader.fileBytes;
    if (!holdsZeroBlock(reader, badFrom, badTo)) damage.looksUnfinished = false;
    if (next === undefined) return damage;
    // Follow the intact frames after the bad region, until the next one that fails.
    let at = next.offset;
    for (;;) {
      if (at >= reader.fileBytes) return damage;
      const read = readFrame(reader, at);
      if (read.kind !== "intact") break;
      if (read.frame.kind === frameKind.record) damage.tailRecords += 1;
      if (read.frame.batchEnd && read.frame.end < reader.fileBytes) damage.batchEndsAfter += 1;
      at = read.frame.end;
    }
    badFrom = at;
  }
  return damage;
}

/**
 * Whether [from, to) holds a disk block that was never written: an aligned block inside the region
 * (cut short by the end of the file) that is all zeros, or, when the region starts inside the file's
 * last block, zeros from its start to the end.
 */
function holdsZeroBlock(reader: SegmentReader, from: number, to: number): boolean {
  const firstBlock = Math.ceil(from / diskBlockBytes) * diskBlockBytes;
  if (firstBlock >= reader.fileBytes) return to === reader.fileBytes && reader.allZero(from, to);
  for (let block = firstBlock; block < to; block += diskBlockBytes) {
    const blockEnd = Math.min(block + diskBlockBytes, reader.fileBytes);
    // A block that reaches into the intact frame at `to` was written, at least in part.
    if (blockEnd > to) break;
    if (reader.allZero(block, blockEnd)) return true;
  }
  return false;
}
