import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { seededRandom } from "../../random.js";
import { attributes } from "../conformance-fixtures.js";
import { noSendPolicy } from "../store.js";
import { exerciseStore } from "../store-conformance.js";
import { SqliteStore } from "./sqlite-store.js";

exerciseStore({
  name: "sqlite",
  create: async () => new SqliteStore({ path: ":memory:", random: seededRandom(7) }),
});

test("sqlite: a file store keeps its messages across reopen, and concurrent writes share commits", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-sqlite-"));
  try {
    const path = join(dir, "hopper.db");
    const store = new SqliteStore({ path, random: seededRandom(1) });
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: 1 });
    const before = store.commitStats;
    await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        store.queueSendMany({
          now: 1,
          sends: [
            {
              queue: "q",
              policy: noSendPolicy,
              messages: [
                {
                  id: `m${i}`,
                  body: Buffer.from("x"),
                  contentType: "text/plain",
                  headers: {},
                  key: null,
                  priority: 0,
                  dedupId: null,
                  publishedAt: 1,
                  visibleAt: 1,
                },
              ],
            },
          ],
        }),
      ),
    );
    const after = store.commitStats;
    assert.equal(after.jobs - before.jobs, 100);
    assert.ok(
      after.commits - before.commits < 10,
      `100 sends took ${after.commits - before.commits} commits`,
    );
    await store.close();
    const reopened = new SqliteStore({ path, random: seededRandom(2) });
    assert.equal((await reopened.queueDepth({ name: "q", now: 2 })).available, 100);
    await reopened.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
