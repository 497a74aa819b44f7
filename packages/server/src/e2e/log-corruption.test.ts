/**
 * The corruption table, through real server processes: each row damages a copy of a log directory
 * that a real server wrote under load and was killed in (testing/log-load.ts), then starts
 * `hopper serve --store log:<copy>`. Damage that a crash cannot leave must stop the server before it
 * listens, with stderr naming the file and the offset; the one legal state (a hole in a last batch
 * that was never confirmed) must start, say what it cut, keep the bytes, and lose nothing confirmed.
 */
import assert from "node:assert/strict";
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { seededRandom } from "../random.js";
import { encodeFrame } from "../store/log/log-format.js";
import { setAsideDirName } from "../store/log/log-recovery.js";
import { diskBlockBytes } from "../store/log/log-scan.js";
import { LogStore } from "../store/log/log-store.js";
import {
  copyLog,
  type FrameAt,
  heldInServer,
  type LoadedLog,
  oracleProblems,
  segmentFiles,
  segmentFrames,
  writeLoadedLog,
} from "../testing/log-load.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

/** A page as a file system writes it (row 3 zeroes one, aligned). */
const pageBytes = 4096;
/** The bytes row 3 removes from the middle of a segment. */
const removedBytes = 100;
/** The payload of each hand-built frame: large enough to hold a whole aligned disk block. */
const handFramePayloadBytes = 2000;
/** The byte of a segment header that holds its flags: bit 0 marks a base. */
const segmentFlagsOffset = 6;

let load: LoadedLog;
let work: TempDir;
let caseNumber = 0;

before(async () => {
  load = await writeLoadedLog();
  work = createTempDir("hopper-e2e-log-corruption-");
});

after(() => {
  load?.remove();
  work?.remove();
});

function freshCopy(): string {
  return copyLog(load, join(work.path, `case-${++caseNumber}`));
}

function newestSegment(dir: string): string {
  return segmentFiles(dir).at(-1) as string;
}

function isBase(dir: string, fileName: string): boolean {
  return ((readFileSync(join(dir, fileName))[segmentFlagsOffset] as number) & 1) === 1;
}

/** A frame from the middle of a segment, with frames before and after it. */
function middleFrame(dir: string, fileName: string): FrameAt {
  const frames = segmentFrames(join(dir, fileName));
  assert.ok(frames.length >= 3, `${fileName} has ${frames.length} frames, too few to damage its middle`);
  return frames[Math.floor(frames.length / 2)] as FrameAt;
}

function editFile(path: string, edit: (bytes: Buffer) => Buffer | undefined): void {
  const bytes = readFileSync(path);
  writeFileSync(path, edit(bytes) ?? bytes);
}

/**
 * Starts a server on `dir` and requires it to exit non-zero before it listens, its stderr naming
 * `fileName` and an offset; answers stderr and the offset it named.
 */
async function assertRefused(dir: string, fileName: string): Promise<{ stderr: string; offset: number }> {
  let message = "";
  await assert.rejects(startServerProcess({ store: `log:${dir}` }), (error: Error) => {
    message = error.message;
    return true;
  });
  assert.match(message, /the server exited \(code [1-9]\d*, signal null\) before it listened/);
  const named = new RegExp(`append log: ${fileName} at offset (\\d+): `).exec(message);
  assert.ok(named, `the refusal does not name ${fileName} and an offset:\n${message}`);
  assert.match(message, /Hopper does not open a damaged log/);
  return { stderr: message, offset: Number(named[1]) };
}

test("the intact copy starts, and holds every confirmed, unacked message and no acked one", async () => {
  const server = await startServerProcess({ store: `log:${freshCopy()}` });
  try {
    assert.deepEqual(oracleProblems(load, await heldInServer(server)), []);
  } finally {
    await server.stop();
  }
});

