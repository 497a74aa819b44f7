/**
 * A test-only entry: an application or a relay in a process of its own, which stops at an exact point
 * (OUTBOX_TEST_PAUSE_AT) and says so on stdout, so that a test's kill -9 lands there and nowhere else.
 * Nothing outside src/testing reads these variables.
 *
 *   OUTBOX_TEST_ROLE      "app": writes OUTBOX_TEST_EVENTS (JSON) in one transaction, commits, pauses
 *                         "relay": runs the relay, pausing at the point named
 *   OUTBOX_TEST_DB        sqlite:<file> or postgres://…; OUTBOX_TEST_SCHEMA the PostgreSQL schema
 *   OUTBOX_TEST_PAUSE_AT  after-commit (app), before-publish or after-confirm (relay)
 *   OUTBOX_TEST_HOPPER_URL
 *   OUTBOX_TEST_MODE      "wal": the application writes with insert-and-delete and the relay tails
 *                         the slot (PostgreSQL); otherwise polling
 *
 * Lines printed: `paused <point> <ids as JSON>` once paused.
 */
import type { Database } from "better-sqlite3";
import type { Pool } from "pg";
import type { OutboxEvent, OutboxRow } from "../event.js";
import { openDatabase } from "../open-database.js";
import { startRelay } from "../relay.js";
import type { TableOptions } from "../tables.js";
import { writeOutbox } from "../write-outbox.js";

const env = process.env;
const tables: TableOptions = env.OUTBOX_TEST_SCHEMA ? { schema: env.OUTBOX_TEST_SCHEMA } : {};
const pauseAt = env.OUTBOX_TEST_PAUSE_AT;
const mode = env.OUTBOX_TEST_MODE === "wal" ? "wal" : "poll";

/** Says where it stopped and waits for the kill (an interval keeps the process alive). */
function pause(point: string, ids: string[]): Promise<never> {
  process.stdout.write(`paused ${point} ${JSON.stringify(ids)}\n`);
  setInterval(() => {}, 60_000);
  return new Promise<never>(() => {});
}

const opened = await openDatabase(env.OUTBOX_TEST_DB as string);
if (env.OUTBOX_TEST_ROLE === "app") {
  const events = JSON.parse(env.OUTBOX_TEST_EVENTS as string) as OutboxEvent[];
  const ids: string[] = [];
  if (opened.dialect === "sqlite") {
    const db = opened.db as Database;
    db.transaction(() => {
      for (const event of events) ids.push(writeOutbox(db, event, tables).id);
    })();
  } else {
    const client = await (opened.db as Pool).connect();
    await client.query("BEGIN");
    for (const event of events) ids.push((await writeOutbox(client, event, { ...tables, mode })).id);
    await client.query("COMMIT");
  }
  if (pauseAt === "after-commit") await pause("after-commit", ids);
  await opened.close();
} else {
  const at = (point: string) => async (rows: readonly OutboxRow[]) => {
    if (pauseAt === point)
      await pause(
        point,
        rows.map((row) => row.id),
      );
  };
  startRelay(
    { db: opened.db, hopper: { url: env.OUTBOX_TEST_HOPPER_URL as string }, ...tables, mode },
    { beforePublish: at("before-publish"), afterConfirm: at("after-confirm") },
  );
}
