/**
 * Recovery of an append log (append-log.ts): reads a directory of segments in the format of
 * log-format.ts, replays every record of every complete batch, and decides what a crash may have left
 * unfinished and what is damage. It is synchronous: it runs once, before the log serves anything.
 *
 * The rules (docs/log-store.md, "Recovery"):
 *  1. Only an unfinished last write may be cut. With durability "fsync" a batch is written with one
 *     writev and fdatasync'ed before the next one starts, so at most the newest segment's last batch
 *     (a new segment's header and its first batch being one writev, one unit) can be unfinished. It
 *     may be cut when it looks unfinished: it runs past the end of the file, or every region that fails
 *     holds a zero disk block (log-scan.ts). The cut bytes are kept in a side file.
 *  2. A segment written with durability "os" (flagged in its header) may end in several unsynced
 *     batches after a power loss, written back in any order: there a cut may also drop intact batches
 *     after the damage, on the same condition that the damage looks unfinished.
 *  3. A base segment that MANIFEST does not name yet and that lacks its snapshot marker is an
 *     unfinished compaction: the segments it would replace are all still there, so it is set aside.
 *  4. Everything else is corruption, and open throws naming the file, the offset and what failed:
 *     damage with an intact batch after it, a full-length batch that fails with bytes that are not
 *     zeros, any damage outside the newest segment, a damaged header with data after it, a missing
 *     segment, a newest segment older than MANIFEST says, a damaged MANIFEST or snapshot.
 *  5. Nothing is opened with truncation. Files change only by a cut at a batch's edge (after its bytes
 *     are durable in the side file), by being moved aside, and by the deletion of segments that a
 *     complete base replaced (after MANIFEST names that base).
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import {
  type DecodedSegmentHeader,
  decodeSegmentHeader,
  formatVersionFirst,
  type Manifest,
  manifestFileName,
  type SegmentFile,
  type SegmentHeader,
  segmentFileName,
  segmentFilePattern,
  segmentHeaderBytes,
} from "./log-format.js";
import {
  nextIntactFrame,
  SegmentReader,
  type SegmentScan,
  scanSegment,
  type TailDamage,
} from "./log-scan.js";
import { readManifest, writeManifest } from "./manifest.js";

/** Where recovery keeps what it cut or set aside, inside the log directory. */
export const setAsideDirName = "set-aside";

/** Damage that recovery refuses to repair: the log does not open. */
export class LogCorruption extends Error {
  constructor(
    readonly fileName: string,
    readonly offset: number,
    readonly what: string,
  ) {
    super(`append log: ${fileName} at offset ${offset}: ${what}`);
  }
}

interface ListedSegment {
  seq: number;
  fileName: string;
  path: string;
  fileBytes: number;
  decoded: DecodedSegmentHeader;
}

type HeadedSegment = ListedSegment & { header: SegmentHeader };

export interface OpenSegment extends SegmentFile, SegmentHeader {
  bytes: number;
}

/** What recovery did, for the operator and for /metrics. */
export interface RecoveryOutcome {
  segmentsRead: number;
  recordsReplayed: number;
  /** The unfinished tail cut from the newest segment. */
  cut?: { fileName: string; offset: number; bytes: number; records: number; reason: string; keptIn: string };
  /** Whole files moved into set-aside/: unfinished bases, a new segment whose first write did not finish. */
  setAside: Array<{ fileName: string; reason: string; keptIn: string }>;
  /** Segments deleted because a complete base replaced them. */
  supersededDeleted: number;
}

export interface RecoveredLog {
  current: OpenSegment | undefined;
  segmentBytes: Map<number, number>;
  nextSeq: number;
  lastRegularSeq: number;
  manifest: Manifest;
  outcome: RecoveryOutcome;
}