test("row 1: one bit flipped in a record's length field in the newest segment is refused", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const frame = middleFrame(dir, newest);
  // Bit 0 of the length's second byte: the length grows by 256, still inside the file.
  editFile(join(dir, newest), (bytes) => {
    bytes[frame.offset + 5] = (bytes[frame.offset + 5] as number) ^ 1;
    return bytes;
  });
  const { offset } = await assertRefused(dir, newest);
  assert.equal(offset, frame.offset);
});

test("row 2: one bit flipped in the newest segment's header is refused", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  editFile(join(dir, newest), (bytes) => {
    bytes[9] = (bytes[9] as number) ^ 4;
    return bytes;
  });
  const { offset } = await assertRefused(dir, newest);
  assert.equal(offset, 0);
});

test("row 2: one bit flipped in the header of a compacted log's base, its newest segment, is refused", async () => {
  const dir = freshCopy();
  const store = LogStore.open({ dir, random: seededRandom(1) });
  await store.compact();
  await store.close();
  const newest = newestSegment(dir);
  assert.ok(isBase(dir, newest), `${newest} is not a base after a compaction`);
  editFile(join(dir, newest), (bytes) => {
    bytes[17] = (bytes[17] as number) ^ 0x10;
    return bytes;
  });
  const { offset } = await assertRefused(dir, newest);
  assert.equal(offset, 0);
});

test("row 3: a zeroed, aligned 4 KiB page over a record header mid-segment, with data after, is refused", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const path = join(dir, newest);
  const frames = segmentFrames(path);
  const target = middleFrame(dir, newest);
  const pageStart = Math.floor(target.offset / pageBytes) * pageBytes;
  const fileBytes = readFileSync(path).length;
  assert.ok(pageStart + pageBytes < fileBytes, "no data after the page");
  editFile(path, (bytes) => {
    bytes.fill(0, pageStart, pageStart + pageBytes);
    return bytes;
  });
  // The first frame the page touches is the first that fails.
  const firstHit = frames.find((frame) => frame.end > pageStart) as FrameAt;
  const { offset, stderr } = await assertRefused(dir, newest);
  assert.equal(offset, firstHit.offset);
  assert.match(stderr, /complete batch\(es\) follow it/);
});

test(`row 3: ${removedBytes} bytes removed from the middle of the newest segment is refused`, async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const path = join(dir, newest);
  const fileBytes = readFileSync(path).length;
  const cutAt = Math.floor(fileBytes / 2);
  const hit = segmentFrames(path).find((frame) => frame.end > cutAt) as FrameAt;
  editFile(path, (bytes) => Buffer.concat([bytes.subarray(0, cutAt), bytes.subarray(cutAt + removedBytes)]));
  const { offset } = await assertRefused(dir, newest);
  assert.equal(offset, hit.offset);
});

test("row 4: the newest segment deleted is refused, naming it as MANIFEST's newest", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  unlinkSync(join(dir, newest));
  const { stderr, offset } = await assertRefused(dir, newest);
  assert.equal(offset, 0);
  assert.match(stderr, /is missing: MANIFEST names it as the newest segment/);
});

test("row 5: a payload bit flipped mid-segment is refused, naming the file and the record's offset", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const frame = middleFrame(dir, newest);
  editFile(join(dir, newest), (bytes) => {
    const at = frame.offset + 16 + Math.floor(frame.length / 2);
    bytes[at] = (bytes[at] as number) ^ 0x40;
    return bytes;
  });
  const { offset, stderr } = await assertRefused(dir, newest);
  assert.equal(offset, frame.offset);
  assert.match(stderr, /a record's payload fails its CRC/);
});

test("row 6: a damaged snapshot in the base segment is refused, naming the base", async () => {
  const dir = freshCopy();
  const base = segmentFiles(dir)[0] as string;
  assert.ok(isBase(dir, base), `${base}, the oldest segment the server left, is not a base`);
  const frames = segmentFrames(join(dir, base));
  const largest = frames.reduce((found, frame) => (frame.length > found.length ? frame : found));
  editFile(join(dir, base), (bytes) => {
    const at = largest.offset + 16 + Math.floor(largest.length / 3);
    bytes[at] = (bytes[at] as number) ^ 2;
    return bytes;
  });
  const { offset, stderr } = await assertRefused(dir, base);
  assert.equal(offset, largest.offset);
  assert.match(stderr, /in the base that MANIFEST names as complete/);
  assert.doesNotMatch(stderr, /a segment .* is missing/);
});

