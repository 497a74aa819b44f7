/**
 * `hopper outbox …` runs `hopper-outbox` of @hopper/outbox with the same arguments: its answers, its
 * output and its exit codes come through as they are.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { runCli } from "../testing/cli-process.js";

test("hopper outbox migrate and status run the outbox's command on the application's database", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hopper-outbox-cli-"));
  try {
    const db = `sqlite:${join(dir, "app.db")}`;
    const migrated = await runCli(["outbox", "migrate", "--db", db]);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, /applied migrations/);
    const status = await runCli(["outbox", "status", "--db", db, "--json"]);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual(JSON.parse(status.stdout), { pendingRows: 0, failedRows: 0, failed: [] });
    const refused = await runCli(["outbox", "retry", "--db", db]);
    assert.equal(refused.code, 2, "hopper-outbox's usage error and its exit code come through");
    assert.match(refused.stderr, /name the failed rows' ids, or give --all/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
