/**
 * An append-only log in a directory of segment files: the durability layer of a log-structured store
 * that keeps its state in memory and appends every mutation as a record. `append()` only encodes the
 * record into memory; `flush()` makes everything appended so far durable with one positional write and
 * one fdatasync, made on the calling thread (see fileIo); `rewrite()` compacts the log into a snapshot
 * of the state.
 *
 * Invariants
 *  1. A flush resolves only after every record appended before its call is written and fdatasync'ed,
 *     and, when the flush created the segment file, after the directory holding it is fsync'ed.
 *  2. One batch is written at a time, in append order, so the durable records are always a prefix of
 *     the appended ones. A batch goes to a segment only after every earlier batch is durable, so only
 *     the newest segment file can end in a torn record: recovery truncates a torn tail there and
 *     throws, naming the file and offset, for the same damage anywhere else.
 *  3. A segment's header is durable before any later segment file exists, so only the newest segment
 *     can have a torn header (recovery rewrites it as an empty segment).
 *  4. Segment files change only at their end: appends, and recovery's truncation of a torn tail.
 *  5. Segments older than a base segment are deleted only after the base's snapshot and its marker
 *     are durable. Until then the older segments plus the segments after the base hold the whole log;
 *     after it the base plus the segments after it do. Both describe the same state.
 *  6. Every segment header names the regular segment before it (`previousSeq`), so recovery throws on
 *     a missing segment (or a lost base) instead of replaying around the gap.
 *  7. After any I/O failure the log refuses appends, flushes and rewrites: the bytes at its tail are
 *     unknown (a failed fdatasync may drop pages the OS reported written), and only a reopen, which
 *     reads and checks the disk, can tell which records survived.
 *  8. One process writes a directory at a time; nothing here locks it.
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
 *
 * Ordering of flush and rewrite
 *  - `flush()` resolves once every record appended before the call is durable; flushes resolve in call
 *    order. flush() calls made while a write is in flight share the next write and fdatasync.
 *  - `rewrite(records)` splits the log at its call: records appended before it are written (flushed
 *    or not, and even if no one flushes them) into the segments before the new base; then the base
 *    segment is created with a durable header; records appended after the call go to segments after
 *    the base. Flushes during a rewrite wait only for the base's creation (one small write, one
 *    fdatasync, one directory fsync), not for the snapshot. `records` is read while the rewrite runs,
 *    in pieces, so it must not change after the call: pass the state as of the call (an array copy
 *    or an immutable view). rewrite() resolves once the snapshot and marker are durable and the older
 *    segments are deleted; by then every record appended before its call is durable too. One rewrite
 *    runs at a time. A failed rewrite fails the log, as a failed flush does (invariant 7).
 */
import assert from "node:assert/strict";
import {
  close as closeCallback,
  closeSync,
  fdatasyncSync,
  fstatSync,
  fsync as fsyncCallback,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  open as openCallback,
  openSync,
  readdirSync,
  readSync,
  unlinkSync,
  writeSync,
  writevSync,
} from "node:fs";
import { unlink } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import * as zlib from "node:zlib";

/** Rolling costs a file creation and a directory fsync, so segments should be large enough for it to be
 * rare; compaction deletes whole segments, so they should not be so large that space comes back late. */
export const segmentBytesMaxDefault = 64 * 1024 * 1024;
/** A record is one mutation of the store, whose largest request is 10 MiB; the bound also keeps a
 * damaged length field from making recovery read gigabytes. It must stay below the marker's length. */
export const recordBytesMax = 256 * 1024 * 1024;
/** append() copies records into chunks of this size: one allocation per MiB of records, and a flush
 * gathers few buffers into its writev. */
const encoderChunkBytes = 1024 * 1024;
/** Recovery reads segments in chunks of this size (a larger record is read whole). */
const readChunkBytes = 1024 * 1024;
/** A rewrite writes its snapshot in pieces of this size, so its memory stays bounded by it. */
const snapshotPieceBytes = 4 * 1024 * 1024;

