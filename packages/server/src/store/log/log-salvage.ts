/**
 * The offline tools over a log directory: `verify` (what recovery would find, changing nothing) and
 * `salvage` (every intact record up to the first damage, or past it with skipDamaged, copied into a
 * new log), and the words the server uses to report what its recovery did.
 */
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";
import * as zlib from "node:zlib";
import { limits } from "../../limits.js";
import { AppendLog } from "./append-log.js";
import {
  decodeSegmentHeader,
  formatVersionFirst,
  frameKind,
  segmentFilePattern,
  segmentHeaderBytes,
} from "./log-format.js";
import { lockDirectory } from "./log-lock.js";
import { LogCorruption, planRecovery, type RecoveryOutcome } from "./log-recovery.js";
import { nextIntactFrame, readFrame, SegmentReader, scanSegment } from "./log-scan.js";

/** Lines for the operator about what recovery repaired; none when the log ended whole. */
export function recoveryReport(outcome: RecoveryOutcome): string[] {
  const lines: string[] = [];
  if (outcome.cut !== undefined) {
    const { fileName, offset, bytes, records, reason, keptIn } = outcome.cut;
    lines.push(
      `cut the unfinished last write of ${fileName} from offset ${offset}: ${bytes} bytes, ${records} ` +
        `intact record(s) whose write was never confirmed (${reason}); the bytes are kept in ${keptIn}`,
    );
  }
  for (const { fileName, reason, keptIn } of outcome.setAside)
    lines.push(`set aside ${fileName} (${reason}) as ${keptIn}`);
  return lines;
}

export interface VerifyResult {
  /** Whether a server would open the log. */
  opens: boolean;
  lines: string[];
}

/** Reads the log in `dir` as recovery would and says what it finds; changes nothing on disk. Takes the
 * directory's lock, so it refuses a log that a running server writes. */
export function verifyLog(dir: string): VerifyResult {
  const unlock = lockDirectory(dir);
  try {
    let records = 0;
    const plan = planRecovery(dir, () => {
      records += 1;
    });
    const lines = plan.replayed.map(
      ({ segment, scan }) =>
        `${segment.fileName}  ${segment.header.base ? "base   " : "regular"}  ${segment.fileBytes} bytes  ` +
        `${scan.batches} batch(es)  ${scan.records} record(s)`,
    );
    for (const segment of plan.superseded)
      lines.push(`${segment.fileName}  replaced by the base: recovery deletes it`);
    for (const { segment, reason } of plan.setAside)
      lines.push(`${segment.fileName}  ${reason}: recovery sets it aside`);
    if (plan.cut !== undefined) {
      const { segment, damage } = plan.cut;
      lines.push(
        `${segment.fileName} at offset ${damage.offset}: ${damage.reason}; an unfinished last write: ` +
          `recovery cuts ${damage.tailBytes} bytes from offset ${damage.tailStart} ` +
          `(${damage.tailRecords} intact record(s) never confirmed) and keeps them aside`,
      );
    }
    lines.push(`ok: the log opens with ${records} record(s)`);
    return { opens: true, lines };
  } catch (error) {
    if (!(error instanceof LogCorruption)) throw error;
    return {
      opens: false,
      lines: [
        `damaged: ${error.fileName} at offset ${error.offset}: ${error.what}`,
        "a server refuses to open it",
      ],
    };
  } finally {
    unlock();
  }
}

export interface SalvageResult {
  recordsCopied: number;
  /** Every place where a frame failed, in log order. */
  damage: Array<{ fileName: string; offset: number; reason: string }>;
  /** Bytes of segment files not copied: after the first damage, or the damaged regions themselves. */
  bytesLeftBehind: number;
}

/**
 * Copies the intact records of the log in `from` into a new log in `to` (which must not exist or be
 * empty), in log order: the newest complete base's snapshot (or the oldest segment, with no base),
 * then every later segment. Stops at the first damage, or with skipDamaged searches past it for the
 * next intact frame and goes on (the records after a gap may redeliver, or refer to messages lost in
 * it). Reads format 1 logs too, which is how such a log is converted.
 */
export async function salvageLog(
  from: string,
  to: string,
  options: { skipDamaged: boolean },
): Promise<SalvageResult> {
  if (existsSync(to) && readdirSync(to).length > 0)
    throw new Error(`${to} is not empty: salvage writes a new log into an empty directory`);
  const unlock = lockDirectory(from);
  const result: SalvageResult = { recordsCopied: 0, damage: [], bytesLeftBehind: 0 };
  try {
    const target = AppendLog.open({ dir: to }, () => {
      throw new Error(`${to} holds a log already`);
    });
    let pendingBytes = 0;
    const copy = async (record: Buffer) => {
      target.append(record);
      result.recordsCopied += 1;
      pendingBytes += record.length;
      if (pendingBytes >= limits.logSalvageFlushBytes) {
        pendingBytes = 0;
        await target.flush();
      }
    };
    try {
      await copySegments(from, options.skipDamaged, result, copy);
      await target.flush();
    } finally {
      await target.close();
    }
  } finally {
    unlock();
  }
  return result;
}

interface SalvageSegment {
  fileName: string;
  path: string;
  base: boolean;
  version: number | undefined;
}

