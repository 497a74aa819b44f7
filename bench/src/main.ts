/**
 * `npm run bench -- queue …`: starts a server in its own process, probes the disk's flush rate beside
 * its data file, runs W1 (throughput) and W2 (latency at a fixed rate) against it, prints a markdown table and optionally
 * writes the figures as JSON. The server is stopped on success, on failure and on Ctrl-C.
 */

import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { HopperClient } from "@hopper/client";
import { probeFsync } from "./fsync-probe.js";
import { runLatency } from "./latency.js";
import { parseQueueBenchOptions, type QueueBenchOptions, usage } from "./options.js";
import { groupCommitEvidence, markdownTable, type QueueBenchReport } from "./report.js";
import { type BenchServer, startBenchServer } from "./server-process.js";
import { RequestCounter } from "./statistics.js";
import { runThroughput } from "./throughput.js";

async function runQueueBench(options: QueueBenchOptions, setServer: (server: BenchServer) => void) {
  const startedAt = new Date().toISOString();
  // The machine is shared: the load when the run began says how much the figures may be disturbed.
  const loadAverage1m = loadavg()[0] ?? Number.NaN;
  log(`starting a server (durability ${options.durability})`);
  const server = await startBenchServer({ durability: options.durability, profileDir: options.profileDir });
  setServer(server);
  // The probe runs while the server is idle, on the same file system as its data file.
  log("probing the disk: 4 KiB append + fdatasync for 1 s");
  const fsyncProbe = probeFsync(server.dataDir);
  const requestCounter = new RequestCounter();
  const client = new HopperClient({ url: server.url, fetch: requestCounter.fetch });
  await client.ready();

  log(`W1 throughput: ${options.messages} messages of ${options.bodyBytes} bytes`);
  const throughput = await runThroughput({
    client,
    serverUrl: server.url,
    requestCounter,
    queue: "bench-w1-throughput",
    messages: options.messages,
    bodyBytes: options.bodyBytes,
  });
  log(`W2 latency: ${options.ratePerSecond} msg/s for ${options.latencySeconds} s`);
  const latency = await runLatency({
    client,
    serverUrl: server.url,
    requestCounter,
    queue: "bench-w2-latency",
    ratePerSecond: options.ratePerSecond,
    seconds: options.latencySeconds,
    bodyBytes: options.bodyBytes,
  });
  const report: QueueBenchReport = {
    benchmark: "queue",
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
    throughput,
    latency,
    groupCommit: groupCommitEvidence(options.durability, fsyncProbe, throughput, latency),
  };
  console.log(`\n${markdownTable(report)}`);
  if (options.jsonPath !== undefined) {
    writeFileSync(options.jsonPath, `${JSON.stringify(report, null, 2)}\n`);
    log(`wrote ${options.jsonPath}`);
  }
}

/** Progress goes to stderr, so stdout holds only the table. */
function log(message: string): void {
  console.error(`[bench] ${message}`);
}

async function main(): Promise<number> {
  let options: QueueBenchOptions;
  try {
    options = parseQueueBenchOptions(process.argv.slice(2));
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${usage}`);
    return 2;
  }
  let server: BenchServer | undefined;
  process.once("SIGINT", () => {
    log("interrupted: stopping the server");
    // The exit hook of server-process.ts kills the child even if this stop does not finish.
    void closeFetchConnections()
      .then(() => server?.stop())
      .finally(() => process.exit(130));
  });
  try {
    await runQueueBench(options, (started) => {
      server = started;
    });
    return 0;
  } catch (error) {
    console.error(`[bench] FAILED: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await closeFetchConnections();
    await server?.stop();
  }
}

/**
 * Closes the pooled connections of this process's global `fetch` (undici's global dispatcher, which
 * Node keeps under this symbol), so the server's graceful stop finds none open. Otherwise it waits
 * for them: a connection that never carried a request (a pool opens such spares) never counts as idle.
 * `destroy` rather than `close`, because after a stall requests may still be pending.
 */
async function closeFetchConnections(): Promise<void> {
  const globals = globalThis as unknown as Record<symbol, { destroy?: () => Promise<void> } | undefined>;
  await globals[Symbol.for("undici.globalDispatcher.1")]?.destroy?.();
}

// Leftover timers and keep-alive sockets from an aborted workload must not keep the process alive.
process.exit(await main());