/** What reading the directory found, before anything on disk changes. */
export interface RecoveryPlan {
  /** Undefined for a directory with no MANIFEST and no segment: a new log. */
  manifest: Manifest | undefined;
  segments: ListedSegment[];
  base: HeadedSegment | undefined;
  /** The segments replayed, base first, with what reading each found. */
  replayed: Array<{ segment: HeadedSegment; scan: SegmentScan }>;
  superseded: HeadedSegment[];
  setAside: Array<{ segment: ListedSegment; reason: string }>;
  cut: { segment: HeadedSegment; damage: TailDamage } | undefined;
  lastRegularSeq: number;
  recordsReplayed: number;
}

/** The segment files in the directory, in log order, with what their first bytes say. */
function listSegments(dir: string): ListedSegment[] {
  const fileNames = readdirSync(dir)
    .filter((name) => segmentFilePattern.test(name))
    .sort();
  return fileNames.map((fileName) => {
    const seq = Number(fileName.slice(0, 20));
    if (!Number.isSafeInteger(seq) || seq === 0)
      throw new LogCorruption(fileName, 0, "has an impossible sequence number");
    const path = join(dir, fileName);
    const fd = openSync(path, "r");
    try {
      const fileBytes = fstatSync(fd).size;
      const headerBytes = Buffer.alloc(Math.min(fileBytes, segmentHeaderBytes));
      readSync(fd, headerBytes, 0, headerBytes.length, 0);
      return { seq, fileName, path, fileBytes, decoded: decodeSegmentHeader(headerBytes, seq) };
    } finally {
      closeSync(fd);
    }
  });
}

function withReader<T>(segment: ListedSegment, read: (reader: SegmentReader) => T): T {
  const fd = openSync(segment.path, "r");
  try {
    return read(new SegmentReader(fd, segment.fileBytes));
  } finally {
    closeSync(fd);
  }
}

/** The advice every refusal ends with. */
export function salvageAdvice(dir: string): string {
  return (
    `Hopper does not open a damaged log. \`hopper log verify ${dir}\` shows what it finds; ` +
    `\`hopper log salvage ${dir} --to <new directory>\` copies every intact record before the damage ` +
    'into a new log (docs/log-store.md, "Recovery")'
  );
}

/**
 * Reads the log in `dir` and decides what recovery does, replaying every complete batch into `replay`
 * on the way. Changes nothing on disk. Throws LogCorruption for damage that a crash cannot explain.
 */
export function planRecovery(
  dir: string,
  replay: (record: Buffer, seq: number, offset: number) => void,
  options: { weakenedForTests?: boolean } = {},
): RecoveryPlan {
  const decodedManifest = readManifest(dir);
  if (typeof decodedManifest === "string") throw new LogCorruption(manifestFileName, 0, decodedManifest);
  const manifest = decodedManifest;
  const segments = listSegments(dir);
  const newest = segments.at(-1);
  for (const segment of segments) {
    if (segment.decoded.kind !== "unreadable") continue;
    const what =
      segment.decoded.version === formatVersionFirst
        ? `${segment.decoded.what}. Convert the log with \`hopper log salvage ${dir} --to <new directory>\`, which reads format ${formatVersionFirst}`
        : segment.decoded.what;
    throw new LogCorruption(segment.fileName, 0, what);
  }
  if (manifest === undefined && newest !== undefined)
    throw new LogCorruption(manifestFileName, 0, "is missing, and the directory holds segments");
  const named = manifest ?? { newestSeq: 0, baseSeq: 0 };
  if (named.newestSeq > (newest?.seq ?? 0))
    throw new LogCorruption(
      segmentFileName(named.newestSeq),
      0,
      `is missing: ${manifestFileName} names it as the newest segment, and the newest file is ${newest?.fileName ?? "none"}`,
    );

  const setAside: RecoveryPlan["setAside"] = [];
  const headed: HeadedSegment[] = [];
  for (const segment of segments) {
    if (segment.decoded.kind === "intact") {
      headed.push({ ...segment, header: segment.decoded.header });
      continue;
    }
    if (segment === newest && segment.seq > named.newestSeq && unfinishedFirstWrite(segment)) {
      setAside.push({ segment, reason: "a new segment whose first write did not finish" });
      continue;
    }
    throw new LogCorruption(
      segment.fileName,
      0,
      segment === newest
        ? "the segment header fails its check, and the file is not an unfinished first write (its bytes are not zeros, or a complete batch follows)"
        : "the segment header fails its check, in a segment that is not the newest",
    );
  }

  const base = chooseBase(headed, named, setAside);
  const fromBase = headed.filter(
    (segment) => !setAside.some((aside) => aside.segment === segment) && segment.seq >= (base?.seq ?? 0),
  );
  const superseded = base === undefined ? [] : headed.filter((segment) => segment.seq < base.seq);
  const lastRegularSeq = checkSegmentLinks(fromBase, base);

  const plan: RecoveryPlan = {
    manifest,
    segments,
    base,
    replayed: [],
    superseded,
    setAside,
    cut: undefined,
    lastRegularSeq,
    recordsReplayed: 0,
  };
  for (const segment of fromBase) {
    const scan = withReader(segment, (reader) =>
      scanSegment(reader, segment.header.base, (records, offsets) => {
        for (const [index, record] of records.entries()) replay(record, segment.seq, offsets[index] ?? 0);
      }),
    );
    plan.replayed.push({ segment, scan });
    plan.recordsReplayed += scan.records;
    if (scan.damage === undefined) continue;
    if (!options.weakenedForTests) checkCut(segment, scan.damage, segment.seq === newest?.seq, named);
    plan.cut = { segment, damage: scan.damage };
  }
  return plan;
}

