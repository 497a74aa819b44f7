/**
 * The log store keeps inbox bodies in its segment files, not in memory (inbox-state.ts): what waits for
 * absent devices is bounded by the disk. Each test reads the bodies back, byte for byte, after the
 * write, after a reopen (replay places them) and after a compaction (the base holds them).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type TestContext, test } from "node:test";
import type { InboxAttributes } from "../../model/inbox.js";
import { seededRandom } from "../../random.js";
import { patternedBody } from "../../testing/log-store-helpers.js";
import { LogStore } from "./log-store.js";

const attributes: InboxAttributes = {
  maxAgeMs: 86_400_000,
  maxDepth: 100_000,
  forgetDeviceAfterMs: 86_400_000,
  stopFanoutAfterMs: null,
  dedupWindowMs: 3_600_000,
};
const bodyBytes = 10 * 1024;
const appends = 200;

/** A body that differs with `index` in every byte, so a body read from the wrong place shows. */
function body(index: number): Buffer {
  return patternedBody(index, bodyBytes);
}

function open(dir: string): LogStore {
  return LogStore.open({ dir, random: seededRandom(1) });
}

async function assertBodies(store: LogStore, recipient: string, from: number): Promise<void> {
  const read = await store.inboxRead({ name: "chat", recipient, after: from - 1, limit: appends });
  assert.equal(read.entries.length, appends - from + 1);
  for (const entry of read.entries) {
    assert.deepEqual(Buffer.from(entry.body as Buffer), body(entry.seq), `entry ${entry.seq}'s body`);
    assert.equal(entry.id, `m${entry.seq}`);
  }
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "hopper-inbox-bodies-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test("inbox bodies leave memory once written, and read back from the segments after reopen and compaction", async (t) => {
  const dir = tempDir(t);
  const store = open(dir);
  await store.inboxUpsert({ name: "chat", attributes, epoch: "e1", now: 1 });
  const before = store.held.bytes;
  for (let seq = 1; seq <= appends; seq++) {
    const message = { id: `m${seq}`, body: body(seq), contentType: "application/octet-stream", headers: {} };
    await store.inboxAppend({ name: "chat", recipients: ["ada", "bob"], message, now: 2 });
  }
  const total = appends * bodyBytes;
  assert.equal(store.held.inboxBodyBytesOnDisk, total, "every body is only on disk");
  assert.ok(
    store.held.bytes - before < total / 10,
    `memory grew ${store.held.bytes - before} B for ${total} B of bodies`,
  );
  await assertBodies(store, "ada", 1);
  await assertBodies(store, "bob", 1);
  await store.close();

  const reopened = open(dir);
  assert.equal(reopened.held.inboxBodyBytesOnDisk, total, "replay places the bodies, it does not load them");
  await assertBodies(reopened, "bob", 1);
  await reopened.compact();
  assert.equal(readdirSync(dir).filter((name) => name.endsWith(".log")).length, 1, "only the base is left");
  await assertBodies(reopened, "ada", 1);
  await reopened.close();

  const compacted = open(dir);
  await assertBodies(compacted, "ada", 1);
  // Both recipients' devices ack half: those bodies go, from disk accounting too.
  for (const recipient of ["ada", "bob"])
    await compacted.inboxAck({ name: "chat", recipient, device: "phone", seq: appends / 2, now: 3 });
  assert.equal(compacted.held.inboxBodyBytesOnDisk, total / 2);
  await assertBodies(compacted, "bob", appends / 2 + 1);
  await compacted.close();
});

test("a body appended while a compaction runs is read back from wherever it landed", async (t) => {
  const dir = tempDir(t);
  const store = open(dir);
  await store.inboxUpsert({ name: "chat", attributes, epoch: "e1", now: 1 });
  const append = (seq: number) =>
    store.inboxAppend({
      name: "chat",
      recipients: ["ada"],
      message: { id: `m${seq}`, body: body(seq), contentType: "application/octet-stream", headers: {} },
      now: 2,
    });
  for (let seq = 1; seq <= appends / 2; seq++) await append(seq);
  const compaction = store.compact();
  for (let seq = appends / 2 + 1; seq <= appends; seq++) await append(seq);
  await compaction;
  await assertBodies(store, "ada", 1);
  await store.close();
  const reopened = open(dir);
  await assertBodies(reopened, "ada", 1);
  await reopened.close();
});
