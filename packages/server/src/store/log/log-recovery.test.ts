/**
 * The recovery rules of log-recovery.ts, each on a log built by the real writer and then changed on
 * disk the way a crash or a damaged disk would change it.
 */
import assert from "node:assert/strict";
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type TestContext, test } from "node:test";
import * as zlib from "node:zlib";
import { AppendLog, type AppendLogOptions } from "./append-log.js";
import { encodeFrame, frameHeaderBytes, segmentHeaderBytes } from "./log-format.js";
import { setAsideDirName } from "./log-recovery.js";
import { salvageLog, verifyLog } from "./log-salvage.js";
import { diskBlockBytes } from "./log-scan.js";

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "hopper-log-recovery-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `size` bytes that differ with `seed` and hold no zero byte, so a zero block is never data. */
function payload(size: number, seed: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let index = 0; index < size; index++) bytes[index] = 1 + ((seed * 131 + index * 7) % 255);
  return bytes;
}

function segmentPath(dir: string, seq: number): string {
  return join(dir, `${String(seq).padStart(20, "0")}.log`);
}

function open(options: AppendLogOptions): { log: AppendLog; records: Buffer[] } {
  const records: Buffer[] = [];
  const log = AppendLog.open(options, (record) => records.push(Buffer.from(record)));
  return { log, records };
}

async function reopenRecords(options: AppendLogOptions): Promise<Buffer[]> {
  const { log, records } = open(options);
  await log.close();
  return records;
}

/** A closed log of `batches` flushed batches of three 300-byte records each, in one segment. */
async function writeBatches(dir: string, batches: number, options: Partial<AppendLogOptions> = {}) {
  const { log } = open({ dir, ...options });
  const records: Buffer[][] = [];
  for (let batch = 0; batch < batches; batch++) {
    const batchRecords = [0, 1, 2].map((index) => payload(300, batch * 10 + index));
    for (const record of batchRecords) log.append(record);
    await log.flush();
    records.push(batchRecords);
  }
  await log.close();
  return { records, path: segmentPath(dir, 1) };
}

/** Where batch `index` (0-based) of writeBatches starts in its segment. */
function batchOffset(index: number): number {
  return segmentHeaderBytes + index * 3 * (frameHeaderBytes + 300);
}

function changeBytes(path: string, offset: number, change: (bytes: Buffer) => void): void {
  const bytes = readFileSync(path);
  change(bytes.subarray(offset));
  writeFileSync(path, bytes);
}

function flipBit(path: string, offset: number): void {
  changeBytes(path, offset, (bytes) => {
    bytes[0] = (bytes[0] ?? 0) ^ 0x10;
  });
}

function snapshotOf(dir: string): Array<[string, number]> {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((name) => name !== "LOCK")
    .sort()
    .map((name) => [name, statSync(join(dir, name)).size]);
}

/** Open must refuse, naming the file and offset, and change no file. */
function assertRefused(dir: string, pattern: RegExp, options: Partial<AppendLogOptions> = {}): void {
  const before = snapshotOf(dir);
  assert.throws(() => AppendLog.open({ dir, ...options }, () => {}), pattern);
  assert.throws(() => AppendLog.open({ dir, ...options }, () => {}), /hopper log salvage/);
  assert.deepEqual(snapshotOf(dir), before, "a refused open changes nothing");
  assert.equal(verifyLog(dir).opens, false, "verify says the same");
}

// ---------------------------------------------------------------------------------------------------
// What may be cut: an unfinished last write