async function copySegments(
  dir: string,
  skipDamaged: boolean,
  result: SalvageResult,
  copy: (record: Buffer) => Promise<void>,
): Promise<void> {
  const segments = readdirSync(dir)
    .filter((name) => segmentFilePattern.test(name))
    .sort()
    .map((fileName) => describe(dir, fileName));
  const start = startOfLog(segments);
  let stopped = false;
  for (const segment of segments.slice(start)) {
    const fd = openSync(segment.path, "r");
    try {
      const reader = new SegmentReader(fd, fstatSync(fd).size);
      if (stopped) {
        result.bytesLeftBehind += reader.fileBytes;
        continue;
      }
      const read = segment.version === formatVersionFirst ? readFormatFirst : readFormatCurrent;
      stopped = await read(segment, reader, skipDamaged, result, copy);
    } finally {
      closeSync(fd);
    }
  }
}

function describe(dir: string, fileName: string): SalvageSegment {
  const path = join(dir, fileName);
  const fd = openSync(path, "r");
  try {
    const bytes = Buffer.alloc(segmentHeaderBytes);
    const read = readSync(fd, bytes, 0, segmentHeaderBytes, 0);
    const decoded = decodeSegmentHeader(bytes.subarray(0, read), Number(fileName.slice(0, 20)));
    if (decoded.kind === "intact") return { fileName, path, base: decoded.header.base, version: undefined };
    // A format 1 header fails only on its version: its flags sit where format 2's do.
    if (decoded.kind === "unreadable" && decoded.version === formatVersionFirst)
      return { fileName, path, base: (bytes.readUInt16LE(6) & 1) === 1, version: formatVersionFirst };
    return { fileName, path, base: false, version: undefined };
  } finally {
    closeSync(fd);
  }
}

/** The index of the newest base whose snapshot reads whole to its marker, or 0. */
function startOfLog(segments: readonly SalvageSegment[]): number {
  for (let index = segments.length - 1; index >= 0; index--) {
    const segment = segments[index];
    if (segment === undefined || !segment.base || segment.version !== undefined) continue;
    const fd = openSync(segment.path, "r");
    try {
      const scan = scanSegment(new SegmentReader(fd, fstatSync(fd).size), true, undefined);
      if (scan.markerEnd !== undefined && scan.damage === undefined) return index;
    } finally {
      closeSync(fd);
    }
  }
  return 0;
}

/** Copies a format 2 segment's intact records; answers whether salvage stops here. */
async function readFormatCurrent(
  segment: SalvageSegment,
  reader: SegmentReader,
  skipDamaged: boolean,
  result: SalvageResult,
  copy: (record: Buffer) => Promise<void>,
): Promise<boolean> {
  let offset = segmentHeaderBytes;
  const seq = Number(segment.fileName.slice(0, 20));
  const headerIntact =
    reader.fileBytes >= segmentHeaderBytes &&
    decodeSegmentHeader(reader.bytesAt(0, segmentHeaderBytes), seq).kind === "intact";
  if (!headerIntact) {
    result.damage.push({
      fileName: segment.fileName,
      offset: 0,
      reason: "the segment header fails its check",
    });
    if (!skipDamaged) {
      result.bytesLeftBehind += reader.fileBytes;
      return true;
    }
  }
  while (offset < reader.fileBytes) {
    const read = readFrame(reader, offset);
    if (read.kind === "intact") {
      if (read.frame.kind === frameKind.record) await copy(Buffer.from(read.frame.payload));
      offset = read.frame.end;
      continue;
    }
    result.damage.push({ fileName: segment.fileName, offset, reason: read.reason });
    const next = skipDamaged ? nextIntactFrame(reader, offset + 1) : undefined;
    const resumeAt = next?.offset ?? reader.fileBytes;
    result.bytesLeftBehind += resumeAt - offset;
    if (next === undefined) return !skipDamaged;
    offset = resumeAt;
  }
  return false;
}

/** Format 1 framing: u32 length (0xFFFFFFFF: the snapshot marker), u32 CRC-32 of the length bytes and
 * the payload, then the payload. Read only to convert such a log. */
const formatFirstFrameBytes = 8;
const formatFirstMarker = 0xffffffff;

async function readFormatFirst(
  segment: SalvageSegment,
  reader: SegmentReader,
  _skipDamaged: boolean,
  result: SalvageResult,
  copy: (record: Buffer) => Promise<void>,
): Promise<boolean> {
  let offset = segmentHeaderBytes;
  while (offset + formatFirstFrameBytes <= reader.fileBytes) {
    const header = reader.bytesAt(offset, formatFirstFrameBytes);
    const length = header.readUInt32LE(0);
    if (length === formatFirstMarker) {
      offset += formatFirstFrameBytes;
      continue;
    }
    const end = offset + formatFirstFrameBytes + length;
    if (end <= reader.fileBytes) {
      const payload = reader.bytesAt(offset + formatFirstFrameBytes, length);
      if (zlib.crc32(payload, zlib.crc32(header.subarray(0, 4))) === header.readUInt32LE(4)) {
        await copy(Buffer.from(payload));
        offset = end;
        continue;
      }
    }
    // Format 1 has no frame magic to search for: salvage of a format 1 log stops at its first damage.
    break;
  }
  if (offset < reader.fileBytes) {
    result.damage.push({ fileName: segment.fileName, offset, reason: "a format 1 record fails its check" });
    result.bytesLeftBehind += reader.fileBytes - offset;
    return true;
  }
  return false;
}
