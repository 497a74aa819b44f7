/**
 * The log store keeps stream records in its segment files, not in memory (stream-state.ts): memory
 * holds one index entry per append call and partition. Each test reads the records back, byte for
 * byte, after the write, after a reopen (replay places them) and after a compaction (the base holds
 * them), and a damaged byte is refused, never served.
 */
import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type TestContext, test } from "node:test";
import { HopperError } from "../../errors.js";
import type { StreamAttributes } from "../../model/stream.js";
import { seededRandom } from "../../random.js";
import { patternedBody } from "../../testing/log-store-helpers.js";
import { LogStore } from "./log-store.js";

const attributes: StreamAttributes = {
  retentionMs: null,
  retentionBytes: null,
  retentionRecords: null,
  dedupWindowMs: 0,
  memberTimeoutMs: 30_000,
  groupIdleExpiryMs: 3_600_000,
};
const bodyBytes = 4 * 1024;
const calls = 50;
const perCall = 10;
const total = calls * perCall;

/** A body that differs with `index` in every byte, so a body read from the wrong place shows. */
function body(index: number): Buffer {
  return patternedBody(index, bodyBytes);
}

function open(dir: string): LogStore {
  return LogStore.open({ dir, random: seededRandom(1) });
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "hopper-stream-records-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function fill(store: LogStore): Promise<void> {
  await store.streamUpsert({ name: "s", attributes, partitions: 2, now: 1 });
  for (let call = 0; call < calls; call++) {
    const records = Array.from({ length: perCall }, (_, i) => ({
      partition: 0,
      body: body(call * perCall + i),
      contentType: "application/octet-stream",
      headers: { n: String(call * perCall + i) },
      key: null,
      dedupId: null,
    }));
    await store.streamAppend({ name: "s", records, now: 2 + call });
  }
}

async function assertRecords(store: LogStore, from: number): Promise<void> {
  for (let offset = from; offset < total; ) {
    const { records } = await store.streamRead({
      name: "s",
      partition: 0,
      position: { offset },
      limit: 64,
      bytesMax: 1024 * 1024,
    });
    assert.ok(records.length > 0);
    for (const record of records) {
      assert.equal(record.offset, offset);
      assert.deepEqual(Buffer.from(record.body as Buffer), body(offset), `record ${offset}'s body`);
      assert.deepEqual(record.headers, { n: String(offset) });
      assert.equal(record.timestamp, 2 + Math.floor(offset / perCall));
      offset++;
    }
  }
}

test("stream records leave memory once written, and read back from the segments after reopen and compaction", async (t) => {
  const dir = tempDir(t);
  const store = open(dir);
  const before = store.held.bytes;
  await fill(store);
  const bytes = total * bodyBytes;
  assert.equal(store.held.streamRecordBytesOnDisk, bytes, "every record is only on disk");
  assert.ok(
    store.held.bytes - before < bytes / 50,
    `memory grew ${store.held.bytes - before} B for ${bytes} B`,
  );
  await assertRecords(store, 0);
  await store.close();

  const reopened = open(dir);
  assert.equal(
    reopened.held.streamRecordBytesOnDisk,
    bytes,
    "replay places the records, it does not load them",
  );
  await assertRecords(reopened, 0);
  await reopened.compact();
  assert.equal(readdirSync(dir).filter((name) => name.endsWith(".log")).length, 1, "only the base is left");
  await assertRecords(reopened, 0);
  await reopened.close();

  const compacted = open(dir);
  await assertRecords(compacted, 0);
  // Retention by count takes whole chunks off the index, and their bytes off what lies on disk.
  await compacted.streamUpsert({
    name: "s",
    attributes: { ...attributes, retentionRecords: total / 2 + 5 },
    partitions: 2,
    now: 3,
  });
  assert.deepEqual(await compacted.streamSweep({ name: "s", now: 100, max: 10_000 }), {
    expired: total / 2 - 5,
  });
  assert.equal(
    compacted.held.streamRecordBytesOnDisk,
    (total / 2 + perCall) * bodyBytes,
    "a chunk partly retained stays",
  );
  await assertRecords(compacted, total / 2 - 5);
  await compacted.close();
});

test("a stream record whose bytes on disk were damaged is refused with store_damaged", async (t) => {
  const dir = tempDir(t);
  const store = open(dir);
  await fill(store);
  // Flip one byte inside the first record's body, in the newest segment, where the appends lie.
  const segment = readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort()
    .at(-1) as string;
  const fd = openSync(join(dir, segment), "r+");
  const bytes = Buffer.alloc(1 << 20);
  const length = readSync(fd, bytes, 0, bytes.length, 0);
  const marker = body(0).subarray(0, 64);
  const at = bytes.subarray(0, length).indexOf(marker);
  assert.ok(at > 0, "the first record's body is in the segment");
  writeSync(fd, Buffer.from([(bytes[at + 10] as number) ^ 0xff]), 0, 1, at + 10);
  closeSync(fd);
  await assert.rejects(
    store.streamRead({ name: "s", partition: 0, position: { offset: 0 }, limit: 1, bytesMax: 1024 }),
    (error: unknown) => error instanceof HopperError && error.code === "store_damaged",
  );
  await store.close();
});
