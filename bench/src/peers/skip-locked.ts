/**
 * The plain PostgreSQL queue that people write by hand: one table, publish = INSERT, consume = lease
 * the oldest visible rows with FOR UPDATE SKIP LOCKED by moving their visible_at into the future,
 * ack = DELETE. Concurrent publishes of one turn share one INSERT, and acks one DELETE (up to 100,
 * like Hopper's client). A pg Pool of Hopper's pool size; synchronous_commit as the server has it (on).
 *
 * What it does not do, and Hopper does: fence acks by lease (an ack here deletes the row even if its
 * lease ended and another consumer holds it now), wake consumers (they poll), count, expire, dead-letter.
 */
import pg from "pg";
import { TurnBatcher } from "../batcher.js";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { batchItemsMax, peerLeaseSeconds, pgPoolSize } from "../limits.js";
import { packageVersion } from "../package-version.js";
import { benchSchemaName, dropSchema, postgresVersion } from "../postgres.js";
import type { Delivery, QueueConnection, QueueTarget } from "../target.js";
import { pollUntilAny } from "./polling.js";

/** Makes the one queue table, empty. Each workload gets a new one. */
const jobsCreate = `
  DROP TABLE IF EXISTS jobs;
  CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    body bytea NOT NULL,
    visible_at timestamptz NOT NULL DEFAULT now(),
    deliveries int NOT NULL DEFAULT 0
  )`;

/** $1 bodies. Inserts one row per body, visible at once. */
const jobsInsert = "INSERT INTO jobs (body) SELECT * FROM unnest($1::bytea[])";

/** $1 limit, $2 lease seconds. Leases the oldest visible rows that no one else is leasing right now.
 * Returns: id, body, deliveries of each leased row. */
const jobsLease = `
  UPDATE jobs SET visible_at = now() + make_interval(secs => $2), deliveries = deliveries + 1
  WHERE id IN (
    SELECT id FROM jobs WHERE visible_at <= now() ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING id, body, deliveries`;

/** $1 ids. Returns: the id of each row deleted. */
const jobsDelete = "DELETE FROM jobs WHERE id = ANY($1::bigint[]) RETURNING id";

export async function startSkipLockedTarget(params: {
  url: string;
  /** The URL the pool connects to: `url`, or the wire counter's relay in front of it. */
  connectUrl: string;
}): Promise<QueueTarget> {
  const schema = benchSchemaName("skiplocked", params.url);
  const pool = new pg.Pool({
    connectionString: params.connectUrl,
    max: pgPoolSize,
    application_name: schema,
    options: `-c search_path=${schema}`,
  });
  // An idle connection that the server drops must not crash the bench; the next query reconnects.
  pool.on("error", () => {});
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await pool.end();
    await dropSchema(params.url, schema);
  };
  let version: string;
  try {
    await pool.query(`CREATE SCHEMA "${schema}"`);
    version = await postgresVersion(params.url);
  } catch (error) {
    await close();
    throw error;
  }
  return {
    label: "plain SKIP LOCKED",
    kind: "skiplocked",
    versions: `PostgreSQL ${version} · pg ${packageVersion("pg")}`,
    semantics:
      "confirm = INSERT committed (synchronous_commit on, fsync on); ack = DELETE committed, the same",
    confirmsAfterFsync: true,
    brokerPids: [],
    postgresAppName: schema,
    async createQueue() {
      await pool.query(jobsCreate);
    },
    connect: () => new SkipLockedConnection(pool),
    counters: () => ({}),
    close,
  };
}

class SkipLockedConnection implements QueueConnection {
  private readonly inserts: TurnBatcher<Buffer, undefined>;
  private readonly deletes: TurnBatcher<string, boolean>;

  constructor(private readonly pool: pg.Pool) {
    this.inserts = new TurnBatcher(async (bodies) => {
      const { rowCount } = await pool.query(jobsInsert, [bodies]);
      if (rowCount !== bodies.length) throw new Error(`inserted ${rowCount} of ${bodies.length} rows`);
      return bodies.map(() => undefined);
    }, batchItemsMax);
    this.deletes = new TurnBatcher(async (ids) => {
      const { rows } = await pool.query<{ id: string }>(jobsDelete, [ids]);
      const deleted = new Set(rows.map((row) => row.id));
      return ids.map((id) => deleted.has(id));
    }, batchItemsMax);
  }

  publish(body: BenchBody): Promise<void> {
    return this.inserts.add(Buffer.from(JSON.stringify(body)));
  }

  receive(max: number, signal: AbortSignal): Promise<Delivery[]> {
    return pollUntilAny(async () => {
      const { rows } = await this.pool.query<{ id: string; body: Buffer; deliveries: number }>(jobsLease, [
        max,
        peerLeaseSeconds,
      ]);
      return rows.map((row) => ({
        body: readBenchBody(JSON.parse(row.body.toString("utf8"))),
        deliveryCount: row.deliveries,
        receipt: row.id,
      }));
    }, signal);
  }

  ackLater(receipt: string): Promise<boolean> {
    return this.deletes.add(receipt);
  }
}