const unfinishedTails: Array<[string, (records: Buffer[]) => Buffer]> = [
  [
    "a frame whose payload runs past the end",
    () => encodeFrame(payload(500, 77), { batchEnd: true }).subarray(0, 100),
  ],
  ["fewer bytes than a frame header", () => encodeFrame(payload(500, 77), { batchEnd: true }).subarray(0, 9)],
  ["zero-filled bytes", () => Buffer.alloc(64)],
  [
    "a whole zero block after a whole frame",
    () => Buffer.concat([encodeFrame(payload(50, 5), { batchEnd: false }), Buffer.alloc(2 * diskBlockBytes)]),
  ],
  [
    "whole frames with no batch end",
    () =>
      Buffer.concat([
        encodeFrame(payload(50, 5), { batchEnd: false }),
        encodeFrame(payload(60, 6), { batchEnd: false }),
      ]),
  ],
];
for (const [name, tail] of unfinishedTails) {
  test(`an unfinished last batch (${name}) is cut, kept in set-aside/, reported, and appends after it survive a reopen`, async (t) => {
    const dir = tempDir(t);
    const { records, path } = await writeBatches(dir, 2);
    const intactBytes = statSync(path).size;
    const cut = tail(records.flat());
    appendFileSync(path, cut);

    const { log, records: replayed } = open({ dir });
    assert.deepEqual(replayed, records.flat(), "every complete batch, none of the unfinished one");
    assert.equal(statSync(path).size, intactBytes, "cut at the last complete batch's end");
    assert.equal(log.recovery.cut?.bytes, cut.length);
    assert.equal(log.recovery.cut?.offset, intactBytes);
    const keptIn = log.recovery.cut?.keptIn ?? assert.fail("the cut is reported");
    assert.deepEqual(readFileSync(join(dir, keptIn)), cut, "the cut bytes are kept");
    const later = payload(123, 42);
    log.append(later);
    await log.flush();
    await log.close();
    assert.deepEqual(await reopenRecords({ dir }), [...records.flat(), later]);
  });
}

test("a zero hole in the last batch with intact frames after it in that batch is an unfinished write: the batch is cut", async (t) => {
  const dir = tempDir(t);
  const { records, path } = await writeBatches(dir, 3);
  // The last batch is written again by hand without its fdatasync having finished: one of its blocks
  // never reached the disk, and the blocks after it did.
  const holeAt = Math.ceil((batchOffset(2) + 40) / diskBlockBytes) * diskBlockBytes;
  assert.ok(holeAt + diskBlockBytes < statSync(path).size - 200, "the hole has intact bytes after it");
  changeBytes(path, holeAt, (bytes) => bytes.fill(0, 0, diskBlockBytes));

  const { log, records: replayed } = open({ dir });
  assert.deepEqual(replayed, records.slice(0, 2).flat());
  assert.equal(log.recovery.cut?.offset, batchOffset(2));
  assert.equal(log.recovery.cut?.bytes, 3 * (frameHeaderBytes + 300), "the whole batch");
  await log.close();
});

test("an unfinished new segment (zero header, no complete batch) is set aside whole", async (t) => {
  const dir = tempDir(t);
  const { records } = await writeBatches(dir, 1);
  writeFileSync(segmentPath(dir, 2), Buffer.alloc(700));
  const { log, records: replayed } = open({ dir });
  assert.deepEqual(replayed, records.flat());
  assert.deepEqual(
    log.recovery.setAside.map(({ fileName }) => fileName),
    ["00000000000000000002.log"],
  );
  assert.ok(!existsSync(segmentPath(dir, 2)));
  assert.ok(existsSync(join(dir, setAsideDirName, "00000000000000000002.log")));
  log.append(payload(10, 1));
  await log.flush();
  await log.close();
  assert.equal((await reopenRecords({ dir })).length, 4);
});

test("with durability os, intact batches after a zero hole are cut too (they were never synced); with fsync the same is refused", async (t) => {
  for (const durability of ["os", "fsync"] as const) {
    const dir = tempDir(t);
    const { records, path } = await writeBatches(dir, 4, { durability });
    const holeAt = Math.ceil((batchOffset(1) + 40) / diskBlockBytes) * diskBlockBytes;
    assert.ok(holeAt + diskBlockBytes < batchOffset(3), "complete batches follow the hole");
    changeBytes(path, holeAt, (bytes) => bytes.fill(0, 0, diskBlockBytes));
    if (durability === "fsync") {
      assertRefused(dir, /complete batch\(es\) follow it/);
      continue;
    }
    const { log, records: replayed } = open({ dir, durability });
    assert.deepEqual(replayed, records.slice(0, 1).flat());
    await log.close();
  }
});

