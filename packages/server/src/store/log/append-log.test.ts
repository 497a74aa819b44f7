import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as zlib from "node:zlib";
import { crashRecord, crashRecordBytes } from "../../testing/append-log-crash-child.js";
import {
  appendFlushing,
  deferred,
  gatedFirstSync,
  noReplay,
  openLog,
  payload,
  records100,
  reopenRecords,
  segmentNames,
  segmentPath,
  tempDir,
} from "../../testing/append-log-helpers.js";
import { AppendLog } from "./append-log.js";
import { type AppendLogIo, fileIo } from "./append-log-io.js";
import { frameHeaderBytes, requireZlibCrc32, segmentHeaderBytes } from "./log-format.js";
import { lockFileName } from "./log-lock.js";

const childPath = fileURLToPath(new URL("../../testing/append-log-crash-child.js", import.meta.url));

/** The frame of `record`, built here from the documented format rather than by the code under test:
 * magic B7 1E, kind 1, flags (bit 0: the batch's last frame), length, payload CRC, header CRC. */
function frame(record: Buffer, batchEnd = false): Buffer {
  const header = Buffer.alloc(16);
  header.writeUInt16LE(0x1eb7, 0);
  header[2] = 1;
  header[3] = batchEnd ? 1 : 0;
  header.writeUInt32LE(record.length, 4);
  header.writeUInt32LE(zlib.crc32(record), 8);
  header.writeUInt32LE(zlib.crc32(header.subarray(0, 12)), 12);
  return Buffer.concat([header, record]);
}

/** The frames of one flushed batch. */
function batchFrames(records: readonly Buffer[]): Buffer {
  return Buffer.concat(records.map((record, index) => frame(record, index === records.length - 1)));
}

test("records of 0 B, 1 B, 1 KiB and more than a segment replay exactly, in order, after a reopen", async (t) => {
  const dir = tempDir(t);
  const segmentBytesMax = 4096;
  const written = [
    payload(0, 1),
    payload(1, 2),
    payload(1024, 3),
    payload(10_000, 4),
    payload(1024, 5),
    payload(0, 6),
    payload(3000, 7),
  ];
  const log = AppendLog.open({ dir, segmentBytesMax }, noReplay);
  for (const record of written.slice(0, 3)) log.append(record);
  await log.flush();
  for (const record of written.slice(3)) log.append(record);
  await log.flush();
  await log.close();

  assert.deepEqual(await reopenRecords({ dir, segmentBytesMax }), written);
  const sizes = segmentNames(dir).map((name) => statSync(join(dir, name)).size);
  assert.ok(
    sizes.some((size) => size >= segmentHeaderBytes + frameHeaderBytes + 10_000),
    "the record larger than segmentBytesMax went whole into one segment",
  );
});

test("opening fdatasyncs the newest segment once, so what a crash left only in the page cache is durable before it is used", async (t) => {
  const dir = tempDir(t);
  const log = AppendLog.open({ dir, segmentBytesMax: 4096 }, noReplay);
  for (const record of records100(3)) log.append(record);
  await log.flush();
  await log.close();
  const synced: string[] = [];
  const reopened = openLog({
    dir,
    segmentBytesMax: 4096,
    io: {
      syncAtOpen: (fd) => {
        synced.push(readlinkSync(`/proc/self/fd/${fd}`));
        fileIo.syncAtOpen(fd);
      },
    },
  });
  assert.equal(reopened.records.length, 3);
  assert.deepEqual(synced, [join(dir, segmentNames(dir).at(-1) as string)]);
  await reopened.log.close();
});

