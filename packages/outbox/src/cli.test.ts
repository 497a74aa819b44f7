import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { fetchUntil, spawnOutboxCommand } from "./testing/helpers.js";
import { freePort } from "./testing/hopper-process.js";
import { writeOutbox } from "./write-outbox.js";

const run = promisify(execFile);
const bin = fileURLToPath(new URL("../bin/hopper-outbox.js", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "hopper-outbox-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function outbox(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [bin, ...args]);
  return stdout;
}

test("hopper-outbox migrate, status, retry and drop on a SQLite file", async () => {
  const file = join(dir, "app.db");
  const db = `sqlite:${file}`;
  assert.match(await outbox("migrate", "--db", db), /applied migrations 1/);
  assert.match(await outbox("migrate", "--db", db), /up to date/);
  const app = new Database(file);
  const first = writeOutbox(app, { destination: { queue: "orders" }, key: "k", body: { n: 1 } });
  writeOutbox(app, { destination: { queue: "orders" }, key: "k", body: { n: 2 } });
  const fail = () =>
    app
      .prepare("UPDATE hopper_outbox SET state = 'failed', failed_at = 1, error = ? WHERE id = ?")
      .run(JSON.stringify({ code: "message_too_large", message: "too large" }), first.id);
  fail();
  const status = JSON.parse(await outbox("status", "--db", db, "--json"));
  assert.equal(status.pendingRows, 1);
  assert.equal(status.failed[0].id, first.id);
  assert.equal(status.failed[0].waitingBehind, 1);
  assert.match(await outbox("status", "--db", db), /message_too_large: too large {2}\(1 waiting behind it\)/);
  assert.match(await outbox("retry", "--db", db, first.id), /^1 row/);
  assert.match(await outbox("drop", "--db", db, first.id), /^0 row/, "a pending row is never dropped");
  fail();
  assert.match(await outbox("drop", "--db", db, first.id), /^1 row/);
  assert.equal(JSON.parse(await outbox("status", "--db", db, "--json")).failedRows, 0);
  app.close();
});

test("hopper-outbox relay --metrics-port serves the relay's metrics on loopback", async () => {
  const file = join(dir, "metrics.db");
  await outbox("migrate", "--db", `sqlite:${file}`);
  const app = new Database(file);
  for (const n of [1, 2]) writeOutbox(app, { destination: { queue: "orders" }, body: { n } });
  app.close();
  const metricsPort = await freePort();
  // Hopper is unreachable: the rows stay pending, and the metrics say so.
  const relay = spawnOutboxCommand([
    "relay",
    "--db",
    `sqlite:${file}`,
    "--url",
    "http://127.0.0.1:1",
    "--metrics-port",
    String(metricsPort),
  ]);
  try {
    const text = await fetchUntil(
      `http://127.0.0.1:${metricsPort}/metrics`,
      /^hopper_outbox_pending_rows 2$/m,
    );
    assert.match(text, /^hopper_outbox_published_total 0$/m);
    assert.match(text, /^hopper_outbox_oldest_pending_age_seconds \d/m);
    assert.doesNotMatch(text, /slot_lag/);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status, 404);
  } finally {
    assert.equal(await relay.stop(), 0, relay.output());
  }
});