// ---------------------------------------------------------------------------------------------------
// What is refused: damage

test("a flipped bit in a record's length field, in the newest segment, is refused: the length is never followed", async (t) => {
  const dir = tempDir(t);
  const { path } = await writeBatches(dir, 3);
  flipBit(path, batchOffset(1) + 5);
  assertRefused(dir, /00000000000000000001\.log at offset 976: a frame header fails its check/);
});

test("a flipped bit in the last batch's payload (full length, non-zero bytes) is refused", async (t) => {
  const dir = tempDir(t);
  const { path } = await writeBatches(dir, 2);
  flipBit(path, statSync(path).size - 10);
  assertRefused(dir, /payload fails its CRC; the damaged bytes are not zeros/);
});

test("garbage after the last batch is refused: an unfinished write leaves zeros, not other bytes", async (t) => {
  const dir = tempDir(t);
  const { path } = await writeBatches(dir, 2);
  appendFileSync(path, payload(37, 99));
  assertRefused(dir, /not zeros and do not run past the end/);
});

test("a zeroed 4 KiB page over a record header with batches after it is refused", async (t) => {
  const dir = tempDir(t);
  const { path } = await writeBatches(dir, 10);
  changeBytes(path, 4096, (bytes) => bytes.fill(0, 0, 4096));
  assertRefused(dir, /complete batch\(es\) follow it/);
});

test("100 bytes missing from the middle of a segment are refused", async (t) => {
  const dir = tempDir(t);
  const { path } = await writeBatches(dir, 4);
  const bytes = readFileSync(path);
  writeFileSync(path, Buffer.concat([bytes.subarray(0, 1500), bytes.subarray(1600)]));
  assertRefused(dir, /00000000000000000001\.log at offset \d+: .*follow it/);
});

test("a flipped bit in the newest segment's header is refused, and the file is never reopened with truncation", async (t) => {
  const dir = tempDir(t);
  const { log } = open({ dir, segmentBytesMax: 2000 });
  for (let batch = 0; batch < 6; batch++) {
    log.append(payload(600, batch));
    await log.flush();
  }
  await log.close();
  const names = readdirSync(dir).filter((name) => name.endsWith(".log"));
  const newest = join(dir, names.sort().at(-1) ?? assert.fail());
  flipBit(newest, 12);
  assertRefused(dir, /segment header fails its check, and the file is not an unfinished first write/);
});

test("damage in a segment that is not the newest is refused", async (t) => {
  const dir = tempDir(t);
  const { log } = open({ dir, segmentBytesMax: 2000 });
  for (let batch = 0; batch < 6; batch++) {
    log.append(payload(600, batch));
    await log.flush();
  }
  await log.close();
  truncateSync(segmentPath(dir, 1), statSync(segmentPath(dir, 1)).size - 30);
  assertRefused(dir, /00000000000000000001\.log .*this segment is not the newest/);
});

test("the newest segment deleted is refused: MANIFEST names it", async (t) => {
  const dir = tempDir(t);
  const { log } = open({ dir, segmentBytesMax: 2000 });
  for (let batch = 0; batch < 6; batch++) {
    log.append(payload(600, batch));
    await log.flush();
  }
  await log.close();
  const names = readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort();
  unlinkSync(join(dir, names.at(-1) ?? assert.fail()));
  assertRefused(dir, new RegExp(`${names.at(-1)} at offset 0: is missing: MANIFEST names it as the newest`));
});

test("a damaged or missing MANIFEST is refused", async (t) => {
  const dir = tempDir(t);
  await writeBatches(dir, 1);
  flipBit(join(dir, "MANIFEST"), 9);
  assertRefused(dir, /MANIFEST at offset 0: fails its CRC/);
  unlinkSync(join(dir, "MANIFEST"));
  assertRefused(dir, /MANIFEST at offset 0: is missing, and the directory holds segments/);
});