test("a segment is a 28-byte header, then frames of a 16-byte checked header and the payload, the batch's last one marked", async (t) => {
  const dir = tempDir(t);
  const log = AppendLog.open({ dir }, noReplay);
  const records = [Buffer.from("hello"), Buffer.alloc(0), payload(300, 9)];
  for (const record of records) log.append(record);
  await log.flush();
  assert.equal(log.bytes, segmentHeaderBytes + batchFrames(records).length);
  await log.close();

  assert.deepEqual(segmentNames(dir), ["00000000000000000001.log"]);
  const bytes = readFileSync(segmentPath(dir, 1));
  assert.equal(bytes.toString("latin1", 0, 4), "HOPL", "magic");
  assert.equal(bytes.readUInt16LE(4), 2, "format version");
  assert.equal(bytes.readUInt16LE(6), 0, "flags: not a base segment");
  assert.equal(bytes.readBigUInt64LE(8), 1n, "seq");
  assert.equal(bytes.readBigUInt64LE(16), 0n, "previousSeq: none");
  assert.equal(bytes.readUInt32LE(24), zlib.crc32(bytes.subarray(0, 24)), "header crc");
  assert.deepEqual(bytes.subarray(segmentHeaderBytes), batchFrames(records));
});

test("append copies the record: changing the caller's buffer afterwards does not change the log", async (t) => {
  const dir = tempDir(t);
  const log = AppendLog.open({ dir }, noReplay);
  const record = payload(64, 5);
  const original = Buffer.from(record);
  log.append(record);
  record.fill(0);
  await log.flush();
  await log.close();
  assert.deepEqual(await reopenRecords({ dir }), [original]);
});

test("flush() calls made while a flush is in flight share one more write and one more fdatasync", async (t) => {
  const dir = tempDir(t);
  const { io, firstSyncStarted, gate } = gatedFirstSync();
  const log = AppendLog.open({ dir, io }, noReplay);
  const records = records100(21);

  log.append(records[0] ?? assert.fail());
  const flushes = [log.flush()];
  await firstSyncStarted.promise;
  for (const record of records.slice(1)) {
    log.append(record);
    flushes.push(log.flush());
  }
  let resolved = 0;
  for (const flush of flushes) void flush.then(() => resolved++);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(resolved, 0, "no flush resolves while the first fdatasync is held");
  assert.deepEqual(log.stats, { batches: 1, writes: 1, syncs: 1, directorySyncs: 0 });

  gate.resolve();
  await Promise.all(flushes);
  assert.equal(log.stats.batches, 2, "the 20 flushes made while the first was on disk share one batch");
  assert.equal(log.stats.writes, 2);
  assert.equal(log.stats.syncs, 2);
  await log.close();
  assert.deepEqual(await reopenRecords({ dir }), records);
});

test("a flush resolves only after its record is written and fdatasync'ed", async (t) => {
  const dir = tempDir(t);
  const events: string[] = [];
  const io: Partial<AppendLogIo> = {
    async write(file, buffers, position) {
      await fileIo.write(file, buffers, position);
      events.push("write");
    },
    async sync(file) {
      await fileIo.sync(file);
      events.push("sync");
    },
  };
  const log = AppendLog.open({ dir, io }, noReplay);
  for (let round = 0; round < 5; round++) {
    events.length = 0;
    const record = payload(100 + round, round);
    log.append(record);
    await log.flush().then(() => events.push("resolved"));
    assert.deepEqual(events, ["write", "sync", "resolved"]);
    const bytes = readFileSync(segmentPath(dir, 1));
    assert.deepEqual(bytes.subarray(bytes.length - frameHeaderBytes - record.length), frame(record, true));
  }
  await log.close();
});

test("with a small segmentBytesMax the log rolls into several segments, fsyncs the directory twice for each (its entry, then MANIFEST), and replays them all", async (t) => {
  const dir = tempDir(t);
  const segmentBytesMax = 300;
  const records = records100(20);
  const log = AppendLog.open({ dir, segmentBytesMax }, noReplay);
  await appendFlushing(log, records, 2);
  const names = segmentNames(dir);
  assert.equal(log.stats.directorySyncs, 2 * names.length, "two directory fsyncs per segment created");
  assert.equal(
    readFileSync(join(dir, "MANIFEST")).readUInt32LE(8),
    names.length,
    "MANIFEST names the newest",
  );
  await log.close();

  assert.ok(names.length >= 5, `${names.length} segments`);
  assert.deepEqual(
    names,
    names.map((_, index) => `${String(index + 1).padStart(20, "0")}.log`),
  );
  for (const name of names) assert.ok(statSync(join(dir, name)).size <= segmentBytesMax, name);
  assert.deepEqual(await reopenRecords({ dir, segmentBytesMax }), records);
});

