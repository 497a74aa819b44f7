/**
 * The on-disk format of the append log (append-log.ts): segment headers, record frames, batch ends,
 * and the manifest. Recovery (log-recovery.ts, log-scan.ts) reads what the writer encodes here.
 *
 * A log directory holds segment files named by their sequence number, 20 digits, so that names sort in
 * log order (00000000000000000001.log, ...), and MANIFEST. Little endian throughout.
 *
 *   segment header, 28 bytes              frame header, 16 bytes, then the payload
 *   +0   "HOPL" magic                     +0   u16 frame magic 0x1EB7 (bytes B7 1E)
 *   +4   u16 format version = 2           +2   u8  kind: 1 record, 2 snapshot marker (no payload)
 *   +6   u16 flags: bit 0 base,           +3   u8  flags: bit 0 = the last frame of its batch
 *             bit 1 written with          +4   u32 payload length
 *             durability "os"             +8   u32 crc32 of the payload
 *   +8   u64 seq (= the file name)        +12  u32 crc32 of bytes 0..11 of this header
 *   +16  u64 previousSeq (0: none)
 *   +24  u32 crc32 of bytes 0..23         MANIFEST, 28 bytes
 *                                         +0   "HOPM" magic, +4 u16 version = 1, +6 u16 0
 *                                         +8   u64 newestSeq, +16 u64 baseSeq, +24 u32 crc32 of 0..23
 *
 * Why each check is there:
 *  - A frame header carries its own magic and CRC, so a damaged length is detected and never used to
 *    find the next frame; after damage, recovery can search forward for the next frame that checks.
 *  - The last frame of every flushed batch carries the batch-end flag. A batch is one writev and, with
 *    durability "fsync", one fdatasync, so "the last batch" of a segment is known: the frames after the
 *    last batch end. Only it can be unfinished after a crash (log-recovery.ts says what may be cut).
 *  - A base segment (flag bit 0) begins with a complete snapshot of the state, then the marker frame.
 *  - MANIFEST names the newest segment and the base, each written only after what it names is
 *    durable, so a newest segment that went missing, or a base that was lost, is seen at open.
 * Nothing here is specific to queues: any log kept as segment files (a stream's, an inbox's) is
 * framed, checked, recovered, verified and salvaged the same way.
 */
import * as zlib from "node:zlib";
import { limits } from "../../limits.js";

// The sizes and numbers below are the format's, as drawn above, so they stay beside the drawing rather
// than in limits.ts: changing one changes which files this code reads. recordBytesMax is one of them,
// since a reader takes a longer length for damage.
/** A record is one mutation of the store, whose largest request is 10 MiB; the bound also keeps a
 * damaged length from making a reader allocate gigabytes (the frame header's CRC catches a damaged
 * length first; the bound is a second line). */
export const recordBytesMax = 256 * 1024 * 1024;

const segmentMagic = "HOPL";
/** Format 1 framed a record as u32 length + u32 CRC, with no batch ends and no manifest; this code
 * does not open it, and `hopper log salvage` converts it (docs/log-store.md). */
export const formatVersionFirst = 1;
export const formatVersion = 2;
const baseFlag = 1;
const durabilityOsFlag = 2;
export const segmentHeaderBytes = 28;
export const frameHeaderBytes = 16;
const frameMagic = 0x1eb7;
export const frameKind = { record: 1, marker: 2 } as const;
const batchEndFlag = 1;
export const segmentFilePattern = /^\d{20}\.log$/;
export const manifestFileName = "MANIFEST";
const manifestMagic = "HOPM";
const manifestVersion = 1;
export const manifestBytes = 28;
const twoPow32 = 2 ** 32;

/** A segment file open in this process, as the writer's io (append-log.ts) and recovery see it. */
export interface SegmentFile {
  readonly fd: number;
  readonly fileName: string;
}

/** Throws unless this Node has zlib.crc32 (20.15 and later): the log cannot check a record without it. */
export function requireZlibCrc32(zlibModule: { crc32?: unknown }): void {
  if (typeof zlibModule.crc32 !== "function")
    throw new Error(`the append log needs zlib.crc32 (Node 20.15 or later); this is Node ${process.version}`);
}

/** A frame as its header describes it. */
export interface FrameHeader {
  kind: number;
  batchEnd: boolean;
  length: number;
  payloadCrc: number;
}

/** Writes a frame header at `at`, its own CRC last. */
function writeFrameHeader(into: Buffer, at: number, header: FrameHeader): void {
  into.writeUInt16LE(frameMagic, at);
  into[at + 2] = header.kind;
  into[at + 3] = header.batchEnd ? batchEndFlag : 0;
  into.writeUInt32LE(header.length, at + 4);
  into.writeUInt32LE(header.payloadCrc, at + 8);
  into.writeUInt32LE(zlib.crc32(into.subarray(at, at + 12)), at + 12);
}