test("a damaged snapshot is refused naming the base, and an unfinished compaction is set aside", async (t) => {
  const dir = tempDir(t);
  const { log } = open({ dir });
  log.append(payload(100, 1));
  await log.flush();
  await log.rewrite([payload(300, 2), payload(300, 3)]);
  log.append(payload(100, 4));
  await log.flush();
  await log.close();
  const base = segmentPath(dir, 2);
  assert.equal(readFileSync(base).readUInt16LE(6) & 1, 1, "segment 2 is the base");
  const copy = tempDir(t);
  for (const name of readdirSync(dir)) writeFileSync(join(copy, name), readFileSync(join(dir, name)));

  flipBit(base, segmentHeaderBytes + frameHeaderBytes + 100);
  assertRefused(dir, /00000000000000000002\.log at offset 28: .*in the base that MANIFEST names as complete/);

  // A compaction that did not finish: a base newer than MANIFEST's, without its marker. The segments it
  // would replace are still there.
  const unfinishedBase = readFileSync(segmentPath(copy, 2)).subarray(0, segmentHeaderBytes + 200);
  const header = Buffer.from(unfinishedBase.subarray(0, segmentHeaderBytes));
  header.writeUInt32LE(4, 8);
  header.writeUInt32LE(3, 16);
  header.writeUInt32LE(zlib.crc32(header.subarray(0, 24)), 24);
  writeFileSync(segmentPath(copy, 4), Buffer.concat([header, unfinishedBase.subarray(segmentHeaderBytes)]));
  const reopened = open({ dir: copy });
  assert.deepEqual(reopened.records, [payload(300, 2), payload(300, 3), payload(100, 4)]);
  assert.deepEqual(
    reopened.log.recovery.setAside.map(({ reason }) => reason),
    ["a base segment whose compaction did not finish"],
  );
  await reopened.log.close();
});

test("a format 1 log is refused with the command that converts it, and salvage converts it", async (t) => {
  const dir = tempDir(t);
  const header = Buffer.alloc(segmentHeaderBytes);
  header.write("HOPL", 0, "latin1");
  header.writeUInt16LE(1, 4);
  header.writeUInt32LE(1, 8);
  header.writeUInt32LE(zlib.crc32(header.subarray(0, 24)), 24);
  const formatFirstFrame = (record: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32LE(record.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32LE(zlib.crc32(Buffer.concat([length, record])));
    return Buffer.concat([length, crc, record]);
  };
  const records = [payload(10, 1), payload(2000, 2)];
  writeFileSync(segmentPath(dir, 1), Buffer.concat([header, ...records.map(formatFirstFrame)]));
  assertRefused(dir, /has log format 1; this code reads format 2\. Convert the log with `hopper log salvage/);

  const converted = join(tempDir(t), "converted");
  const result = await salvageLog(dir, converted, { skipDamaged: false });
  assert.equal(result.recordsCopied, 2);
  assert.deepEqual(result.damage, []);
  assert.deepEqual(await reopenRecords({ dir: converted }), records);
});

test("salvage copies every intact record before the damage; with skipDamaged, the intact records after it too", async (t) => {
  const dir = tempDir(t);
  const { records, path } = await writeBatches(dir, 4);
  flipBit(path, batchOffset(2) + frameHeaderBytes + 5);
  const verified = verifyLog(dir);
  assert.equal(verified.opens, false);
  assert.match(
    verified.lines.join("\n"),
    /damaged: 00000000000000000001\.log at offset 1924: a record's payload fails its CRC/,
  );

  const stopped = join(tempDir(t), "stopped");
  const first = await salvageLog(dir, stopped, { skipDamaged: false });
  assert.equal(first.recordsCopied, 6);
  assert.deepEqual(await reopenRecords({ dir: stopped }), records.slice(0, 2).flat());

  const skipped = join(tempDir(t), "skipped");
  const second = await salvageLog(dir, skipped, { skipDamaged: true });
  assert.equal(second.recordsCopied, 11);
  assert.equal(second.bytesLeftBehind, frameHeaderBytes + 300);
  const all = records.flat();
  assert.deepEqual(await reopenRecords({ dir: skipped }), [...all.slice(0, 6), ...all.slice(7)]);
});