/** The real file operations, recording which segment files get fdatasync'ed, in order. */
function recordingSyncs(): { io: Partial<AppendLogIo>; synced: string[] } {
  const synced: string[] = [];
  return {
    synced,
    io: {
      async sync(file) {
        synced.push(file.fileName);
        await fileIo.sync(file);
      },
    },
  };
}

test("with durability os only a segment's first write is fdatasync'ed as it is made; each segment is fdatasync'ed again as the log leaves it or closes", async (t) => {
  const dir = tempDir(t);
  const { io, synced } = recordingSyncs();
  // A 300-byte segment holds its header and two frames of 100-byte records: six records make three.
  const segmentBytesMax = 300;
  const records = records100(6);
  const log = AppendLog.open({ dir, segmentBytesMax, io, durability: "os" }, noReplay);
  log.append(records[0] ?? assert.fail());
  await log.flush();
  const [first] = segmentNames(dir);
  assert.deepEqual(synced, [first], "a new segment's first write, before MANIFEST names it");
  log.append(records[1] ?? assert.fail());
  await log.flush();
  assert.deepEqual(synced, [first], "a flush into a segment that exists fdatasyncs nothing");
  await appendFlushing(log, records.slice(2), 1);
  const names = segmentNames(dir);
  assert.equal(names.length, 3);
  const [, second, third] = names;
  assert.deepEqual(synced, [first, first, second, second, third], "created, then left");
  await log.close();
  assert.deepEqual(synced, [first, first, second, second, third, third], "close fdatasyncs the last one");
  assert.deepEqual(await reopenRecords({ dir, segmentBytesMax }), records);
});

test("with durability os a rewrite fdatasyncs the segment it leaves, and its snapshot", async (t) => {
  const dir = tempDir(t);
  const { io, synced } = recordingSyncs();
  const log = AppendLog.open({ dir, io, durability: "os" }, noReplay);
  log.append(payload(100, 1));
  await log.flush();
  const [first] = segmentNames(dir);
  assert.deepEqual(synced, [first], "the segment's first write");
  log.append(payload(100, 4));
  const leaving = log.flush();
  await log.rewrite([payload(10, 2)]);
  await leaving;
  const [base] = segmentNames(dir);
  assert.deepEqual(synced, [first, first, base, base], "the segment left, the base's header, its snapshot");
  log.append(payload(100, 3));
  await log.flush();
  await log.close();
  assert.deepEqual(await reopenRecords({ dir }), [payload(10, 2), payload(100, 3)]);
});

test("a failed write rejects every pending flush, and the log refuses appends until it is reopened", async (t) => {
  const dir = tempDir(t);
  let writes = 0;
  const io: Partial<AppendLogIo> = {
    async write(file, buffers, position) {
      writes += 1;
      if (writes === 2) throw Object.assign(new Error("EIO: i/o error, write"), { code: "EIO" });
      await fileIo.write(file, buffers, position);
    },
  };
  const log = AppendLog.open({ dir, io }, noReplay);
  const durable = payload(10, 1);
  log.append(durable);
  await log.flush();

  log.append(payload(10, 2));
  const failing = log.flush();
  log.append(payload(10, 3));
  const queued = log.flush();
  await assert.rejects(failing, /EIO: i\/o error, write\. The tail of the log on disk is now unknown/);
  await assert.rejects(queued, /refuses appends/);
  assert.throws(() => log.append(payload(10, 4)), /refuses appends, flushes and rewrites; reopen it/);
  await assert.rejects(log.flush(), /refuses appends/);
  await assert.rejects(log.rewrite([]), /refuses appends/);
  await log.close();

  assert.deepEqual(await reopenRecords({ dir }), [durable]);
});

