/**
 * Every inbox statement that serves one append, read, ack or trim finds its rows by key: SQLite's plan
 * for it searches each table by more than the namespace (or walks a JSON array the statement was
 * given). A planner that picks a covering index over the namespace's rows instead (as it does for a
 * device's latest lastSeenAt without the CROSS JOIN) makes an append cost the whole namespace.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import Database from "better-sqlite3";
import * as statements from "./inbox-statements.js";
import { migrations } from "./schema.js";

/** Statements about a whole namespace, which read or delete all of it by design. */
const namespaceWide = new Set(["inboxCount", "inboxSelectAll", "inboxSizes", "inboxDelete"]);

test("sqlite: the inbox statements that serve one call search by key, never the namespace", () => {
  const db = new Database(":memory:");
  for (const migration of migrations) db.exec(migration);
  const checked: string[] = [];
  for (const [name, text] of Object.entries(statements)) {
    if (namespaceWide.has(name)) continue;
    const params = Object.fromEntries([...text.matchAll(/:(\w+)/g)].map((match) => [match[1], 1]));
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params) as Array<{ detail: string }>).map(
      (row) => row.detail,
    );
    const wide = plan.filter(
      (step) => /^SCAN (?!j\b|json_each\b)/.test(step) || /\(inbox_id=\?\)/.test(step),
    );
    assert.deepEqual(wide, [], `${name}: ${plan.join(" | ")}`);
    checked.push(name);
  }
  assert.ok(checked.includes("devicesLastSeen") && checked.includes("entryDeletePairs"), checked.join(", "));
  db.close();
});