const segmentMagic = "HOPL";
const formatVersion = 1;
const baseFlag = 1;
export const segmentHeaderBytes = 28;
export const frameHeaderBytes = 8;
const markerLength = 0xffffffff;
const segmentFilePattern = /^\d{20}\.log$/;
const twoPow32 = 2 ** 32;

export interface AppendLogOptions {
  /** Created if missing. */
  dir: string;
  /** A flush whose batch would take the current segment past this size starts a new segment; a batch
   * always goes whole into one segment, so a record larger than this gets a segment of its own. */
  segmentBytesMax?: number;
  /** Tests only: replaces the writes and fdatasyncs of segment files, to observe or fail them. */
  io?: Partial<AppendLogIo>;
}

/** What the writer counts, for tests and for the store's metrics. */
export interface AppendLogStats {
  /** Positional writes issued on segment files (flush batches, headers, snapshot pieces). */
  writes: number;
  /** fdatasync calls issued on segment files. */
  syncs: number;
  /** fsync calls issued on the directory. */
  directorySyncs: number;
}

export interface SegmentFile {
  readonly fd: number;
  readonly fileName: string;
}

/** The two file operations on the write path, injectable so tests can count, delay or fail them. */
export interface AppendLogIo {
  /** Writes all of `buffers` at `position` with one positional writev. */
  write(file: SegmentFile, buffers: readonly Buffer[], position: number): Promise<void>;
  /** fdatasync. */
  sync(file: SegmentFile): Promise<void>;
}

const closeAsync = promisify(closeCallback);
const fsyncAsync = promisify(fsyncCallback);
const openAsync = promisify(openCallback);

/**
 * The real file operations, made on the calling thread: a flush writes and fdatasyncs while the event
 * loop waits, as SQLite's COMMIT does. On libuv's thread pool each of the two steps ended only when a
 * busy event loop next came round, so a flush took 2-5 ms at the median (17 ms at p90) where the disk
 * needs a fraction of one, and a broker bounded by its clients' windows sat idle: the same build did
 * W3's drain at 51-54k msg/s with the thread pool and 60-64k with these (docs/log-store.md).
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
  async sync(file) {
    fdatasyncSync(file.fd);
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

/** Throws unless this Node has zlib.crc32 (20.15 and later): the log cannot check a record without it. */
export function requireZlibCrc32(zlibModule: { crc32?: unknown }): void {
  if (typeof zlibModule.crc32 !== "function")
    throw new Error(`the append log needs zlib.crc32 (Node 20.15 or later); this is Node ${process.version}`);
}

// ---------------------------------------------------------------------------------------------------
// Encoding

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

const markerCrc = crc32OfLength(markerLength);

/** The frame's CRC: over the length bytes, then the payload. */
function frameCrc(payload: Uint8Array): number {
  return zlib.crc32(payload, crc32OfLength(payload.length));
}

/**
 * Frames records into large chunks, copying each payload once, and hands out the bytes framed since
 * the last take() as a few buffers for one writev. A chunk is shared by consecutive takes: later
 * frames go after the bytes already handed out, which are never written again.
 */