test("open fails loudly on a Node without zlib.crc32", () => {
  assert.throws(() => requireZlibCrc32({}), /needs zlib\.crc32 \(Node 20\.15 or later\)/);
  assert.doesNotThrow(() => requireZlibCrc32(zlib));
});

/** How long the child runs after its first report before it is killed. */
const crashAfterMs = 300;

test("a child killed by SIGKILL mid-append keeps every record it reported durable, in order, with nothing torn left behind", async (t) => {
  const dir = tempDir(t);
  const child = spawn(process.execPath, [childPath, dir], { stdio: ["ignore", "pipe", "inherit"] });
  const closed = once(child, "close");
  let reportedMax = 0;
  let pending = "";
  const firstReport = deferred();
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (text: string) => {
    pending += text;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      const number = Number(line);
      assert.ok(number > reportedMax, "the child reports increasing numbers");
      reportedMax = number;
    }
    if (reportedMax > 0) firstReport.resolve();
  });
  await Promise.race([
    firstReport.promise,
    closed.then(() => assert.fail("the child exited before reporting")),
  ]);
  await new Promise((resolve) => setTimeout(resolve, crashAfterMs));
  child.kill("SIGKILL");
  const [, signal] = await closed;
  assert.equal(signal, "SIGKILL", "the child was running until killed");

  const recovered = await reopenRecords({ dir });
  assert.ok(
    recovered.length >= reportedMax,
    `recovered ${recovered.length} records, the child reported ${reportedMax}`,
  );
  recovered.forEach((record, index) => {
    assert.equal(record.length, crashRecordBytes);
    assert.ok(record.equals(crashRecord(index + 1)), `record ${index + 1} is intact and in its place`);
  });
  assert.deepEqual(await reopenRecords({ dir }), recovered, "a second reopen gives the same records");

  // A record appended now lands right after the recovered ones: any garbage left between them would
  // hide it from the next recovery.
  const { log } = openLog({ dir });
  const next = crashRecord(recovered.length + 1);
  log.append(next);
  await log.flush();
  await log.close();
  assert.deepEqual(await reopenRecords({ dir }), [...recovered, next]);
});

test("a directory is locked by the open log: a live holder, or one on another host, refuses it; a dead one's LOCK is taken over", async (t) => {
  const dir = tempDir(t);
  const lockPath = join(dir, lockFileName);
  const ours = `${process.pid} ${hostname()}\n`;
  const log = AppendLog.open({ dir }, noReplay);
  assert.equal(readFileSync(lockPath, "utf8"), ours);
  assert.throws(() => AppendLog.open({ dir }, noReplay), /already open in this process/);
  assert.throws(() => AppendLog.open({ dir: `${dir}/.` }, noReplay), /already open in this process/);
  await log.close();
  assert.ok(!existsSync(lockPath), "close removes the LOCK");

  // A LOCK naming a live process here (the one that started this test): refused, naming it.
  writeFileSync(lockPath, `${process.ppid} ${hostname()}\n`);
  assert.throws(() => AppendLog.open({ dir }, noReplay), new RegExp(`in use by process ${process.ppid}`));
  // One from another host cannot be asked about: refused, whatever its pid.
  writeFileSync(lockPath, "1 some-other-host\n");
  assert.throws(() => AppendLog.open({ dir }, noReplay), /a process on some-other-host/);
  // Something that names no process: refused too.
  writeFileSync(lockPath, "garbage\n");
  assert.throws(() => AppendLog.open({ dir }, noReplay), /in use/);

  // A LOCK naming a process that has exited (as after kill -9): taken over.
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  writeFileSync(lockPath, `${child.pid} ${hostname()}\n`);
  const reopened = AppendLog.open({ dir }, noReplay);
  assert.equal(readFileSync(lockPath, "utf8"), ours);
  assert.deepEqual(
    readdirSync(dir).filter((name) => name.startsWith(lockFileName)),
    [lockFileName],
    "no drafts left",
  );
  await reopened.close();
});
