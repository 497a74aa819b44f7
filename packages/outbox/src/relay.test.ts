import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { runRelay } from "./relay.js";

test("a mode that is not built is refused, not silently replaced by polling", () => {
  const db = new Database(":memory:");
  assert.throws(
    () => runRelay({ db, hopper: { url: "http://127.0.0.1:1" }, mode: "wal" as "poll" }),
    /mode "wal" is not built yet/,
  );
  assert.throws(() => runRelay({ db, hopper: { url: "http://127.0.0.1:1" }, batchRowsMax: 101 }), RangeError);
  db.close();
});