class FrameEncoder {
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

interface SegmentHeader {
  seq: number;
  base: boolean;
  previousSeq: number;
}

export function segmentFileName(seq: number): string {
  return `${String(seq).padStart(20, "0")}.log`;
}

function encodeSegmentHeader(header: SegmentHeader): Buffer {
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
function decodeSegmentHeader(
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

function totalBytes(buffers: readonly Uint8Array[]): number {
  let bytes = 0;
  for (const buffer of buffers) bytes += buffer.length;
  return bytes;
}

function corruption(fileName: string, offset: number, what: string): Error {
  return new Error(`append log segment ${fileName} at offset ${offset}: ${what}`);
}

// ---------------------------------------------------------------------------------------------------
// Recovery (synchronous: it runs once, before the log serves anything)

interface ListedSegment {
  seq: number;
  fileName: string;
  path: string;
  fileBytes: number;
  /** Undefined when torn. */
  header: SegmentHeader | undefined;
}

type HeadedSegment = ListedSegment & { header: SegmentHeader };

interface OpenSegment extends SegmentFile, SegmentHeader {
  bytes: number;
}

interface RecoveredLog {
  current: OpenSegment | undefined;
  segmentBytes: Map<number, number>;
  nextSeq: number;
  lastRegularSeq: number;
}

/** Reads a segment file in chunks; a chunk is never reused, so views handed out stay valid. */
class SegmentReader {
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
      const chunkBytes = Math.min(Math.max(readChunkBytes, length), this.fileBytes - position);
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
}

interface ScanResult {
  /** End of the last intact frame. */
  end: number;
  markerSeen: boolean;
  /** Why the scan stopped before the end of the file: "torn" damage can come from a crash mid-write,
   * "invalid" never can. */
  damage?: { kind: "torn" | "invalid"; reason: string };
}

/**
 * Walks the frames of a segment from its header on, passing each record's payload to `onRecord`.
 * Stops at the first damaged frame, or (with stopAtMarker) right after the snapshot marker.
 */
function scanFrames(
  reader: SegmentReader,
  isBase: boolean,
  onRecord: ((payload: Buffer) => void) | undefined,
  stopAtMarker: boolean,
): ScanResult {
  const fileBytes = reader.fileBytes;
  let offset = segmentHeaderBytes;
  let markerSeen = false;
  const stop = (kind: "torn" | "invalid", reason: string): ScanResult => ({
    end: offset,
    markerSeen,
    damage: { kind, reason },
  });
  while (offset < fileBytes) {
    if (fileBytes - offset < frameHeaderBytes)
      return stop("torn", "a frame header runs past the end of the file");
    const frameHeader = reader.bytesAt(offset, frameHeaderBytes);
    const length = frameHeader.readUInt32LE(0);
    const crc = frameHeader.readUInt32LE(4);
    if (length === markerLength) {
      if (crc !== markerCrc) return stop("torn", "a snapshot marker fails its CRC");
      if (!isBase || markerSeen)
        return stop("invalid", "a snapshot marker outside the start of a base segment");
      markerSeen = true;
      offset += frameHeaderBytes;
      if (stopAtMarker) return { end: offset, markerSeen };
      continue;
    }
    if (length > recordBytesMax) return stop("torn", `a record length of ${length} bytes, over the maximum`);
    if (offset + frameHeaderBytes + length > fileBytes)
      return stop("torn", `a record of ${length} bytes runs past the end of the file`);
    const payload = reader.bytesAt(offset + frameHeaderBytes, length);
    if (frameCrc(payload) !== crc) return stop("torn", "a record fails its CRC");
    onRecord?.(payload);
    offset += frameHeaderBytes + length;
  }
  return { end: offset, markerSeen };
}

/** The segment files in the directory, in log order, with their headers. */
function listSegments(dir: string): ListedSegment[] {
  const fileNames = readdirSync(dir)
    .filter((name) => segmentFilePattern.test(name))
    .sort();
  return fileNames.map((fileName) => {
    const seq = Number(fileName.slice(0, 20));
    if (!Number.isSafeInteger(seq) || seq === 0)
      throw corruption(fileName, 0, "has an impossible sequence number");
    const path = join(dir, fileName);
    const fd = openSync(path, "r");
    try {
      const fileBytes = fstatSync(fd).size;
      const headerBytes = Buffer.alloc(Math.min(fileBytes, segmentHeaderBytes));
      readSync(fd, headerBytes, 0, headerBytes.length, 0);
      return { seq, fileName, path, fileBytes, header: decodeSegmentHeader(headerBytes, { fileName, seq }) };
    } finally {
      closeSync(fd);
    }
  });
}

function baseHasMarker(segment: HeadedSegment): boolean {
  const fd = openSync(segment.path, "r");
  try {
    return scanFrames(new SegmentReader(fd, segment.fileBytes), true, undefined, true).markerSeen;
  } finally {
    closeSync(fd);
  }
}

/**
 * Checks that each segment names the one before it (invariant 6), from the base on (or from the first
 * segment when there is no base); answers the seq that the next new regular segment must name.
 */
function checkSegmentLinks(segments: readonly HeadedSegment[], base: HeadedSegment | undefined): number {
  let expectedPrevious = 0;
  for (const segment of segments) {
    if (segment === base) {
      expectedPrevious = segment.header.previousSeq;
      continue;
    }
    if (segment.header.previousSeq !== expectedPrevious) {
      const expected = expectedPrevious === 0 ? "no segment" : segmentFileName(expectedPrevious);
      throw corruption(
        segment.fileName,
        0,
        `follows ${segmentFileName(segment.header.previousSeq)}, but the log holds ${expected} before it: ` +
          "a segment (or the base segment that replaced it) is missing",
      );
    }
    // An unfinished base leaves the chain as it was: the segment after it names the same predecessor.
    if (!segment.header.base) expectedPrevious = segment.seq;
  }
  return expectedPrevious;
}

/** Replays one segment; in the newest file a torn tail is truncated (ftruncate + fsync), elsewhere it is
 * corruption. Answers the segment's size afterwards. */
function replaySegment(
  fd: number,
  segment: HeadedSegment,
  replay: (record: Buffer) => void,
  isNewest: boolean,
): number {
  const scan = scanFrames(new SegmentReader(fd, segment.fileBytes), segment.header.base, replay, false);
  if (segment.header.base && !scan.markerSeen)
    throw corruption(segment.fileName, scan.end, "a base segment lost its snapshot marker while being read");
  if (scan.damage === undefined) return scan.end;
  if (!isNewest || scan.damage.kind === "invalid")
    throw corruption(
      segment.fileName,
      scan.end,
      `${scan.damage.reason}; only the newest segment may end in a torn record, so this is corruption`,
    );
  ftruncateSync(fd, scan.end);
  fsyncSync(fd);
  return scan.end;
}

/**
 * Recovers the log in `dir`: picks the newest complete base (or the first segment), checks the links,
 * replays every intact record in order, truncates a torn tail of the newest segment, deletes the
 * segments that a complete base replaced and the unfinished bases, and rewrites a torn newest header.
 */
function recoverLog(dir: string, dirFd: number, replay: (record: Buffer) => void): RecoveredLog {
  const listed = listSegments(dir);
  const newest = listed.at(-1);
  for (const segment of listed) {
    if (segment.header === undefined && segment !== newest)
      throw corruption(segment.fileName, 0, "has a damaged header, and only the newest segment may be torn");
  }
  const headed = listed.filter((segment): segment is HeadedSegment => segment.header !== undefined);

  let base: HeadedSegment | undefined;
  const unfinishedBases: HeadedSegment[] = [];
  for (const segment of headed.toReversed()) {
    if (!segment.header.base) continue;
    if (baseHasMarker(segment)) {
      base = segment;
      break;
    }
    unfinishedBases.push(segment);
  }
  const fromBase = base === undefined ? headed : headed.filter((segment) => segment.seq >= base.seq);
  const superseded = base === undefined ? [] : headed.filter((segment) => segment.seq < base.seq);
  let lastRegularSeq = checkSegmentLinks(fromBase, base);

  const segmentBytes = new Map<number, number>();
  let current: OpenSegment | undefined;
  try {
    for (const segment of fromBase) {
      if (unfinishedBases.includes(segment)) continue;
      const isNewest = segment === newest;
      const fd = openSync(segment.path, isNewest ? "r+" : "r");
      try {
        const bytes = replaySegment(fd, segment, replay, isNewest);
        segmentBytes.set(segment.seq, bytes);
        // Appends continue in the newest segment, unless it is a base: a base holds only its snapshot.
        if (isNewest && !segment.header.base)
          current = { fd, fileName: segment.fileName, ...segment.header, bytes };
      } finally {
        if (current?.fd !== fd) closeSync(fd);
      }
    }

    // Deleted only after a replay that succeeded, so a log that throws keeps every file for inspection.
    const deleted = [...superseded, ...unfinishedBases];
    for (const segment of deleted) unlinkSync(segment.path);
    if (deleted.length > 0) fsyncSync(dirFd);

    if (newest !== undefined && newest.header === undefined) {
      current = rewriteTornHeader(newest, lastRegularSeq, dirFd);
      segmentBytes.set(newest.seq, current.bytes);
      lastRegularSeq = newest.seq;
    }
  } catch (error) {
    if (current !== undefined) closeSync(current.fd);
    throw error;
  }
  return { current, segmentBytes, nextSeq: (newest?.seq ?? 0) + 1, lastRegularSeq };
}

/** A crash right after a segment's creation can leave its header torn: the file held no acknowledged
 * record (its first flush had not fdatasync'ed), so it starts over as an empty regular segment. */
function rewriteTornHeader(segment: ListedSegment, previousSeq: number, dirFd: number): OpenSegment {
  const header = { seq: segment.seq, base: false, previousSeq };
  const bytes = encodeSegmentHeader(header);
  const fd = openSync(segment.path, "w");
  try {
    let written = 0;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written, written);
    fdatasyncSync(fd);
    fsyncSync(dirFd);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return { fd, fileName: segment.fileName, ...header, bytes: bytes.length };
}

/** mkdir -p, then fsyncs the parent of every directory it created, so their entries are durable. */
function createDirectory(dir: string): void {
  const firstCreated = mkdirSync(dir, { recursive: true });
  if (firstCreated === undefined) return;
  const top = resolve(firstCreated);
  // Bounded by the path's depth: dirname() of the root is the root.
  for (let created = resolve(dir); created !== dirname(created); created = dirname(created)) {
    const parentFd = openSync(dirname(created), "r");
    try {
      fsyncSync(parentFd);
    } finally {
      closeSync(parentFd);
    }
    if (created === top) return;
  }
}

// ---------------------------------------------------------------------------------------------------
// The log

/** Records handed to one write: everything appended up to `recordCountEnd`. */
interface Batch {
  buffers: Buffer[];
  bytes: number;
  recordCountEnd: number;
  /** Set on the batch that rewrite() sealed: the base segment is created right after it is durable. */
  startsBase: boolean;
}

interface FlushWaiter {
  recordCount: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((resolvePromise, rejectPromise) => {
    resolve = resolvePromise;
    reject = rejectPromise;
  });
  return { promise, resolve, reject };
}

export class AppendLog {
  readonly stats: AppendLogStats = { writes: 0, syncs: 0, directorySyncs: 0 };

  private readonly dir: string;
  private readonly dirFd: number;
  private readonly segmentBytesMax: number;
  private readonly io: AppendLogIo;
  private readonly encoder = new FrameEncoder();
  /** Bytes of every segment file, by seq. */
  private readonly segmentBytes: Map<number, number>;
  /** The regular segment that flushes write into; undefined until the next flush creates one. */
  private current: OpenSegment | undefined;
  private nextSeq: number;
  /** The regular segment a new segment names as its predecessor (invariant 6). */
  private lastRegularSeq: number;

  private appendedCount = 0;
  private durableCount = 0;
  /** In call order, so in recordCount order. */
  private readonly flushWaiters: FlushWaiter[] = [];
  /** Batches that rewrite() cut off the tail; written before anything appended later. */
  private readonly sealedBatches: Batch[] = [];
  private driving = false;
  private driverDone: Promise<void> = Promise.resolve();

  private baseStart: Deferred<OpenSegment> | undefined;
  private baseSegment: OpenSegment | undefined;
  private rewriting = false;
  private rewriteSettled: Promise<void> = Promise.resolve();

  private failure: Error | undefined;
  private closing = false;
  private closed: Promise<void> | undefined;

  private constructor(
    options: AppendLogOptions,
    segmentBytesMax: number,
    dirFd: number,
    recovered: RecoveredLog,
  ) {
    this.dir = options.dir;
    this.dirFd = dirFd;
    this.segmentBytesMax = segmentBytesMax;
    this.io = { ...fileIo, ...options.io };
    this.segmentBytes = recovered.segmentBytes;
    this.current = recovered.current;
    this.nextSeq = recovered.nextSeq;
    this.lastRegularSeq = recovered.lastRegularSeq;
  }

  /**
   * Opens the log in `dir` and recovers it: calls `replay(record)` for every intact record in order
   * (the snapshot's records first when the log was rewritten), then returns the log ready to append.
   * A replayed buffer is never overwritten, but it shares memory with a 1 MiB read chunk: copy it to
   * keep it for long. Throws, naming the file and offset, for damage that a crash cannot explain.
   */
  static open(options: AppendLogOptions, replay: (record: Buffer) => void): AppendLog {
    requireZlibCrc32(zlib);
    const segmentBytesMax = options.segmentBytesMax ?? segmentBytesMaxDefault;
    if (!Number.isSafeInteger(segmentBytesMax) || segmentBytesMax < segmentHeaderBytes + frameHeaderBytes)
      throw new RangeError(
        `segmentBytesMax must be an integer of at least ${segmentHeaderBytes + frameHeaderBytes}`,
      );
    createDirectory(options.dir);
    const dirFd = openSync(options.dir, "r");
    try {
      return new AppendLog(options, segmentBytesMax, dirFd, recoverLog(options.dir, dirFd, replay));
    } catch (error) {
      closeSync(dirFd);
      throw error;
    }
  }

  /** Bytes in all segment files, for deciding when to compact. */
  get bytes(): number {
    let bytes = 0;
    for (const segmentBytes of this.segmentBytes.values()) bytes += segmentBytes;
    return bytes;
  }

  /** Adds a record to the in-memory tail (copying it once): no syscall, nothing durable yet. */
  append(record: Buffer): void {
    this.assertWritable();
    this.encoder.add(record);
    this.appendedCount += 1;
  }

  /** Resolves once every record appended before this call is written and fdatasync'ed. */
  flush(): Promise<void> {
    try {
      this.assertWritable();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.durable(this.appendedCount);
  }

  /**
   * Compaction: `records` is a complete snapshot of the state as of this call. Once this resolves the
   * log holds the snapshot followed by everything appended after the call, and the older segments are
   * gone. See "Ordering of flush and rewrite" at the top of this file.
   */
  rewrite(records: Iterable<Buffer>): Promise<void> {
    try {
      this.assertWritable();
      if (this.rewriting)
        throw new Error("append log: a rewrite is already running; await it before starting another");
    } catch (error) {
      return Promise.reject(error);
    }
    this.rewriting = true;
    this.baseStart = deferred();
    this.sealedBatches.push({ ...this.takeOpenBatch(), startsBase: true });
    this.startDriving();
    const done = this.writeRewrite(this.baseStart.promise, records);
    this.rewriteSettled = done.then(
      () => undefined,
      () => undefined,
    );
    return done;
  }

  /** Flushes what was appended, waits for a running rewrite, and closes the files. Rejects only if that
   * last flush fails; on a log that already failed it just closes the files. */
  close(): Promise<void> {
    this.closed ??= this.closeFiles();
    return this.closed;
  }

  private async closeFiles(): Promise<void> {
    this.closing = true;
    let flushError: unknown;
    if (this.failure === undefined)
      flushError = await this.durable(this.appendedCount).then(
        () => undefined,
        (error) => error,
      );
    await this.rewriteSettled;
    while (this.driving) await this.driverDone;
    // Only now, with no write in flight, may the descriptors close (a closed number can be reused).
    for (const segment of [this.current, this.baseSegment])
      if (segment !== undefined) await closeAsync(segment.fd);
    this.current = undefined;
    this.baseSegment = undefined;
    await closeAsync(this.dirFd);
    if (flushError !== undefined) throw flushError;
  }

  private assertWritable(): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing) throw new Error(`append log ${this.dir} is closed`);
  }

  /** Resolves once the first `recordCount` records are durable. */
  private durable(recordCount: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (recordCount <= this.durableCount) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.flushWaiters.push({ recordCount, resolve, reject });
      this.startDriving();
    });
  }

