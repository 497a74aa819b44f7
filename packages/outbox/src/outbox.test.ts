/**
 * The outbox end to end, on each application database: a real `hopper serve`, the relay and the
 * application in processes of their own where a kill -9 must land, and processOnce consumers. One body
 * runs against SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HopperClient, type ReceivedMessage } from "@hopper/client";
import type { Database } from "better-sqlite3";
import type { Pool } from "pg";
import { dropFailed, migrate, outboxStatus } from "./admin.js";
import { outboxIdHeader } from "./event.js";
import type { OpenedDatabase } from "./open-database.js";
import { processOnce } from "./process-once.js";
import { runRelay } from "./relay.js";
import { type TestDatabase, testDatabaseKinds } from "./testing/app-databases.js";
import {
  assertOrderPerKey,
  poisonQueueEvents,
  receiveAll,
  routeToQueue,
  waitFor,
  writeEvents,
} from "./testing/helpers.js";
import { freePort, type HopperProcess, startHopper } from "./testing/hopper-process.js";
import { appKilledAfterCommit, type CrashScenario, relayKilledAfterConfirm } from "./testing/scenarios.js";

/** The application's own table of applied effects: one row per time an effect ran. */
async function createEffects(opened: OpenedDatabase, schema: string | undefined): Promise<string> {
  const table = schema ? `"${schema}".effects` : "effects";
  if (opened.dialect === "sqlite")
    (opened.db as Database).exec(`CREATE TABLE IF NOT EXISTS ${table} (outbox_id TEXT, consumer TEXT)`);
  else await (opened.db as Pool).query(`CREATE TABLE IF NOT EXISTS ${table} (outbox_id text, consumer text)`);
  return table;
}

