/**
 * The WAL relay end to end, on a private PostgreSQL cluster with wal_level=logical (the machine's
 * server runs with replica): a real `hopper serve`, the application and the relay in processes of
 * their own where a kill -9 must land, the slot's position read from pg_replication_slots.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HopperClient } from "@hopper/client";
import type { Pool } from "pg";
import { Registry } from "prom-client";
import { migrate, outboxStatus, retryFailed } from "./admin.js";
import { outboxIdHeader } from "./event.js";
import { type OpenedDatabase, openDatabase } from "./open-database.js";
import { processOnce } from "./process-once.js";
import { runRelay } from "./relay.js";
import {
  assertOrderPerKey,
  fetchUntil,
  poisonQueueEvents,
  receiveAll,
  routeToQueue,
  spawnOutboxCommand,
  waitFor,
  writeEvents,
} from "./testing/helpers.js";
import { freePort, type HopperProcess, startHopper } from "./testing/hopper-process.js";
import {
  type PrivatePostgres,
  privatePostgresSkipReason,
  startPrivatePostgres,
} from "./testing/private-postgres.js";
import { appKilledAfterCommit, type CrashScenario, relayKilledAfterConfirm } from "./testing/scenarios.js";

const skip = privatePostgresSkipReason();
if (skip) console.log(`# skipped: WAL relay tests: ${skip}`);

describe("outbox in WAL mode", { skip, concurrency: false }, () => {
  // Over 80 lines: one describe block of end-to-end tests sharing a cluster, a server and helpers.
  let cluster: PrivatePostgres;
  let dir: string;
  let port: number;
  let hopperServer: HopperProcess;
  let hopper: HopperClient;
  let app: OpenedDatabase;
  let pool: Pool;
  let outboxNumber = 0;
  let queueNumber = 0;

  const newQueue = async (attributes: object = {}) => {
    const name = `w${queueNumber++}`;
    await hopper.putQueue(name, attributes);
    return name;
  };
  /** A fresh outbox (its own schema, publication and slot) for one test. */
  const newOutbox = async () => {
    const tables = { schema: `wal_t${outboxNumber++}` };
    const result = await migrate(pool, { ...tables, wal: true });
    assert.deepEqual(result.wal?.created, ["publication", "slot"]);
    return { tables, write: { ...tables, mode: "wal" as const } };
  };
  const slotPosition = async (schema: string) => {
    const { rows } = await pool.query(
      "SELECT confirmed_flush_lsn::text AS confirmed, pg_current_wal_lsn()::text AS current FROM pg_replication_slots WHERE slot_name = $1",
      [`hopper_outbox_${schema}`],
    );
    return rows[0] as { confirmed: string; current: string };
  };
  const tableRows = async (schema: string) =>
    Number((await pool.query(`SELECT count(*) AS n FROM "${schema}".hopper_outbox`)).rows[0].n);
  const childEnv = (schema: string, extra: Record<string, string>) => ({
    OUTBOX_TEST_DB: cluster.url,
    OUTBOX_TEST_HOPPER_URL: hopperServer.url,
    OUTBOX_TEST_SCHEMA: schema,
    OUTBOX_TEST_MODE: "wal",
    ...extra,
  });
  const relayFor = (tables: object, extra: object = {}) =>
    runRelay({ db: pool, hopper: { url: hopperServer.url }, mode: "wal", ...tables, ...extra });

  before(async () => {
    cluster = await startPrivatePostgres();
    app = await openDatabase(cluster.url);
    pool = app.db as Pool;
    dir = mkdtempSync(join(tmpdir(), "hopper-outbox-wal-"));
    port = await freePort();
    hopperServer = await startHopper(join(dir, "hopper.db"), port);
    hopper = new HopperClient({ url: hopperServer.url });
  });
  after(async () => {
    await hopper?.close();
    await hopperServer?.stop();
    await app?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("events reach Hopper through the slot, the table stays empty, a restart resumes", async () => {
    const { tables, write } = await newOutbox();
    const queue = await newQueue();
    const exchange = await routeToQueue(hopper, queue);
    const ids = await writeEvents(
      app,
      [
        { destination: { queue }, key: "k", body: { n: 1 }, headers: { traceparent: "00-abc" } },
        { destination: { exchange, routingKey: "order.placed" }, key: "k", body: { n: 2 } },
      ],
      write,
    );
    assert.equal(await tableRows(tables.schema), 0, "insert-and-delete leaves the table empty");
    const { rows: trigger } = await pool.query(
      "SELECT tgenabled FROM pg_trigger WHERE tgname = 'hopper_outbox_notify' AND tgrelid = $1::regclass",
      [`"${tables.schema}".hopper_outbox`],
    );
    assert.equal(trigger[0]?.tgenabled, "D", "no NOTIFY: nothing listens in WAL mode");
    const registry = new Registry();
    const relay = relayFor(tables, { registry });
    try {
      const messages = await receiveAll(hopperServer.url, queue, 2);
      assert.deepEqual(
        messages.map((message) => message.headers[outboxIdHeader]),
        ids,
        "in commit order, one key",
      );
      assert.equal(messages[0]?.headers.traceparent, "00-abc");
      assert.equal(messages[0]?.key, "k");
      await waitFor("both confirmed", async () => (await relay.metrics()).published === 2 || undefined);
      const slot = await waitFor("the slot acknowledged", async () => {
        const position = await slotPosition(tables.schema);
        return (await relay.metrics()).pendingRows === 0 && position.confirmed !== "0/0"
          ? position
          : undefined;
      });
      assert.ok(slot);
      const text = await registry.metrics();
      assert.match(text, /^hopper_outbox_published_total 2$/m);
      assert.match(text, /^hopper_outbox_pending_rows 0$/m);
      assert.match(text, /^hopper_outbox_slot_lag_bytes \d+$/m);
    } finally {
      await relay.stop();
    }
    assert.doesNotMatch(await registry.metrics(), /hopper_outbox/, "stop removes the families");

    // A clean stop acknowledged everything: the restarted relay publishes only the new event.
    const [later] = await writeEvents(app, [{ destination: { queue }, key: "k", body: { n: 3 } }], write);
    const again = relayFor(tables);
    try {
      const [next] = await receiveAll(hopperServer.url, queue, 1);
      assert.equal(next?.headers[outboxIdHeader], later, "nothing before it was published again");
    } finally {
      await again.stop();
    }
  });

  const scenario = (schema: string, checkAfterKill: () => Promise<void>): CrashScenario => ({
    hopper,
    hopperUrl: hopperServer.url,
    childEnv: (extra) => childEnv(schema, extra),
    startRelay: () => relayFor({ schema }),
    checkAfterKill,
  });

  test("kill -9 of the application after its commit: the restarted relay publishes the event", async () => {
    const { tables } = await newOutbox();
    // The relay reads the event from the slot, and is killed before it publishes.
    await appKilledAfterCommit(
      scenario(tables.schema, async () => assert.equal(await tableRows(tables.schema), 0)),
      await newQueue(),
    );
  });

  test("kill -9 of the relay between confirm and slot ack: published twice, applied once", async () => {
    const { tables, write } = await newOutbox();
    const queue = await newQueue(); // no dedup window: the double publish is visible
    const effects = `"${tables.schema}".effects`;
    await pool.query(`CREATE TABLE ${effects} (outbox_id text)`);
    const before = await slotPosition(tables.schema);
    const [id] = await writeEvents(app, [{ destination: { queue }, key: "a", body: { pay: 10 } }], write);
    const notAcknowledged = async () =>
      assert.equal(
        (await slotPosition(tables.schema)).confirmed,
        before.confirmed,
        "the slot was not acknowledged past the event",
      );
    await relayKilledAfterConfirm(scenario(tables.schema, notAcknowledged), queue, id as string, {
      apply: async (message) =>
        (
          await processOnce(
            pool,
            { consumer: "billing", message },
            async (tx) => {
              await tx.query(`INSERT INTO ${effects} VALUES ($1)`, [message.headers[outboxIdHeader]]);
            },
            tables,
          )
        ).applied,
      countEffects: async () => Number((await pool.query(`SELECT count(*) AS n FROM ${effects}`)).rows[0].n),
    });
  });

  test("Hopper down: events wait in the slot, its lag rises, then they drain in order per key", async () => {
    const { tables, write } = await newOutbox();
    const queue = await newQueue();
    await hopperServer.stop();
    const errors: string[] = [];
    const relay = relayFor(tables, {
      hopper: { url: `http://127.0.0.1:${port}` },
      onError: (error: unknown) => errors.push(error instanceof Error ? error.message : String(error)),
    });
    try {
      const batch = (from: number) => {
        const events = [];
        for (let n = from; n < from + 5; n++)
          for (const key of ["a", "b", "c"]) events.push({ destination: { queue }, key, body: { key, n } });
        return events;
      };
      await writeEvents(app, batch(0), write);
      await waitFor("a failed publish", () => errors.length >= 2 || undefined);
      const first = await waitFor("15 events read", async () => {
        const metrics = await relay.metrics();
        return metrics.pendingRows === 15 ? metrics : undefined;
      });
      assert.ok((first.slotLagBytes ?? 0) > 0, "the slot holds the events' WAL");
      assert.ok(first.oldestPendingAgeMs >= 0);
      await writeEvents(app, batch(5), write);
      const second = await waitFor("30 events read", async () => {
        const metrics = await relay.metrics();
        return metrics.pendingRows === 30 ? metrics : undefined;
      });
      assert.ok(
        (second.slotLagBytes ?? 0) > (first.slotLagBytes ?? 0),
        `the lag rises while Hopper is down (${first.slotLagBytes} then ${second.slotLagBytes})`,
      );
      hopperServer = await startHopper(join(dir, "hopper.db"), port);
      const messages = await receiveAll(hopperServer.url, queue, 30);
      assertOrderPerKey(messages, ["a", "b", "c"], 10);
      const drained = await waitFor("every event confirmed and acknowledged", async () => {
        const metrics = await relay.metrics();
        return metrics.pendingRows === 0 && (metrics.slotLagBytes ?? 0) < (second.slotLagBytes ?? 0)
          ? metrics
          : undefined;
      });
      assert.equal(drained.published, 30);
    } finally {
      await relay.stop();
    }
  });

  test("a poison event goes to the failed table; its key and others flow; retry publishes it", async () => {
    const { tables, write } = await newOutbox();
    const queue = await newQueue();
    const events = await poisonQueueEvents(hopper, queue);
    const [poison, behind] = await writeEvents(app, events, write);
    const relay = relayFor(tables, { onError: () => {} });
    try {
      const flowed = await receiveAll(hopperServer.url, queue, 3);
      assert.deepEqual(flowed.map((message) => message.key).sort(), ["a", "b", "b"]);
      assert.equal(flowed.find((message) => message.key === "a")?.headers[outboxIdHeader], behind);
      const status = await waitFor("the poison event recorded", async () => {
        const current = await outboxStatus(pool, tables);
        return current.failedRows === 1 ? current : undefined;
      });
      assert.equal(status.failed[0]?.id, poison);
      assert.equal(status.failed[0]?.error?.code, "message_too_large");
      assert.equal(status.failed[0]?.waitingBehind, 0, "in WAL mode nothing waits behind it");
      assert.equal(status.pendingRows, 0);
      const metrics = await relay.metrics();
      assert.equal(metrics.failed, 1);
      assert.equal(metrics.failedRows, 1);

      await hopper.putQueue(queue, { maxMessageBytes: 1024 * 1024 });
      assert.equal(await retryFailed(pool, "all", tables), 1);
      const [retried] = await receiveAll(hopperServer.url, queue, 1);
      assert.equal(retried?.headers[outboxIdHeader], poison, "the retried event goes through the slot");
      assert.equal((await outboxStatus(pool, tables)).failedRows, 0);
      assert.equal(await tableRows(tables.schema), 0);
    } finally {
      await relay.stop();
    }
  });

  test("a second relay on the slot waits, and takes over when the first stops", async () => {
    const { tables, write } = await newOutbox();
    const queue = await newQueue();
    const errors: string[] = [];
    const first = relayFor(tables);
    await waitFor("the first relay's session", async () => {
      const { rows } = await pool.query("SELECT active FROM pg_replication_slots WHERE slot_name = $1", [
        `hopper_outbox_${tables.schema}`,
      ]);
      return rows[0]?.active === true || undefined;
    });
    const second = relayFor(tables, {
      onError: (error: unknown) => errors.push(error instanceof Error ? error.message : String(error)),
    });
    try {
      await waitFor("the second relay refused the busy slot", () =>
        errors.some((message) => /active/.test(message)) ? true : undefined,
      );
      await first.stop();
      const [id] = await writeEvents(app, [{ destination: { queue }, body: { n: 1 } }], write);
      const [message] = await receiveAll(hopperServer.url, queue, 1);
      assert.equal(message?.headers[outboxIdHeader], id);
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  test("an idle relay moves its slot past other tables' WAL", async () => {
    const { tables } = await newOutbox();
    const other = `"${tables.schema}".other`;
    const relay = relayFor(tables, { feedbackIntervalMs: 100 });
    try {
      await pool.query(`CREATE TABLE ${other} AS SELECT n FROM generate_series(1, 20000) n`);
      const behind = await relay.metrics();
      assert.ok(
        (behind.slotLagBytes ?? 0) > 100_000,
        `the other table's WAL is behind the slot (${behind.slotLagBytes})`,
      );
      // Nothing of the outbox's is in that WAL: a logical message through the slot lets the relay
      // acknowledge past it.
      await waitFor(
        "the slot caught up",
        async () => ((await relay.metrics()).slotLagBytes ?? Number.POSITIVE_INFINITY) < 10_000 || undefined,
      );
    } finally {
      await relay.stop();
    }
  });

  test("hopper-outbox migrate --wal and relay --mode wal, with the slot's lag on /metrics", async () => {
    const schema = `wal_t${outboxNumber++}`;
    const migrateCommand = spawnOutboxCommand(["migrate", "--wal", "--db", cluster.url, "--schema", schema]);
    assert.equal(await migrateCommand.exited, 0, migrateCommand.output());
    assert.match(
      migrateCommand.output(),
      new RegExp(
        `WAL: slot hopper_outbox_${schema}, publication hopper_outbox_${schema}: created publication and slot; max_slot_wal_keep_size 256MB`,
      ),
    );
    const queue = await newQueue();
    const metricsPort = await freePort();
    const relay = spawnOutboxCommand([
      "relay",
      "--mode",
      "wal",
      "--db",
      cluster.url,
      "--schema",
      schema,
      "--url",
      hopperServer.url,
      "--metrics-port",
      String(metricsPort),
    ]);
    try {
      const [id] = await writeEvents(app, [{ destination: { queue }, body: { n: 1 } }], {
        schema,
        mode: "wal",
      });
      const [message] = await receiveAll(hopperServer.url, queue, 1);
      assert.equal(message?.headers[outboxIdHeader], id);
      const text = await fetchUntil(
        `http://127.0.0.1:${metricsPort}/metrics`,
        /^hopper_outbox_published_total 1$/m,
      );
      assert.match(text, /^hopper_outbox_slot_lag_bytes \d+$/m);
    } finally {
      assert.equal(await relay.stop(), 0, relay.output());
    }
  });
});