  private takeOpenBatch(): Batch {
    const bytes = this.encoder.bytes;
    return { buffers: this.encoder.take(), bytes, recordCountEnd: this.appendedCount, startsBase: false };
  }

  private startDriving(): void {
    if (this.driving || this.failure !== undefined) return;
    this.driving = true;
    this.driverDone = this.drive();
  }

  /** Writes batches one at a time, in order, until none is sealed and no flush waits for the tail. */
  private async drive(): Promise<void> {
    try {
      for (;;) {
        const batch = this.failure === undefined ? this.nextBatch() : undefined;
        if (batch === undefined) break;
        if (batch.bytes > 0) await this.writeBatch(batch);
        this.durableCount = batch.recordCountEnd;
        this.resolveFlushWaiters();
        if (batch.startsBase && this.failure === undefined) await this.startBaseSegment();
      }
    } catch (error) {
      this.fail(error);
    }
    // Cleared in the same turn as the decision to stop, so a flush() from now on starts a new drive.
    this.driving = false;
  }

  private nextBatch(): Batch | undefined {
    const sealed = this.sealedBatches.shift();
    if (sealed !== undefined) return sealed;
    const lastWaiter = this.flushWaiters.at(-1);
    if (lastWaiter === undefined || lastWaiter.recordCount <= this.durableCount) return undefined;
    return this.takeOpenBatch();
  }