/** The frame header at `at` (16 bytes must be there), or undefined when those bytes are not one: a
 * wrong magic, a failed CRC, an unknown kind or flag, or a length over the bound. */
export function decodeFrameHeader(bytes: Buffer, at: number): FrameHeader | undefined {
  if (bytes.readUInt16LE(at) !== frameMagic) return undefined;
  if (zlib.crc32(bytes.subarray(at, at + 12)) !== bytes.readUInt32LE(at + 12)) return undefined;
  const kind = bytes[at + 2] ?? 0;
  const flags = bytes[at + 3] ?? 0;
  const length = bytes.readUInt32LE(at + 4);
  if (kind !== frameKind.record && kind !== frameKind.marker) return undefined;
  if ((flags & ~batchEndFlag) !== 0 || length > recordBytesMax) return undefined;
  if (kind === frameKind.marker && length !== 0) return undefined;
  return { kind, batchEnd: (flags & batchEndFlag) !== 0, length, payloadCrc: bytes.readUInt32LE(at + 8) };
}

export function payloadCrc(payload: Uint8Array): number {
  return zlib.crc32(payload);
}

/**
 * The payload of the record frame whose payload starts at `payloadOffset`, read through `read` and
 * checked (the header's CRC, then the payload's): what lets a reader of bytes kept on disk (stream
 * records) trust them as recovery trusts the log. Undefined when the bytes there fail either check.
 */
export function checkedPayloadAt(
  read: (offset: number, length: number) => Buffer,
  payloadOffset: number,
): Buffer | undefined {
  const header = decodeFrameHeader(read(payloadOffset - frameHeaderBytes, frameHeaderBytes), 0);
  if (!header || header.kind !== frameKind.record) return undefined;
  const payload = read(payloadOffset, header.length);
  return payloadCrc(payload) === header.payloadCrc ? payload : undefined;
}

/** The bytes of one frame, for tests and tools that build a log by hand. */
export function encodeFrame(payload: Uint8Array, options: { batchEnd: boolean; marker?: boolean }): Buffer {
  const bytes = Buffer.alloc(frameHeaderBytes + payload.length);
  const kind = options.marker ? frameKind.marker : frameKind.record;
  writeFrameHeader(bytes, 0, {
    kind,
    batchEnd: options.batchEnd,
    length: payload.length,
    payloadCrc: options.marker ? 0 : payloadCrc(payload),
  });
  bytes.set(payload, frameHeaderBytes);
  return bytes;
}

/**
 * Frames records into large chunks, copying each payload once, and hands out the bytes framed since
 * the last take() as a few buffers for one writev, its last frame marked as the batch's end. A chunk
 * is shared by consecutive takes: later frames go after the bytes already handed out, which are never
 * written again.
 */
export class FrameEncoder {
  /** Bytes framed and not yet taken. */
  bytes = 0;
  private chunk = Buffer.alloc(0);
  private filledTo = 0;
  private takenTo = 0;
  /** Untaken bytes of earlier, full chunks. */
  private fullChunks: Buffer[] = [];
  /** The last frame added and not yet taken, which take() marks as its batch's end. */
  private lastFrame: { chunk: Buffer; at: number; header: FrameHeader } | undefined;

  add(record: Uint8Array): void {
    const length = record.length;
    if (length > recordBytesMax)
      throw new RangeError(`a log record holds at most ${recordBytesMax} bytes, not ${length}`);
    const at = this.reserve(frameHeaderBytes + length);
    const header = { kind: frameKind.record, batchEnd: false, length, payloadCrc: payloadCrc(record) };
    writeFrameHeader(this.chunk, at, header);
    this.chunk.set(record, at + frameHeaderBytes);
    this.lastFrame = { chunk: this.chunk, at, header };
  }

  addMarker(): void {
    const at = this.reserve(frameHeaderBytes);
    const header = { kind: frameKind.marker, batchEnd: false, length: 0, payloadCrc: 0 };
    writeFrameHeader(this.chunk, at, header);
    this.lastFrame = { chunk: this.chunk, at, header };
  }

  take(): Buffer[] {
    const last = this.lastFrame;
    // Marked only now, as the batch is cut: none of its bytes has been handed to a write yet.
    if (last !== undefined) writeFrameHeader(last.chunk, last.at, { ...last.header, batchEnd: true });
    this.lastFrame = undefined;
    const buffers = this.fullChunks;
    if (this.filledTo > this.takenTo) buffers.push(this.chunk.subarray(this.takenTo, this.filledTo));
    this.fullChunks = [];
    this.takenTo = this.filledTo;
    this.bytes = 0;
    return buffers;
  }

