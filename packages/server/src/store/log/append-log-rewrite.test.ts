/**
 * The append log's rewrite (compaction into a base segment) and the checks that open makes of a log
 * that rewrites left: a base without its marker, a damaged base, a segment missing from the middle.
 */
import assert from "node:assert/strict";
import { readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  appendFlushing,
  deferred,
  flipByte,
  gatedFirstSync,
  noReplay,
  payload,
  records100,
  reopenRecords,
  segmentNames,
  segmentPath,
  tempDir,
} from "../../testing/append-log-helpers.js";
import { AppendLog } from "./append-log.js";
import { type AppendLogIo, fileIo } from "./append-log-io.js";
import { frameHeaderBytes, segmentHeaderBytes } from "./log-format.js";

test("rewrite leaves the snapshot followed by the records appended after its call, and deletes the older segments", async (t) => {
  const dir = tempDir(t);
  const segmentBytesMax = 256;
  const log = AppendLog.open({ dir, segmentBytesMax }, noReplay);
  await appendFlushing(log, records100(10), 2);
  log.append(payload(100, 10)); // Appended before the rewrite and never flushed: the rewrite writes it.
  const namesBefore = segmentNames(dir);

  const snapshot = [payload(50, 100), payload(0, 101), payload(300, 102)];
  const rewriting = log.rewrite(snapshot);
  await assert.rejects(log.rewrite([]), /a rewrite is already running/);
  const during = payload(80, 200);
  log.append(during);
  const flushed = log.flush();
  await Promise.all([rewriting, flushed]);
  const after = payload(90, 201);
  log.append(after);
  await log.flush();

  const names = segmentNames(dir);
  for (const name of namesBefore) assert.ok(!names.includes(name), `${name} is deleted`);
  const baseBytes = readFileSync(join(dir, names[0] ?? assert.fail()));
  assert.equal(baseBytes.readUInt16LE(6), 1, "the first segment is a base");
  assert.equal(
    log.bytes,
    names.reduce((sum, name) => sum + statSync(join(dir, name)).size, 0),
  );
  await log.close();

  assert.deepEqual(await reopenRecords({ dir, segmentBytesMax }), [...snapshot, during, after]);
});

test("rewrite called while a flush is in flight writes the records appended before it to the old segment before the base exists", async (t) => {
  const dir = tempDir(t);
  const events: string[] = [];
  const gated = gatedFirstSync();
  const io: Partial<AppendLogIo> = {
    async write(file, buffers, position) {
      events.push(`write ${Number(file.fileName.slice(0, 20))}`);
      await fileIo.write(file, buffers, position);
    },
    async sync(file) {
      events.push(`sync ${Number(file.fileName.slice(0, 20))}`);
      await (gated.io.sync ?? assert.fail())(file);
    },
  };
  const log = AppendLog.open({ dir, io }, noReplay);
  log.append(payload(10, 1));
  const first = log.flush();
  await gated.firstSyncStarted.promise;
  log.append(payload(10, 2)); // Before the rewrite: it must reach segment 1 while segment 1 is still the tail.
  const snapshot = [payload(40, 3)];
  const rewriting = log.rewrite(snapshot);
  const after = payload(10, 4);
  log.append(after);
  const second = log.flush();
  gated.gate.resolve();
  await Promise.all([first, rewriting, second]);
  await log.close();

  assert.equal(
    events.filter((event) => event === "write 1").length,
    2,
    "both early records went to segment 1",
  );
  assert.ok(
    events.indexOf("write 2") > events.lastIndexOf("sync 1"),
    "the base is created after segment 1 is durable",
  );
  assert.ok(
    events.indexOf("write 3") > events.indexOf("sync 2"),
    "segment 3 starts after the base header is durable",
  );
  assert.deepEqual(segmentNames(dir), ["00000000000000000002.log", "00000000000000000003.log"]);
  assert.deepEqual(await reopenRecords({ dir }), [...snapshot, after]);
});

test("a base segment without its marker (a rewrite that failed mid-snapshot) is ignored and deleted on open; the older segments are used", async (t) => {
  const dir = tempDir(t);
  const snapshotWriteReached = deferred();
  const failSnapshotWrite = deferred();
  const io: Partial<AppendLogIo> = {
    async write(file, buffers, position) {
      // The base segment is 2; its header is written at 0, its snapshot after it.
      if (file.fileName === "00000000000000000002.log" && position > 0) {
        snapshotWriteReached.resolve();
        await failSnapshotWrite.promise;
        throw Object.assign(new Error("EIO: i/o error, write"), { code: "EIO" });
      }
      await fileIo.write(file, buffers, position);
    },
  };
  const log = AppendLog.open({ dir, io }, noReplay);
  const early = [payload(10, 1), payload(20, 2), payload(30, 3)];
  await appendFlushing(log, early, 3);
  const rewriting = log.rewrite([payload(99, 9)]);
  const during = payload(40, 4);
  log.append(during);
  await log.flush(); // Goes to segment 3 while the snapshot is still being written.
  await snapshotWriteReached.promise;
  failSnapshotWrite.resolve();
  await assert.rejects(rewriting, /EIO.*refuses appends/s);
  assert.throws(() => log.append(payload(1, 5)), /refuses appends/);
  await log.close();
  assert.deepEqual(segmentNames(dir), [
    "00000000000000000001.log",
    "00000000000000000002.log",
    "00000000000000000003.log",
  ]);

  assert.deepEqual(await reopenRecords({ dir }), [...early, during]);
  assert.deepEqual(segmentNames(dir), ["00000000000000000001.log", "00000000000000000003.log"]);
  assert.deepEqual(await reopenRecords({ dir }), [...early, during]);
});

test("a damaged base segment whose older segments are gone makes open throw instead of replaying around it", async (t) => {
  const dir = tempDir(t);
  const log = AppendLog.open({ dir }, noReplay);
  await appendFlushing(log, [payload(10, 1), payload(10, 2)], 2);
  await log.rewrite([payload(50, 3), payload(50, 4)]);
  log.append(payload(10, 5));
  await log.flush();
  await log.close();
  assert.deepEqual(segmentNames(dir), ["00000000000000000002.log", "00000000000000000003.log"]);
  flipByte(segmentPath(dir, 2), segmentHeaderBytes + frameHeaderBytes + 10);

  assert.throws(
    () => AppendLog.open({ dir }, () => {}),
    /00000000000000000002\.log at offset 28: a record's payload fails its CRC, in the base that MANIFEST names as complete/,
  );
  assert.deepEqual(
    segmentNames(dir),
    ["00000000000000000002.log", "00000000000000000003.log"],
    "nothing deleted",
  );
});

test("a segment missing from the middle of the log makes open throw", async (t) => {
  const dir = tempDir(t);
  const segmentBytesMax = 256;
  const log = AppendLog.open({ dir, segmentBytesMax }, noReplay);
  await appendFlushing(log, records100(6), 2);
  await log.close();
  unlinkSync(segmentPath(dir, 2));

  assert.throws(
    () => AppendLog.open({ dir, segmentBytesMax }, () => {}),
    /00000000000000000003\.log at offset 0: follows 00000000000000000002\.log, but the log holds 00000000000000000001\.log before it: a segment .* is missing/,
  );
});