/** A new segment's header and first batch are one writev: the file is an unfinished first write when
 * it is shorter than a header or its header holds a zero block, and no complete batch follows. */
function unfinishedFirstWrite(segment: ListedSegment): boolean {
  return withReader(segment, (reader) => {
    const headerEnd = Math.min(segmentHeaderBytes, reader.fileBytes);
    const zeroHeader = reader.fileBytes < segmentHeaderBytes || reader.allZero(0, headerEnd);
    if (!zeroHeader) return false;
    for (let at = 0; ; ) {
      const frame = nextIntactFrame(reader, at);
      if (frame === undefined) return true;
      if (frame.batchEnd) return false;
      at = frame.offset + 1;
    }
  });
}

/**
 * The newest base whose snapshot is complete, not older than MANIFEST's; newer bases without their
 * marker are unfinished compactions, set aside (rule 3). MANIFEST's own base must be complete.
 */
function chooseBase(
  headed: readonly HeadedSegment[],
  named: Manifest,
  setAside: RecoveryPlan["setAside"],
): HeadedSegment | undefined {
  for (const segment of headed.toReversed()) {
    if (!segment.header.base || segment.seq < named.baseSeq) continue;
    const scan = withReader(segment, (reader) => scanSegment(reader, true, undefined));
    if (scan.markerEnd !== undefined && scan.damage === undefined) return segment;
    if (segment.seq === named.baseSeq)
      throw new LogCorruption(
        segment.fileName,
        scan.damage?.offset ?? scan.completeEnd,
        `${scan.damage?.reason ?? "the snapshot has no marker"}, in the base that ${manifestFileName} names as complete`,
      );
    setAside.push({ segment, reason: "a base segment whose compaction did not finish" });
  }
  if (named.baseSeq > 0)
    throw new LogCorruption(
      segmentFileName(named.baseSeq),
      0,
      `is missing: ${manifestFileName} names it as the base of the log`,
    );
  return undefined;
}

