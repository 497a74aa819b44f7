/**
 * The floor PostgreSQL puts under W2 on this machine: how long one commit takes, seen from Node, when
 * commits come at a fixed rate. No broker, no queue logic: a `pg` Pool issues statements on a schedule
 * (open loop, each timed from its intended start, as W2 times messages), in three rounds:
 *
 * - `select`: `SELECT 1`, no commit: the round trip and the wake-ups on both sides;
 * - `insert`: one row with a 1 KiB body, committed (synchronous_commit as the server has it);
 * - `insert+delete`: the same insert, and once it returns, the row's DELETE, committed: the two
 *   commits of a message's life (its send and its ack), timed at the insert, as a delivery would be.
 *
 * Any queue on PostgreSQL that answers a send after its commit has at least the `insert` figure on a
 * message's path; a broker adds its own process between the client and the database on top of it
 * (bench/results/2026-12-01-session-14.md).
 *
 *   node bench/dist/pg-commit-probe.js [--pg-url postgres://postgres@127.0.0.1:5432/test]
 *                                      [--rate 1000] [--seconds 10] [--pool 4]
 *
 * The pool holds 4 connections unless told otherwise: at 1,000 statements/s about two are busy at a
 * time, and more connections make the tail worse here (10, a Hopper node's pool, adds about 3 ms to
 * the insert's p99), so 4 gives the lower floor.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import pg from "pg";
import { pidsNamed, processCpuSeconds } from "./cpu.js";
import { benchSchemaName, dropSchema, withPgClient } from "./postgres.js";
import { type Percentiles, percentiles } from "./statistics.js";

const bodyBytes = 1024;

const { values } = parseArgs({
  options: {
    "pg-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
    rate: { type: "string", default: "1000" },
    seconds: { type: "string", default: "10" },
    pool: { type: "string", default: "4" },
  },
});
const url = values["pg-url"];
const rate = Number(values.rate);
const seconds = Number(values.seconds);
if (!Number.isInteger(rate) || rate < 1 || rate > 20_000)
  throw new Error("--rate: an integer from 1 to 20000");
if (!Number.isInteger(seconds) || seconds < 2 || seconds > 600)
  throw new Error("--seconds: an integer from 2 to 600");
const poolSize = Number(values.pool);
if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 100)
  throw new Error("--pool: an integer from 1 to 100");

type Round = "select" | "insert" | "insert+delete";

/** CPU seconds of every process named postgres (the backends, the WAL writer and the rest). */
function postgresCpuSeconds(): number {
  return pidsNamed("postgres").reduce((sum, pid) => sum + (processCpuSeconds(pid) ?? 0), 0);
}

async function runRound(
  pool: pg.Pool,
  round: Round,
): Promise<{ all: Percentiles; steady: Percentiles; cpuUs: number }> {
  const body = Buffer.alloc(bodyBytes, 0x61);
  const count = rate * seconds;
  const intervalMs = 1000 / rate;
  const all: number[] = [];
  const steady: number[] = [];
  const pending = new Set<Promise<void>>();
  const cpuBefore = postgresCpuSeconds();
  const startMs = performance.now() + 20;
  /** Issues the round's timed statement; answers the inserted row's id. */
  const timed = async (): Promise<string | undefined> => {
    if (round === "select") {
      await pool.query({ name: "probe_select", text: "SELECT 1" });
      return undefined;
    }
    const { rows } = await pool.query<{ id: string }>({
      name: "probe_insert",
      text: "INSERT INTO probe (body) VALUES ($1) RETURNING id",
      values: [body],
    });
    return rows[0]?.id;
  };
  const one = async (index: number, intendedAtMs: number): Promise<void> => {
    const id = await timed();
    const latencyMs = performance.now() - intendedAtMs;
    all.push(latencyMs);
    if (index >= rate) steady.push(latencyMs);
    if (round === "insert+delete") {
      await pool.query({ name: "probe_delete", text: "DELETE FROM probe WHERE id = $1", values: [id] });
    }
  };
  // Each turn issues every statement whose time has come (a late turn issues the overdue ones together,
  // each still timed from its own intended start), then sleeps until the next is due.
  for (let index = 0; index < count; ) {
    const now = performance.now();
    for (; index < count && startMs + index * intervalMs <= now; index++) {
      const done: Promise<void> = one(index, startMs + index * intervalMs).finally(() =>
        pending.delete(done),
      );
      pending.add(done);
    }
    if (index < count) await sleep(Math.max(0, startMs + index * intervalMs - performance.now()));
  }
  await Promise.all(pending);
  const cpuUs = ((postgresCpuSeconds() - cpuBefore) * 1e6) / count;
  return { all: percentiles(all), steady: percentiles(steady), cpuUs };
}

const schema = benchSchemaName("commitprobe", url);
const pool = new pg.Pool({ connectionString: url, max: poolSize, options: `-c search_path=${schema}` });
try {
  await withPgClient(url, async (client) => {
    await client.query(`CREATE SCHEMA "${schema}"`);
    await client.query(`CREATE TABLE "${schema}".probe (id bigserial PRIMARY KEY, body bytea NOT NULL)`);
  });
  const ms = (value: number) => value.toFixed(2);
  console.log(`${rate} statements/s for ${seconds} s each, a pool of ${poolSize}, bodies of ${bodyBytes} B`);
  for (const round of ["select", "insert", "insert+delete"] as const) {
    const { all, steady, cpuUs } = await runRound(pool, round);
    console.log(
      `${round.padEnd(13)} p50 ${ms(all.p50)} · p99 ${ms(all.p99)} · max ${ms(all.max)} ms; ` +
        `after the first second p50 ${ms(steady.p50)} · p99 ${ms(steady.p99)} ms; ` +
        `PostgreSQL CPU ${Math.round(cpuUs)} µs a statement${round === "insert+delete" ? " pair" : ""}`,
    );
  }
} finally {
  await pool.end();
  await dropSchema(url, schema);
}