  /** Room for `frameBytes` in the chunk, starting a new chunk when it does not fit; the frame's offset. */
  private reserve(frameBytes: number): number {
    if (this.chunk.length - this.filledTo < frameBytes) {
      if (this.filledTo > this.takenTo)
        this.fullChunks.push(this.chunk.subarray(this.takenTo, this.filledTo));
      this.chunk = Buffer.allocUnsafe(Math.max(limits.logEncoderChunkBytes, frameBytes));
      this.filledTo = 0;
      this.takenTo = 0;
    }
    const at = this.filledTo;
    this.filledTo += frameBytes;
    this.bytes += frameBytes;
    return at;
  }
}

export interface SegmentHeader {
  seq: number;
  base: boolean;
  previousSeq: number;
  /** Written by a log with durability "os": several batches at its end may be unsynced. */
  unsynced: boolean;
}

export function segmentFileName(seq: number): string {
  return `${String(seq).padStart(20, "0")}.log`;
}

export function encodeSegmentHeader(header: SegmentHeader): Buffer {
  const bytes = Buffer.alloc(segmentHeaderBytes);
  bytes.write(segmentMagic, 0, "latin1");
  bytes.writeUInt16LE(formatVersion, 4);
  bytes.writeUInt16LE((header.base ? baseFlag : 0) | (header.unsynced ? durabilityOsFlag : 0), 6);
  writeUInt64(bytes, 8, header.seq);
  writeUInt64(bytes, 16, header.previousSeq);
  bytes.writeUInt32LE(zlib.crc32(bytes.subarray(0, 24)), 24);
  return bytes;
}

/** What the first bytes of a segment file say. */
export type DecodedSegmentHeader =
  | { kind: "intact"; header: SegmentHeader }
  /** Short, or failing its CRC. */
  | { kind: "damaged" }
  /** Intact, but not one this code reads: `what` says why. */
  | { kind: "unreadable"; what: string; version?: number };

export function decodeSegmentHeader(bytes: Buffer, seq: number): DecodedSegmentHeader {
  if (bytes.length < segmentHeaderBytes) return { kind: "damaged" };
  if (zlib.crc32(bytes.subarray(0, 24)) !== bytes.readUInt32LE(24)) return { kind: "damaged" };
  if (bytes.toString("latin1", 0, 4) !== segmentMagic)
    return { kind: "unreadable", what: "is not an append log segment (wrong magic bytes)" };
  const version = bytes.readUInt16LE(4);
  if (version !== formatVersion)
    return {
      kind: "unreadable",
      what: `has log format ${version}; this code reads format ${formatVersion}`,
      version,
    };
  const flags = bytes.readUInt16LE(6);
  if ((flags & ~(baseFlag | durabilityOsFlag)) !== 0)
    return { kind: "unreadable", what: `has unknown flags ${flags}` };
  const headerSeq = readUInt64(bytes, 8);
  if (headerSeq !== seq) return { kind: "unreadable", what: `says it is segment ${headerSeq}` };
  return {
    kind: "intact",
    header: {
      seq,
      base: (flags & baseFlag) !== 0,
      previousSeq: readUInt64(bytes, 16),
      unsynced: (flags & durabilityOsFlag) !== 0,
    },
  };
}

/** MANIFEST: the newest segment and the base, each named only once it is durable. 0 means none. */
export interface Manifest {
  newestSeq: number;
  baseSeq: number;
}

export function encodeManifest(manifest: Manifest): Buffer {
  const bytes = Buffer.alloc(manifestBytes);
  bytes.write(manifestMagic, 0, "latin1");
  bytes.writeUInt16LE(manifestVersion, 4);
  writeUInt64(bytes, 8, manifest.newestSeq);
  writeUInt64(bytes, 16, manifest.baseSeq);
  bytes.writeUInt32LE(zlib.crc32(bytes.subarray(0, 24)), 24);
  return bytes;
}

/** The manifest, or a sentence saying what is wrong with its bytes. */
export function decodeManifest(bytes: Buffer): Manifest | string {
  if (bytes.length !== manifestBytes) return `is ${bytes.length} bytes long, not ${manifestBytes}`;
  if (zlib.crc32(bytes.subarray(0, 24)) !== bytes.readUInt32LE(24)) return "fails its CRC";
  if (bytes.toString("latin1", 0, 4) !== manifestMagic) return "has the wrong magic bytes";
  const version = bytes.readUInt16LE(4);
  if (version !== manifestVersion) return `has version ${version}; this code reads ${manifestVersion}`;
  return { newestSeq: readUInt64(bytes, 8), baseSeq: readUInt64(bytes, 16) };
}

function writeUInt64(bytes: Buffer, at: number, value: number): void {
  bytes.writeUInt32LE(value % twoPow32, at);
  bytes.writeUInt32LE(Math.floor(value / twoPow32), at + 4);
}

function readUInt64(bytes: Buffer, at: number): number {
  return bytes.readUInt32LE(at + 4) * twoPow32 + bytes.readUInt32LE(at);
}

export function totalBytes(buffers: readonly Uint8Array[]): number {
  let bytes = 0;
  for (const buffer of buffers) bytes += buffer.length;
  return bytes;
}