async function countEffects(opened: OpenedDatabase, table: string): Promise<number> {
  if (opened.dialect === "sqlite") {
    return ((opened.db as Database).prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  }
  return Number((await (opened.db as Pool).query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
}

/** Runs the effect (insert a row into `table`) under processOnce. */
async function applyOnce(
  opened: OpenedDatabase,
  table: string,
  consumer: string,
  message: ReceivedMessage,
  tables: object,
) {
  const outboxId = message.headers?.[outboxIdHeader] ?? message.id;
  if (opened.dialect === "sqlite") {
    const db = opened.db as Database;
    return processOnce(
      db,
      { consumer, message },
      (tx) => {
        tx.prepare(`INSERT INTO ${table} VALUES (?, ?)`).run(outboxId, consumer);
      },
      tables,
    );
  }
  return processOnce(
    opened.db as Pool,
    { consumer, message },
    async (tx) => {
      await tx.query(`INSERT INTO ${table} VALUES ($1, $2)`, [outboxId, consumer]);
    },
    tables,
  );
}

for (const kind of testDatabaseKinds) {
  describe(`outbox on ${kind.label}`, { skip: kind.skip, concurrency: false }, () => {
    // Over 80 lines: one describe block of end-to-end tests sharing a server and databases.
    let dir: string;
    let port: number;
    let hopperServer: HopperProcess;
    let hopper: HopperClient;
    let database: TestDatabase;
    let app: OpenedDatabase;
    let queueNumber = 0;
    const newQueue = async (attributes: object = {}) => {
      const name = `q${queueNumber++}`;
      await hopper.putQueue(name, attributes);
      return name;
    };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "hopper-outbox-broker-"));
      port = await freePort();
      hopperServer = await startHopper(join(dir, "hopper.db"), port);
      hopper = new HopperClient({ url: hopperServer.url });
      database = await kind.create();
      app = await database.open();
      assert.deepEqual((await migrate(app.db, database.tables)).applied, [1]);
      assert.deepEqual((await migrate(app.db, database.tables)).applied, [], "migrate is idempotent");
    });
    after(async () => {
      await hopper?.close();
      await hopperServer?.stop();
      await database?.remove();
      rmSync(dir, { recursive: true, force: true });
    });

    const childEnv = (extra: Record<string, string>) => ({
      OUTBOX_TEST_DB: database.url,
      OUTBOX_TEST_HOPPER_URL: hopperServer.url,
      ...(database.tables.schema ? { OUTBOX_TEST_SCHEMA: database.tables.schema } : {}),
      ...extra,
    });

    test("events reach queues and exchanges with x-outbox-id and dedupId", async () => {
      const queue = await newQueue();
      await routeToQueue(hopper, queue);
      const ids = await writeEvents(
        app,
        [
          { destination: { queue }, key: "k", body: { n: 1 }, headers: { traceparent: "00-abc" } },
          {
            destination: { exchange: `${queue}.events`, routingKey: "order.placed" },
            body: new Uint8Array([1, 2, 3]),
            contentType: "application/octet-stream",
          },
        ],
        database.tables,
      );
      const relay = runRelay({ db: app.db, hopper: { url: hopperServer.url }, ...database.tables });
      try {
        const messages = await receiveAll(hopperServer.url, queue, 2);
        const byId = new Map(messages.map((message) => [message.headers[outboxIdHeader], message]));
        assert.deepEqual(byId.get(ids[0])?.body, { n: 1 });
        assert.equal(byId.get(ids[0])?.headers.traceparent, "00-abc");
        assert.equal(byId.get(ids[0])?.key, "k");
        assert.equal(byId.get(ids[1])?.bodyBase64, "AQID");
        await waitFor("rows marked sent", async () => (await relay.metrics()).published === 2 || undefined);
        const metrics = await relay.metrics();
        assert.equal(metrics.pendingRows, 0);
        assert.equal(metrics.oldestPendingAgeMs, 0);
      } finally {
        await relay.stop();
      }
    });

    const scenario = (checkAfterKill?: () => Promise<void>): CrashScenario => ({
      hopper,
      hopperUrl: hopperServer.url,
      childEnv,
      startRelay: () => runRelay({ db: app.db, hopper: { url: hopperServer.url }, ...database.tables }),
      ...(checkAfterKill ? { checkAfterKill } : {}),
    });

    test("kill -9 of the application after its commit: the restarted relay publishes the event", async () => {
      // The relay claims the row the application committed, and is killed before it publishes.
      await appKilledAfterCommit(scenario(), await newQueue());
    });

    test("kill -9 of the relay between confirm and mark: published twice, applied once", async () => {
      const queue = await newQueue(); // no dedup window: the double publish is visible
      const effects = await createEffects(app, database.tables.schema);
      const [id] = await writeEvents(
        app,
        [{ destination: { queue }, key: "a", body: { pay: 10 } }],
        database.tables,
      );
      const neverMarked = async () =>
        assert.equal(
          (await outboxStatus(app.db, database.tables)).pendingRows,
          1,
          "the row was never marked sent",
        );
      await relayKilledAfterConfirm(scenario(neverMarked), queue, id as string, {
        apply: async (message) =>
          (await applyOnce(app, effects, "billing", message, database.tables)).applied,
        countEffects: () => countEffects(app, effects),
      });
    });

    test("Hopper down for a while: rows wait, then drain in order per key", async () => {
      const queue = await newQueue();
      await hopperServer.stop();
      const errors: string[] = [];
      const relay = runRelay({
        db: app.db,
        hopper: { url: `http://127.0.0.1:${port}` },
        ...database.tables,
        onError: (error) => errors.push(error instanceof Error ? error.message : String(error)),
      });
      try {
        const events = [];
        for (let n = 0; n < 5; n++)
          for (const key of ["a", "b", "c"]) events.push({ destination: { queue }, key, body: { key, n } });
        await writeEvents(app, events, database.tables);
        await waitFor("a failed publish", () => errors.length >= 2 || undefined);
        assert.equal((await relay.metrics()).pendingRows, 15);
        hopperServer = await startHopper(join(dir, "hopper.db"), port);
        const messages = await receiveAll(hopperServer.url, queue, 15);
        assertOrderPerKey(messages, ["a", "b", "c"], 5);
        await waitFor(
          "every row marked sent",
          async () => (await relay.metrics()).pendingRows === 0 || undefined,
        );
      } finally {
        await relay.stop();
      }
    });

    test("a poison row is failed; other keys flow, its key waits and status says so", async () => {
      const queue = await newQueue();
      const events = await poisonQueueEvents(hopper, queue);
      const [poison, behind] = await writeEvents(app, events, database.tables);
      const relay = runRelay({
        db: app.db,
        hopper: { url: hopperServer.url },
        ...database.tables,
        onError: () => {},
      });
      let stopped = false;
      try {
        // Key b's second row is claimed only in a claim after the one that failed the poison row.
        const bMessages = await receiveAll(hopperServer.url, queue, 2);
        assert.deepEqual(
          bMessages.map((message) => message.key),
          ["b", "b"],
        );
        await waitFor("b marked sent", async () => (await relay.metrics()).published === 2 || undefined);
        await relay.stop();
        stopped = true;
        const status = await outboxStatus(app.db, database.tables);
        assert.equal(status.failedRows, 1);
        assert.equal(status.pendingRows, 1);
        assert.equal(status.failed[0]?.id, poison);
        assert.equal(status.failed[0]?.error?.code, "message_too_large");
        assert.equal(status.failed[0]?.waitingBehind, 1);
        assert.deepEqual(await hopper.peek(queue), [], "the row behind the poison one waits");

        assert.equal(await dropFailed(app.db, [poison as string], database.tables), 1);
        const again = runRelay({ db: app.db, hopper: { url: hopperServer.url }, ...database.tables });
        try {
          const [next] = await receiveAll(hopperServer.url, queue, 1);
          assert.equal(next?.headers[outboxIdHeader], behind);
        } finally {
          await again.stop();
        }
      } finally {
        if (!stopped) await relay.stop();
      }
    });

    test("a mandatory exchange publish that routes nowhere fails its row", async () => {
      const exchange = `unbound${queueNumber++}`;
      await hopper.putExchange(exchange, { type: "direct" });
      const [id] = await writeEvents(
        app,
        [{ destination: { exchange, routingKey: "r" }, key: "u", body: {} }],
        database.tables,
      );
      const relay = runRelay({
        db: app.db,
        hopper: { url: hopperServer.url },
        ...database.tables,
        onError: () => {},
      });
      try {
        const failed = await waitFor("the row failed", async () =>
          (await outboxStatus(app.db, database.tables)).failed.find((row) => row.id === id),
        );
        assert.equal(failed.error?.code, "unroutable");
      } finally {
        await relay.stop();
      }
    });

    test("two workers racing on the same message: the effect happens once", async () => {
      const queue = await newQueue();
      const effects = await createEffects(app, database.tables.schema);
      const start = await countEffects(app, effects);
      const outboxId = "0190aaaa-0000-7000-8000-000000000001";
      // The same event published twice, as a relay's double publish would, to two workers at once.
      for (let copy = 0; copy < 2; copy++) {
        await hopper.send(queue, [{ body: { n: 1 }, headers: { [outboxIdHeader]: outboxId } }]);
      }
      const second = await database.open();
      const started: Promise<unknown>[] = [];
      let handled = 0;
      const workers = [app, second].map((db) =>
        hopper.worker(
          queue,
          async (message) => {
            started.push(applyOnce(db, effects, "racer", message, database.tables));
            await started.at(-1);
            handled++;
          },
          { concurrency: 1 },
        ),
      );
      try {
        await waitFor("both copies handled", () => handled === 2 || undefined);
        assert.equal((await countEffects(app, effects)) - start, 1);
      } finally {
        await Promise.all(workers.map((worker) => worker.stop()));
      }
    });

    if (kind.label === "postgres") {
      test("PostgreSQL: a claim waits for a racing claim's transaction, then skips", async () => {
        const effects = `"${database.tables.schema}".racing`;
        await (app.db as Pool).query(`CREATE TABLE ${effects} (outbox_id text, consumer text)`);
        const message = { id: "m-1", headers: { [outboxIdHeader]: "race-1" } };
        let releaseFirst!: () => void;
        const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
        const first = processOnce(
          app.db as Pool,
          { consumer: "c", message },
          async (tx) => {
            await tx.query(`INSERT INTO ${effects} VALUES ('race-1', 'c')`);
            await firstHolds;
          },
          database.tables,
        );
        const secondPool = (await database.open()).db as Pool;
        const second = processOnce(
          secondPool,
          { consumer: "c", message },
          async (tx) => {
            await tx.query(`INSERT INTO ${effects} VALUES ('race-1', 'c')`);
          },
          database.tables,
        );
        // The second claim is blocked on the first's uncommitted insert: seen in pg_locks, not slept on.
        await waitFor("the second claim waiting on a lock", async () => {
          const { rows } = await (app.db as Pool).query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO%processed%'",
          );
          return Number(rows[0].n) > 0 || undefined;
        });
        releaseFirst();
        assert.deepEqual([(await first).applied, (await second).applied], [true, false]);
        assert.equal(await countEffects(app, effects), 1);
      });
    }
  });
}
