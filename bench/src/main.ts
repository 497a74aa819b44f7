/**
 * `npm run bench -- queue …` runs one target through W1 (throughput), W2 (latency at a fixed rate) and
 * W3 (backlog); `npm run bench -- compare-pg …` runs Hopper on SQLite, on PostgreSQL with one node and
 * with a cluster, the plain SKIP LOCKED queue and pg-boss, one after the other, so that their ratios
 * come from one invocation; `npm run bench -- compare-consumers …` runs Hopper with its pull consumer and
 * then with its push (WebSocket) consumer, on W1 and W2 unless told otherwise (`--workloads` may add
 * the fan-out); `npm run bench -- inbox …` runs Hopper's inboxes against per-recipient Redis Streams
 * with flags of its own (inbox.ts). Each probes the disk's flush rate first, prints a markdown table and optionally writes
 * the figures as JSON. Servers are stopped and schemas dropped on success, on
 * failure and on Ctrl-C.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { probeFsync } from "./fsync-probe.js";
import { type BenchOptions, parseBenchOptions, usage } from "./options.js";
import { PgWireCounter } from "./pg-wire-counter.js";
import { dropLeftoverSchemas } from "./postgres.js";
import { type BenchReport, markdownTable } from "./report.js";
import { openTargets, type RunReport, runOne } from "./run.js";

async function runBench(options: BenchOptions, setWireCounter: (counter: PgWireCounter) => void) {
  const startedAt = new Date().toISOString();
  const loadAverage1m = loadavg()[0] ?? Number.NaN;
  // The probe runs before any target starts, on the file system of the SQLite file and of PostgreSQL.
  log("probing the disk: 4 KiB append + fdatasync for 1 s");
  const probeDir = mkdtempSync(join(tmpdir(), "hopper-bench-probe-"));
  let fsyncProbe: BenchReport["fsyncProbe"];
  try {
    fsyncProbe = probeFsync(probeDir);
  } finally {
    rmSync(probeDir, { recursive: true, force: true });
  }
  let wireCounter: PgWireCounter | undefined;
  if (options.countRoundTrips) {
    wireCounter = await PgWireCounter.start(options.pgUrl);
    setWireCounter(wireCounter);
    log(
      "counting PostgreSQL round trips through a relay: the speed figures of this invocation are not comparable",
    );
  }
  const runs: RunReport[] = [];
  for (const spec of options.runs) runs.push(await runOne(spec, options, { wireCounter, log }));
  const report: BenchReport = {
    benchmark: options.command,
    startedAt,
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      loadAverage1m,
    },
    options,
    fsyncProbe,
    runs,
  };
  console.log(`\n${markdownTable(report)}`);
  if (options.jsonPath !== undefined) {
    writeFileSync(options.jsonPath, `${JSON.stringify(report, null, 2)}\n`);
    log(`wrote ${options.jsonPath}`);
  }
  return runs.every((run) => run.error === undefined);
}

/** Progress goes to stderr, so stdout holds only the table. */
function log(message: string): void {
  console.error(`[bench] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

/**
 * Stops every server and drops every schema still there, including those of a target that was still
 * starting; each target's close is safe to repeat.
 */
async function closeEverything(wireCounter: PgWireCounter | undefined): Promise<void> {
  await Promise.allSettled([...openTargets].map((target) => target.close()));
  await dropLeftoverSchemas();
  await wireCounter?.close();
}

async function main(): Promise<number> {
  // The outbox bench measures an application's database and the relay, not a broker target: its own flags.
  if (process.argv[2] === "outbox")
    return (await import("./outbox.js")).runOutboxBench(process.argv.slice(3));
  // The inbox bench drives per-recipient logs, not queues: its own targets, phases and flags (inbox.ts).
  if (process.argv[2] === "inbox") return (await import("./inbox.js")).runInboxBench(process.argv.slice(3));
  // The stream bench appends, replays and consumes partitioned logs: its own targets and flags (stream.ts).
  if (process.argv[2] === "stream")
    return (await import("./stream.js")).runStreamBench(process.argv.slice(3));
  // The standalone peer scripts run in processes of their own (standalone.ts).
  if (process.argv[2] === "standalone")
    return (await import("./standalone.js")).runStandalone(process.argv.slice(3));
  let options: BenchOptions;
  try {
    options = parseBenchOptions(process.argv.slice(2));
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${usage}`);
    return 2;
  }
  let wireCounter: PgWireCounter | undefined;
  process.once("SIGINT", () => {
    log("interrupted: stopping servers and dropping schemas");
    // The exit hook of server-process.ts kills the children even if this does not finish.
    void closeEverything(wireCounter).finally(() => process.exit(130));
  });
  try {
    return (await runBench(options, (counter) => (wireCounter = counter))) ? 0 : 1;
  } catch (error) {
    console.error(`[bench] FAILED: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await closeEverything(wireCounter);
  }
}

// Leftover timers and keep-alive sockets from an aborted workload must not keep the process alive.
process.exit(await main());