/** A server's output arrives as it comes; a line it wrote shows up within this bound. */
const stderrWaitMs = 5_000;
const stderrPollMs = 10;

/** Resolves once the server's stderr matches `pattern`; fails after stderrWaitMs. */
async function stderrMatching(server: ServerProcess, pattern: RegExp): Promise<void> {
  for (let waited = 0; !pattern.test(server.stderr()); waited += stderrPollMs) {
    assert.ok(
      waited < stderrWaitMs,
      `stderr does not match ${pattern} after ${stderrWaitMs} ms:\n${server.stderr()}`,
    );
    await new Promise((resolve) => setTimeout(resolve, stderrPollMs));
  }
}

/** One hand-built batch: two record frames, the last marked as the batch's end. Their payloads are
 * never replayed (a cut drops them, a refusal stops before them), so any non-zero bytes do. */
function handBatch(fill: number): Buffer {
  const payload = Buffer.alloc(handFramePayloadBytes, fill);
  return Buffer.concat([encodeFrame(payload, { batchEnd: false }), encodeFrame(payload, { batchEnd: true })]);
}

/** Zeroes the first aligned disk block inside the first frame's payload of a batch appended at `batchStart`. */
function holeInFirstFrame(path: string, batchStart: number): number {
  const hole = Math.ceil((batchStart + 16) / diskBlockBytes) * diskBlockBytes;
  assert.ok(hole + diskBlockBytes <= batchStart + 16 + handFramePayloadBytes);
  editFile(path, (bytes) => {
    bytes.fill(0, hole, hole + diskBlockBytes);
    return bytes;
  });
  return hole;
}

test("row 7: a hole in a last batch that never finished starts, cuts it into set-aside/, loses nothing", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const path = join(dir, newest);
  const batchStart = readFileSync(path).length;
  appendFileSync(path, handBatch(0x5a));
  holeInFirstFrame(path, batchStart);
  const damagedTail = readFileSync(path).subarray(batchStart);

  const server = await startServerProcess({ store: `log:${dir}` });
  try {
    // stderr and stdout are two pipes: the report, written before the listening line, may come after it.
    await stderrMatching(
      server,
      new RegExp(
        `cut the unfinished last write of ${newest} from offset ${batchStart}: ${damagedTail.length} bytes`,
      ),
    );
    const keptIn = join(dir, setAsideDirName, `${newest}.tail-from-${batchStart}`);
    assert.ok(existsSync(keptIn), `no ${keptIn}: ${readdirSync(dir).join(", ")}`);
    assert.deepEqual(readFileSync(keptIn), damagedTail);
    assert.equal(readFileSync(path).length, batchStart);
    assert.deepEqual(oracleProblems(load, await heldInServer(server)), []);
  } finally {
    await server.stop();
  }
});

test("row 7, the opposite: the same hole in an earlier batch, with a complete batch after it, is refused", async () => {
  const dir = freshCopy();
  const newest = newestSegment(dir);
  const path = join(dir, newest);
  const batchStart = readFileSync(path).length;
  appendFileSync(path, Buffer.concat([handBatch(0x5a), handBatch(0xa5)]));
  holeInFirstFrame(path, batchStart);
  const { offset, stderr } = await assertRefused(dir, newest);
  assert.equal(offset, batchStart);
  assert.match(stderr, /1 complete batch\(es\) follow it/);
  assert.ok(!existsSync(join(dir, setAsideDirName)), "a refused log had bytes set aside");
  rmSync(dir, { recursive: true, force: true });
});