  private resolveFlushWaiters(): void {
    while (this.flushWaiters.length > 0 && (this.flushWaiters[0]?.recordCount ?? 0) <= this.durableCount) {
      this.flushWaiters.shift()?.resolve();
    }
  }

  /** Writes one batch with one positional writev and one fdatasync, into the current segment, or into a
   * new one when the current one would pass segmentBytesMax (a new segment's header goes in the same
   * write, and its directory entry is fsync'ed before the batch counts as durable). */
  private async writeBatch(batch: Batch): Promise<void> {
    let segment = this.current;
    if (
      segment !== undefined &&
      segment.bytes > segmentHeaderBytes &&
      segment.bytes + batch.bytes > this.segmentBytesMax
    ) {
      this.current = undefined;
      await closeAsync(segment.fd);
      segment = undefined;
    }
    const created = segment === undefined;
    if (segment === undefined) {
      segment = await this.createSegment(false);
      this.current = segment;
    }
    const buffers = created ? [encodeSegmentHeader(segment), ...batch.buffers] : batch.buffers;
    await this.writeAt(segment, buffers);
    await this.syncFile(segment);
    if (created) await this.syncDirectory();
  }

  /**
   * The rewrite's boundary, after the records appended before rewrite() are durable: closes the segment
   * that took them and creates the base segment with a durable header, so no later segment exists
   * before the base's header is on disk (invariant 3). Flushes wait for this, not for the snapshot.
   */
  private async startBaseSegment(): Promise<void> {
    const previous = this.current;
    this.current = undefined;
    if (previous !== undefined) await closeAsync(previous.fd);
    const base = await this.createSegment(true);
    this.baseSegment = base;
    await this.writeAt(base, [encodeSegmentHeader(base)]);
    await this.syncFile(base);
    await this.syncDirectory();
    this.baseStart?.resolve(base);
    this.baseStart = undefined;
  }