/** Throws unless the damage found in `segment` is an unfinished last write that may be cut (rules 1, 2). */
function checkCut(segment: HeadedSegment, damage: TailDamage, isNewest: boolean, named: Manifest): void {
  const refuse = (why: string) => {
    throw new LogCorruption(segment.fileName, damage.offset, `${damage.reason}; ${why}`);
  };
  if (segment.header.base) refuse("a base segment holds only its snapshot, so this is corruption");
  if (!isNewest)
    refuse("only the newest segment's last batch can be unfinished, and this segment is not the newest");
  if (damage.batchEndsAfter > 0 && !segment.header.unsynced)
    refuse(
      `${damage.batchEndsAfter} complete batch(es) follow it, so the damaged batch had been written and synced: this is corruption, not an unfinished write`,
    );
  if (!damage.looksUnfinished)
    refuse(
      "the damaged bytes are not zeros and do not run past the end of the file, which an unfinished write never leaves: this is corruption",
    );
  if (segment.seq <= named.newestSeq && damage.tailStart === segmentHeaderBytes)
    refuse(`${manifestFileName} names this segment, so its first batch was durable: this is corruption`);
}

/**
 * Checks that each segment names the one before it (invariant 6 of append-log.ts), from the base on
 * (or from the first segment when there is no base); answers the seq that the next new regular segment
 * must name.
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
      throw new LogCorruption(
        segment.fileName,
        0,
        `follows ${segmentFileName(segment.header.previousSeq)}, but the log holds ${expected} before it: ` +
          "a segment (or the base segment that replaced it) is missing",
      );
    }
    if (!segment.header.base) expectedPrevious = segment.seq;
  }
  return expectedPrevious;
}

/**
 * Recovers the log in `dir`: plans (replaying every complete batch), then carries the plan out — keeps
 * a cut tail and moved files in set-aside/, cuts, names the base in MANIFEST, deletes the segments the
 * base replaced — and opens the newest regular segment for appends when the log may continue it.
 */
export function recoverLog(
  dir: string,
  dirFd: number,
  replay: (record: Buffer, seq: number, offset: number) => void,
  options: { syncAtOpen: (fd: number) => void; unsynced: boolean; weakenedForTests?: boolean },
): RecoveredLog {
  // What earlier runs renamed, created or deleted is made durable before anything is read or changed.
  fsyncSync(dirFd);
  let plan: RecoveryPlan;
  try {
    plan = planRecovery(dir, replay, { weakenedForTests: options.weakenedForTests ?? false });
  } catch (error) {
    if (error instanceof LogCorruption) error.message = `${error.message}. ${salvageAdvice(dir)}`;
    throw error;
  }
  const outcome: RecoveryOutcome = {
    segmentsRead: plan.replayed.length,
    recordsReplayed: plan.recordsReplayed,
    setAside: [],
    supersededDeleted: 0,
  };
  for (const { segment, reason } of plan.setAside) {
    const keptIn = moveAside(dir, dirFd, segment.fileName);
    outcome.setAside.push({ fileName: segment.fileName, reason, keptIn });
  }
  const segmentBytes = new Map<number, number>();
  for (const { segment } of plan.replayed) segmentBytes.set(segment.seq, segment.fileBytes);
  if (plan.cut !== undefined) {
    const { segment, damage } = plan.cut;
    const keptIn = cutTail(dir, dirFd, segment, damage.tailStart);
    segmentBytes.set(segment.seq, damage.tailStart);
    outcome.cut = {
      fileName: segment.fileName,
      offset: damage.tailStart,
      bytes: damage.tailBytes,
      records: damage.tailRecords,
      reason: damage.reason,
      keptIn,
    };
  }

  const kept = plan.replayed.map(({ segment }) => segment);
  const newestKept = kept.at(-1);
  const manifest = { newestSeq: newestKept?.seq ?? 0, baseSeq: plan.base?.seq ?? 0 };
  if (
    plan.manifest === undefined ||
    plan.manifest.newestSeq !== manifest.newestSeq ||
    plan.manifest.baseSeq !== manifest.baseSeq
  )
    writeManifest(dir, dirFd, manifest);
  // Deleted only once MANIFEST names the base that replaced them, and after a plan that succeeded, so
  // a log that throws keeps every file for inspection.
  for (const segment of plan.superseded) unlinkSync(segment.path);
  if (plan.superseded.length > 0) fsyncSync(dirFd);
  outcome.supersededDeleted = plan.superseded.length;

  const current =
    newestKept === undefined
      ? undefined
      : openNewest(newestKept, segmentBytes, { synced: plan.cut !== undefined, ...options });
  const highestSeq = Math.max(0, ...plan.segments.map((segment) => segment.seq));
  return {
    current,
    segmentBytes,
    nextSeq: highestSeq + 1,
    lastRegularSeq: plan.lastRegularSeq,
    manifest,
    outcome,
  };
}

