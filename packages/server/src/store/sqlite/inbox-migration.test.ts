/**
 * Migration 6 (schema.ts) moves what an inbox entry's secondary indexes and id rows gave into its
 * append's body row. A file written under migration 5 opens after it with every entry, every
 * remembered id and every body's reference count, and trims, expiry and duplicates work on it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { seededRandom } from "../../random.js";
import { bodyCrc } from "./integrity.js";
import { migrations } from "./schema.js";
import { SqliteStore } from "./sqlite-store.js";

const minute = 60_000;
const t0 = 1_700_000_000_000;
const attributes = {
  maxAgeMs: 60 * minute,
  maxDepth: 100,
  forgetDeviceAfterMs: 30 * minute,
  stopFanoutAfterMs: null,
  dedupWindowMs: 10 * minute,
};

/** A file at migration 5 holding what that layout's store wrote: two appends, one to a and b. */
function writeMigration5File(path: string): void {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  for (const migration of migrations.slice(0, 5)) db.exec(migration);
  db.pragma("user_version = 5");
  db.prepare(
    "INSERT INTO inboxes (inbox_id, name, attributes, epoch, created_at) VALUES (1, 'chat', ?, 'e1', ?)",
  ).run(JSON.stringify(attributes), t0);
  const body = db.prepare(
    "INSERT INTO inbox_bodies (body_id, inbox_id, message_id, body, body_crc, content_type, headers) VALUES (?, 1, ?, ?, ?, 'text/plain', NULL)",
  );
  body.run(1, "m-1", Buffer.from("one"), bodyCrc(Buffer.from("one")));
  body.run(2, "m-2", Buffer.from("two"), bodyCrc(Buffer.from("two")));
  const entry = db.prepare("INSERT INTO inbox_entries VALUES (1, ?, ?, ?, ?)");
  entry.run("a", 1, 1, t0);
  entry.run("b", 1, 1, t0);
  entry.run("a", 2, 2, t0 + minute);
  const id = db.prepare("INSERT INTO inbox_ids VALUES (1, ?, ?, ?, ?)");
  id.run("a", "m-1", 1, t0 + 10 * minute);
  id.run("b", "m-1", 1, t0 + 10 * minute);
  id.run("a", "m-2", 2, t0 + 11 * minute);
  db.prepare("INSERT INTO inbox_recipients VALUES (1, 'a', 2, NULL), (1, 'b', 1, NULL)").run();
  db.close();
}

function bodiesLeft(path: string): Array<{ body_id: number; refs: number; appended_at: number }> {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT body_id, refs, appended_at FROM inbox_bodies ORDER BY body_id").all() as Array<{
      body_id: number;
      refs: number;
      appended_at: number;
    }>;
  } finally {
    db.close();
  }
}

test("sqlite: an inbox file of migration 5 opens with its entries, ids and bodies' counts", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-inbox-migration-"));
  const path = join(dir, "hopper.db");
  try {
    writeMigration5File(path);
    const store = new SqliteStore({ path, random: seededRandom(1), integrityCheck: false });
    try {
      const read = await store.inboxRead({ name: "chat", recipient: "a", after: 0, limit: 10 });
      assert.deepEqual(
        read.entries.map((entry) => [entry.seq, entry.id, entry.appendedAt]),
        [
          [1, "m-1", t0],
          [2, "m-2", t0 + minute],
        ],
      );
      const again = await store.inboxAppend({
        name: "chat",
        recipients: ["b", "a", "c"],
        message: { id: "m-1", body: Buffer.from("one"), contentType: "text/plain", headers: {} },
        now: t0 + 2 * minute,
      });
      assert.deepEqual(again.results, [
        { recipient: "b", seq: 1, duplicate: true },
        { recipient: "a", seq: 1, duplicate: true },
        { recipient: "c", seq: 1, duplicate: false },
      ]);
      await store.inboxAck({ name: "chat", recipient: "a", device: "phone", seq: 1, now: t0 + 3 * minute });
      const b = await store.inboxRead({ name: "chat", recipient: "b", after: 0, limit: 10 });
      assert.deepEqual(
        b.entries.map((entry) => [entry.seq, Buffer.from(entry.body).toString()]),
        [[1, "one"]],
        "a's trim leaves the body b's entry names",
      );
      // Just past an hour after t0, b's entry (appended at t0) expires, and the body goes with it; a's
      // second entry, appended a minute later, stays, as does c's.
      const swept = await store.inboxSweep({ name: "chat", now: t0 + 60 * minute + 1, max: 100 });
      assert.equal(swept.expired, 1);
    } finally {
      await store.close();
    }
    assert.deepEqual(
      bodiesLeft(path).map((body) => [body.body_id, body.refs, body.appended_at]),
      [
        [2, 1, t0 + minute],
        [3, 1, t0 + 2 * minute],
      ],
      "body 1 went with its last entry",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