  /** Writes the snapshot and its marker into the base segment, makes them durable, then deletes every
   * older segment (invariant 5). */
  private async writeRewrite(baseCreated: Promise<OpenSegment>, records: Iterable<Buffer>): Promise<void> {
    try {
      const base = await baseCreated;
      const encoder = new FrameEncoder();
      for (const record of records) {
        encoder.add(record);
        if (encoder.bytes >= snapshotPieceBytes) {
          await this.writeSnapshotPiece(base, encoder);
          // Writes are made on the calling thread (fileIo): other work runs between the pieces.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      encoder.addMarker();
      await this.writeSnapshotPiece(base, encoder);
      await this.syncFile(base);
      // The directory was fsync'ed when the base was created; this one also covers a file system that
      // orders metadata loosely, before older segments go.
      await this.syncDirectory();
      await this.deleteSegmentsBefore(base.seq);
      this.baseSegment = undefined;
      await closeAsync(base.fd);
    } catch (error) {
      throw this.fail(error);
    } finally {
      this.rewriting = false;
    }
  }

  private async writeSnapshotPiece(base: OpenSegment, encoder: FrameEncoder): Promise<void> {
    // A failure elsewhere stops the snapshot: the log's state on disk is no longer known.
    if (this.failure !== undefined) throw this.failure;
    await this.writeAt(base, encoder.take());
  }

  private async deleteSegmentsBefore(seq: number): Promise<void> {
    assert.ok(this.current === undefined || this.current.seq > seq, "no segment before the base is open");
    const older = [...this.segmentBytes.keys()].filter((olderSeq) => olderSeq < seq);
    for (const olderSeq of older) {
      await unlink(join(this.dir, segmentFileName(olderSeq)));
      this.segmentBytes.delete(olderSeq);
    }
    if (older.length > 0) await this.syncDirectory();
  }

  private async createSegment(base: boolean): Promise<OpenSegment> {
    const seq = this.nextSeq;
    this.nextSeq += 1;
    const fileName = segmentFileName(seq);
    // "wx": a segment file is never reused; an existing one would mean a second writer in the directory.
    const fd = await openAsync(join(this.dir, fileName), "wx");
    const segment = { fd, fileName, seq, base, previousSeq: this.lastRegularSeq, bytes: 0 };
    if (!base) this.lastRegularSeq = seq;
    this.segmentBytes.set(seq, 0);
    return segment;
  }

  private async writeAt(segment: OpenSegment, buffers: readonly Buffer[]): Promise<void> {
    this.stats.writes += 1;
    await this.io.write(segment, buffers, segment.bytes);
    segment.bytes += totalBytes(buffers);
    this.segmentBytes.set(segment.seq, segment.bytes);
  }

  private async syncFile(segment: OpenSegment): Promise<void> {
    this.stats.syncs += 1;
    await this.io.sync(segment);
  }

  private async syncDirectory(): Promise<void> {
    this.stats.directorySyncs += 1;
    await fsyncAsync(this.dirFd);
  }

  /** Puts the log in its failed state (invariant 7) and rejects everyone waiting; answers the error. */
  private fail(cause: unknown): Error {
    if (this.failure === undefined) {
      const message = cause instanceof Error ? cause.message : String(cause);
      this.failure = new Error(
        `append log ${this.dir}: ${message}. The tail of the log on disk is now unknown (a failed write or ` +
          "fdatasync may lose bytes the OS reported written), so the log refuses appends, flushes and " +
          "rewrites; reopen it to recover every intact record",
        { cause },
      );
      for (const waiter of this.flushWaiters.splice(0)) waiter.reject(this.failure);
      this.baseStart?.reject(this.failure);
      this.baseStart = undefined;
    }
    return this.failure;
  }
}