/**
 * Makes the newest kept segment durable (unless its cut already was) and answers it open for appends
 * when it is regular and was written in this durability; otherwise the next flush starts a new segment.
 */
function openNewest(
  newest: HeadedSegment,
  segmentBytes: ReadonlyMap<number, number>,
  options: { synced: boolean; syncAtOpen: (fd: number) => void; unsynced: boolean },
): OpenSegment | undefined {
  const fd = openSync(newest.path, "r+");
  try {
    // Bytes written before a crash but never fdatasync'ed may still be only in the page cache; once
    // replayed they are state that answers rest on, so they are made durable before the store opens.
    if (!options.synced) options.syncAtOpen(fd);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  if (!newest.header.base && newest.header.unsynced === options.unsynced) {
    const bytes = segmentBytes.get(newest.seq) ?? newest.fileBytes;
    return { fd, fileName: newest.fileName, ...newest.header, bytes };
  }
  closeSync(fd);
  return undefined;
}

/** Moves a whole file into set-aside/ (made durable in both directories); answers where it went. */
function moveAside(dir: string, dirFd: number, fileName: string): string {
  const asideDir = ensureSetAsideDir(dir, dirFd);
  const keptIn = join(setAsideDirName, uniqueName(join(dir, setAsideDirName), fileName));
  renameSync(join(dir, fileName), join(dir, keptIn));
  syncPath(asideDir);
  fsyncSync(dirFd);
  return keptIn;
}

/** Copies [offset, end) of the segment into set-aside/ and makes the copy durable, then cuts the
 * segment at `offset` and makes the cut durable; answers where the bytes went. */
function cutTail(dir: string, dirFd: number, segment: ListedSegment, offset: number): string {
  const asideDir = ensureSetAsideDir(dir, dirFd);
  const keptIn = join(setAsideDirName, uniqueName(asideDir, `${segment.fileName}.tail-from-${offset}`));
  const fd = openSync(segment.path, "r+");
  try {
    const tail = Buffer.alloc(segment.fileBytes - offset);
    let read = 0;
    while (read < tail.length) {
      const got = readSync(fd, tail, read, tail.length - read, offset + read);
      if (got === 0) throw new Error(`${segment.fileName} shrank while recovery read it`);
      read += got;
    }
    const sideFd = openSync(join(dir, keptIn), "wx");
    try {
      let written = 0;
      while (written < tail.length) written += writeSync(sideFd, tail, written, tail.length - written);
      fsyncSync(sideFd);
    } finally {
      closeSync(sideFd);
    }
    syncPath(asideDir);
    ftruncateSync(fd, offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return keptIn;
}

function ensureSetAsideDir(dir: string, dirFd: number): string {
  const asideDir = join(dir, setAsideDirName);
  if (!existsSync(asideDir)) {
    mkdirSync(asideDir);
    fsyncSync(dirFd);
  }
  return asideDir;
}

/** `name`, or `name.2`, `name.3`…: a side file is never overwritten. */
function uniqueName(dir: string, name: string): string {
  let candidate = name;
  for (let copy = 2; existsSync(join(dir, candidate)); copy++) candidate = `${name}.${copy}`;
  return candidate;
}

function syncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** mkdir -p, then fsyncs the parent of every directory it created, so their entries are durable. */
export function createDirectory(dir: string): void {
  const firstCreated = mkdirSync(dir, { recursive: true });
  if (firstCreated === undefined) return;
  const top = resolve(firstCreated);
  // Bounded by the path's depth: dirname() of the root is the root.
  for (let created = resolve(dir); created !== dirname(created); created = dirname(created)) {
    syncPath(dirname(created));
    if (created === top) return;
  }
}
