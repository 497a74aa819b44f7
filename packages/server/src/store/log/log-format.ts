/**
 * The on-disk format of the append log (append-log.ts): segment headers, record frames and their CRCs.
 * Recovery (log-recovery.ts) reads what the writer encodes here.
 *
 * On-disk format, little endian. A segment file is named by its sequence number, 20 digits, so that
 * names sort in log order: 00000000000000000001.log, 00000000000000000002.log, ...
 *
 *   segment header, 28 bytes          frame (one record), 8 + length bytes
 *   +0   "HOPL" magic                 +0  u32 payload length (0xFFFFFFFF: the snapshot marker, no payload)
 *   +4   u16 format version = 1       +4  u32 crc32 of the 4 length bytes followed by the payload
 *   +6   u16 flags: bit 0 = base      +8  payload
 *   +8   u64 seq (= the file name)
 *   +16  u64 previousSeq (0: none)
 *   +24  u32 crc32 of bytes 0..23
 *
 * A base segment (flag bit 0) begins with a complete snapshot of the state: its records, then the
 * marker frame. A base without its marker is an unfinished rewrite: recovery ignores and deletes it.
 * The frame's CRC covers the length too, so a zero-filled region (length 0, crc 0) is not a record.
 */
import * as zlib from "node:zlib";

/** A record is one mutation of the store, whose largest request is 10 MiB; the bound also keeps a
 * damaged length field from making recovery read gigabytes. It must stay below the marker's length. */
export const recordBytesMax = 256 * 1024 * 1024;
/** append() copies records into chunks of this size: one allocation per MiB of records, and a flush
 * gathers few buffers into its writev. */
const encoderChunkBytes = 1024 * 1024;

const segmentMagic = "HOPL";
const formatVersion = 1;
const baseFlag = 1;
export const segmentHeaderBytes = 28;
export const frameHeaderBytes = 8;
export const markerLength = 0xffffffff;
export const segmentFilePattern = /^\d{20}\.log$/;
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

const crcTable = buildCrcTable();

function buildCrcTable(): Uint32Array {
  const table = new Uint32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1;
    table[byte] = crc >>> 0;
  }
  return table;
}

/** CRC-32 of the 4 little-endian bytes of `length`: four table lookups cost less than a call into
 * zlib, which then continues the CRC over the payload. */
function crc32OfLength(length: number): number {
  let crc = 0xffffffff;
  for (let shift = 0; shift < 32; shift += 8) {
    crc = (crcTable[(crc ^ (length >>> shift)) & 0xff] ?? 0) ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

export const markerCrc = crc32OfLength(markerLength);

/** The frame's CRC: over the length bytes, then the payload. */
export function frameCrc(payload: Uint8Array): number {
  return zlib.crc32(payload, crc32OfLength(payload.length));
}

/**
 * Frames records into large chunks, copying each payload once, and hands out the bytes framed since
 * the last take() as a few buffers for one writev. A chunk is shared by consecutive takes: later
 * frames go after the bytes already handed out, which are never written again.
 */
export class FrameEncoder {
  /** Bytes framed and not yet taken. */
  bytes = 0;
  private chunk = Buffer.alloc(0);
  private filledTo = 0;
  private takenTo = 0;
  /** Untaken bytes of earlier, full chunks. */
  private fullChunks: Buffer[] = [];

  add(record: Uint8Array): void {
    const length = record.length;
    if (length > recordBytesMax)
      throw new RangeError(`a log record holds at most ${recordBytesMax} bytes, not ${length}`);
    const at = this.reserve(frameHeaderBytes + length);
    this.chunk.writeUInt32LE(length, at);
    this.chunk.writeUInt32LE(frameCrc(record), at + 4);
    this.chunk.set(record, at + frameHeaderBytes);
  }

  addMarker(): void {
    const at = this.reserve(frameHeaderBytes);
    this.chunk.writeUInt32LE(markerLength, at);
    this.chunk.writeUInt32LE(markerCrc, at + 4);
  }

  take(): Buffer[] {
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
      this.chunk = Buffer.allocUnsafe(Math.max(encoderChunkBytes, frameBytes));
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
}

export function segmentFileName(seq: number): string {
  return `${String(seq).padStart(20, "0")}.log`;
}

export function encodeSegmentHeader(header: SegmentHeader): Buffer {
  const bytes = Buffer.alloc(segmentHeaderBytes);
  bytes.write(segmentMagic, 0, "latin1");
  bytes.writeUInt16LE(formatVersion, 4);
  bytes.writeUInt16LE(header.base ? baseFlag : 0, 6);
  writeUInt64(bytes, 8, header.seq);
  writeUInt64(bytes, 16, header.previousSeq);
  bytes.writeUInt32LE(zlib.crc32(bytes.subarray(0, 24)), 24);
  return bytes;
}

/** The header, or undefined when it is torn (short, or failing its CRC); throws for a header that is
 * intact but not one this code can read. */
export function decodeSegmentHeader(
  bytes: Buffer,
  file: { fileName: string; seq: number },
): SegmentHeader | undefined {
  if (bytes.length < segmentHeaderBytes) return undefined;
  if (zlib.crc32(bytes.subarray(0, 24)) !== bytes.readUInt32LE(24)) return undefined;
  if (bytes.toString("latin1", 0, 4) !== segmentMagic)
    throw corruption(file.fileName, 0, "is not an append log segment (wrong magic bytes)");
  const version = bytes.readUInt16LE(4);
  if (version !== formatVersion)
    throw corruption(file.fileName, 0, `has format version ${version}; this code reads ${formatVersion}`);
  const flags = bytes.readUInt16LE(6);
  if ((flags & ~baseFlag) !== 0) throw corruption(file.fileName, 0, `has unknown flags ${flags}`);
  const seq = readUInt64(bytes, 8);
  if (seq !== file.seq) throw corruption(file.fileName, 0, `says it is segment ${seq}`);
  return { seq, base: (flags & baseFlag) !== 0, previousSeq: readUInt64(bytes, 16) };
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

export function corruption(fileName: string, offset: number, what: string): Error {
  return new Error(`append log segment ${fileName} at offset ${offset}: ${what}`);
}
