/**
 * Group commit runs a batch's jobs without savepoints, and again with one per job when a job threw:
 * whichever way, a job that throws after writing leaves none of its writes, and the others commit.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { GroupCommit } from "./group-commit.js";

function openTable() {
  const db = new Database(":memory:");
  db.exec("CREATE TABLE t (v TEXT PRIMARY KEY) STRICT");
  const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
  const values = () =>
    (db.prepare("SELECT v FROM t ORDER BY v").all() as Array<{ v: string }>).map((r) => r.v);
  return { db, insert, values };
}

test("group commit: a job that throws after writing fails alone, its writes undone", async () => {
  const { db, insert, values } = openTable();
  const commits = new GroupCommit(db, 100);
  const runs: string[] = [];
  const job = (name: string, fail = false) =>
    commits.run(() => {
      runs.push(name);
      insert.run(name);
      if (fail) throw new Error(`${name} refused`);
      return name;
    });
  const settled = await Promise.allSettled([job("a"), job("b", true), job("c")]);
  assert.deepEqual(
    settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message)),
    ["a", "b refused", "c"],
  );
  assert.deepEqual(values(), ["a", "c"]);
  assert.deepEqual(runs, ["a", "b", "a", "b", "c"], "b's throw ran the batch again, with savepoints");
  assert.deepEqual(commits.stats, { commits: 1, jobs: 3 });
});

test("group commit: a batch whose jobs all succeed runs each once; a lone failing job, once", async () => {
  const { db, insert, values } = openTable();
  const commits = new GroupCommit(db, 100);
  let runs = 0;
  const job = (name: string, fail = false) =>
    commits.run(() => {
      runs++;
      insert.run(name);
      if (fail) throw new Error("refused");
    });
  await Promise.all([job("a"), job("b"), job("c")]);
  assert.equal(runs, 3);
  await assert.rejects(job("d", true), /refused/);
  assert.equal(runs, 4, "a batch of one is not run again");
  assert.deepEqual(values(), ["a", "b", "c"]);
});
