import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import { Registry } from "prom-client";
import type { RelayMetrics } from "./relay.js";
import { runRelay } from "./relay.js";
import { registerRelayMetrics } from "./relay-metrics.js";
import { resolveTables, resolveWalNames } from "./tables.js";
import { formatLsn, parseLsn } from "./wal-relay.js";
import { writeOutbox } from "./write-outbox.js";

test("options a relay cannot honour are refused, not silently replaced", () => {
  const db = new Database(":memory:");
  const hopper = { url: "http://127.0.0.1:1" };
  assert.throws(() => runRelay({ db, hopper, mode: "wal" }), /the WAL mode takes a pg Pool/);
  assert.throws(() => runRelay({ db, hopper, mode: "tail" as "wal" }), /mode must be "poll" or "wal"/);
  assert.throws(() => runRelay({ db, hopper, batchRowsMax: 101 }), RangeError);
  assert.throws(
    () => writeOutbox(db, { destination: { queue: "q" }, body: {} }, { mode: "wal" }),
    /the WAL mode needs PostgreSQL/,
  );
  db.close();
});

test("LSNs: PostgreSQL's X/Y text, either padding, to a number and back", () => {
  assert.equal(parseLsn("0/153CB50"), 0x153cb50n);
  assert.equal(parseLsn("00000001/0153CB50"), (1n << 32n) | 0x153cb50n);
  assert.equal(formatLsn(parseLsn("16/B374D848")), "16/B374D848");
  assert.ok(parseLsn("1/0") > parseLsn("0/FFFFFFFF"));
});

test("the slot and publication names default from the tables and are checked", () => {
  const tables = resolveTables({ schema: "app", prefix: "x_" }, "postgres");
  assert.deepEqual(resolveWalNames(tables), { slot: "x_outbox_app", publication: "x_outbox_app" });
  assert.deepEqual(resolveWalNames(tables, { slotName: "s1" }), { slot: "s1", publication: "x_outbox_app" });
  assert.throws(() => resolveWalNames(tables, { slotName: "Bad-Name" }), /slot name/);
});

test("the relay's metrics in a prom-client registry: read at scrape time, removed again", async () => {
  const registry = new Registry();
  let reads = 0;
  const current: RelayMetrics = {
    mode: "wal",
    published: 7,
    failed: 1,
    pendingRows: 3,
    failedRows: 2,
    oldestPendingAgeMs: 1500,
    slotLagBytes: 4096,
    pausedDestinations: [],
    pausedOn: undefined,
  };
  const unregister = registerRelayMetrics(
    registry,
    {
      metrics: async () => {
        reads++;
        return { ...current };
      },
    },
    "wal",
  );
  let text = await registry.metrics();
  assert.equal(reads, 1, "one read per scrape, shared by the families");
  assert.match(text, /^hopper_outbox_pending_rows 3$/m);
  assert.match(text, /^hopper_outbox_oldest_pending_age_seconds 1.5$/m);
  assert.match(text, /^hopper_outbox_failed_rows 2$/m);
  assert.match(text, /^hopper_outbox_published_total 7$/m);
  assert.match(text, /^hopper_outbox_failed_total 1$/m);
  assert.match(text, /^hopper_outbox_slot_lag_bytes 4096$/m);
  current.published = 9;
  current.pendingRows = 0;
  text = await registry.metrics();
  assert.match(text, /^hopper_outbox_published_total 9$/m);
  assert.match(text, /^hopper_outbox_pending_rows 0$/m);
  unregister();
  assert.doesNotMatch(await registry.metrics(), /hopper_outbox/);

  const polling = registerRelayMetrics(
    registry,
    { metrics: async () => ({ ...current, mode: "poll" }) },
    "poll",
  );
  assert.doesNotMatch(await registry.metrics(), /slot_lag/, "polling has no slot");
  polling();
});
