/**
 * Group commit with the log flushed off the event loop: a job settles only after a flush that began
 * after its commit returned; commits that return during a flush share the next one; a failed flush
 * fails its jobs.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { settle } from "../../clock.js";
import { GroupCommit } from "./group-commit.js";

/** A flush the test ends by hand, and a record of how many commits each flush covered. */
function manualFlush(db: Database.Database) {
  const flushes: { committedRows: number; end: (error?: Error) => void }[] = [];
  const flushLog = () =>
    new Promise<void>((resolve, reject) => {
      const { n } = db.prepare("SELECT count(*) AS n FROM t").get() as { n: number };
      flushes.push({ committedRows: n, end: (error) => (error ? reject(error) : resolve()) });
    });
  return { flushes, flushLog };
}

function track<T>(promise: Promise<T>): () => "pending" | "resolved" | "rejected" {
  let state: "pending" | "resolved" | "rejected" = "pending";
  promise.then(
    () => {
      state = "resolved";
    },
    () => {
      state = "rejected";
    },
  );
  return () => state;
}

test("a job settles only once a flush that began after its commit has ended", async () => {
  const db = new Database(":memory:");
  db.exec("CREATE TABLE t (x INTEGER)");
  const { flushes, flushLog } = manualFlush(db);
  const writes = new GroupCommit(db, flushLog);
  const insert = db.prepare("INSERT INTO t VALUES (1)");
  const first = track(writes.run(() => insert.run()));
  await settle();
  assert.equal(flushes.length, 1, "the commit started a flush");
  assert.equal(flushes[0]?.committedRows, 1, "the flush began after the commit");
  assert.equal(first(), "pending", "committed, not yet durable: not confirmed");
  // Two more commits while the first flush runs: they wait for the next flush, and share it.
  const second = track(writes.run(() => insert.run()));
  await settle();
  const third = track(writes.run(() => insert.run()));
  await settle();
  assert.equal(flushes.length, 1, "no second flush while one runs");
  flushes[0]?.end();
  await settle();
  assert.equal(first(), "resolved");
  assert.deepEqual(
    [second(), third()],
    ["pending", "pending"],
    "the first flush began before they committed",
  );
  assert.equal(flushes.length, 2);
  assert.equal(flushes[1]?.committedRows, 3, "one flush for both later commits");
  flushes[1]?.end();
  await settle();
  assert.deepEqual([second(), third()], ["resolved", "resolved"]);
  assert.deepEqual(writes.stats, { commits: 3, jobs: 3, flushes: 2 });
  writes.close();
  db.close();
});

test("a failed flush rejects the jobs it was to make durable, and later ones still flush", async () => {
  const db = new Database(":memory:");
  db.exec("CREATE TABLE t (x INTEGER)");
  const { flushes, flushLog } = manualFlush(db);
  const writes = new GroupCommit(db, flushLog);
  const insert = db.prepare("INSERT INTO t VALUES (1)");
  const failed = writes.run(() => insert.run());
  failed.catch(() => {});
  const failedState = track(failed);
  await settle();
  flushes[0]?.end(new Error("EIO"));
  await settle();
  assert.equal(failedState(), "rejected");
  const later = track(writes.run(() => insert.run()));
  await settle();
  flushes[1]?.end();
  await settle();
  assert.equal(later(), "resolved");
  writes.close();
  db.close();
});
