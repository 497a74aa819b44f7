/**
 * Recovery of an append log (append-log.ts): reads a directory of segments in the format of
 * log-format.ts, replays every intact record, and repairs what a crash can leave behind. It is
 * synchronous: it runs once, before the log serves anything.
 */
import {
  closeSync,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import {
  corruption,
  decodeSegmentHeader,
  encodeSegmentHeader,
  frameCrc,
  frameHeaderBytes,
  markerCrc,
  markerLength,
  recordBytesMax,
  type SegmentFile,
  type SegmentHeader,
  segmentFileName,
  segmentFilePattern,
  segmentHeaderBytes,
} from "./log-format.js";

/** Recovery reads segments in chunks of this size (a larger record is read whole). */
const readChunkBytes = 1024 * 1024;

interface ListedSegment {
  seq: number;
  fileName: string;
  path: string;
  fileBytes: number;
  /** Undefined when torn. */
  header: SegmentHeader | undefined;
}

type HeadedSegment = ListedSegment & { header: SegmentHeader };

export interface OpenSegment extends SegmentFile, SegmentHeader {
  bytes: number;
}

export interface RecoveredLog {
  current: OpenSegment | undefined;
  segmentBytes: Map<number, number>;
  nextSeq: number;
  lastRegularSeq: number;
  /** Bytes of a torn tail cut from the newest segment (0 when it ended whole), to be reported. */
  truncatedBytes: number;
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
    if (frameCrc(payload) !== crc) {
      // A torn write leaves nothing whole after it; a whole record after this one means the bytes of
      // a record that was written went bad: corruption, which is never cut away silently.
      if (wholeFrameAt(reader, offset + frameHeaderBytes + length))
        return stop("invalid", "a record fails its CRC and the record after it is whole");
      return stop("torn", "a record fails its CRC");
    }
    onRecord?.(payload);
    offset += frameHeaderBytes + length;
  }
  return { end: offset, markerSeen };
}

/** Whether a whole frame (a record whose CRC holds, or a marker) starts at `offset`. */
function wholeFrameAt(reader: SegmentReader, offset: number): boolean {
  if (reader.fileBytes - offset < frameHeaderBytes) return false;
  const frameHeader = reader.bytesAt(offset, frameHeaderBytes);
  const length = frameHeader.readUInt32LE(0);
  const crc = frameHeader.readUInt32LE(4);
  if (length === markerLength) return crc === markerCrc;
  if (length > recordBytesMax || offset + frameHeaderBytes + length > reader.fileBytes) return false;
  return frameCrc(reader.bytesAt(offset + frameHeaderBytes, length)) === crc;
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
  syncAtOpen: (fd: number) => void,
): number {
  const scan = scanFrames(new SegmentReader(fd, segment.fileBytes), segment.header.base, replay, false);
  if (segment.header.base && !scan.markerSeen)
    throw corruption(segment.fileName, scan.end, "a base segment lost its snapshot marker while being read");
  if (scan.damage === undefined) {
    // What was written before a crash but never fdatasync'ed may still be only in the page cache; once
    // replayed it is state that answers rest on (a lease answers once its messages are durable), so it
    // is made durable before the store opens.
    if (isNewest) syncAtOpen(fd);
    return scan.end;
  }
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
export function recoverLog(
  dir: string,
  dirFd: number,
  replay: (record: Buffer) => void,
  syncAtOpen: (fd: number) => void,
): RecoveredLog {
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
  let truncatedBytes = 0;
  try {
    for (const segment of fromBase) {
      if (unfinishedBases.includes(segment)) continue;
      const isNewest = segment === newest;
      const fd = openSync(segment.path, isNewest ? "r+" : "r");
      try {
        const bytes = replaySegment(fd, segment, replay, isNewest, syncAtOpen);
        if (isNewest) truncatedBytes = segment.fileBytes - bytes;
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
  return { current, segmentBytes, nextSeq: (newest?.seq ?? 0) + 1, lastRegularSeq, truncatedBytes };
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
export function createDirectory(dir: string): void {
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
