/**
 * CPU time of every process that takes part in a workload: this one (the load generator, and for the
 * peers also the queue library), the broker's server processes, and the PostgreSQL backends that
 * serve the target's sessions. Read from /proc, so it covers processes this one did not start.
 */
import { readdirSync, readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import type { BackendWatch } from "./postgres.js";

/** Linux reports process times in clock ticks; 100 per second on every common build (getconf CLK_TCK). */
const clockTicksPerSecond = 100;

/** User + system CPU seconds of process `pid` so far, or undefined if it is gone or /proc is absent. */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces; the fields after it are plain numbers.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const userTicks = Number(fields[11]);
    const systemTicks = Number(fields[12]);
    return (userTicks + systemTicks) / clockTicksPerSecond;
  } catch {
    return undefined;
  }
}

/**
 * Process ids whose command name (`/proc/<pid>/comm`, as `pgrep -x` matches it) is `name`: how the bench
 * finds the brokers it did not start (RabbitMQ's `beam.smp`, `nats-server`). Empty without /proc.
 */
export function pidsNamed(name: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry));
    } catch {
      // The process ended while the list was read.
    }
  }
  return pids;
}

/** CPU seconds over one workload, by who spent them. */
export interface CpuSpent {
  elapsedMs: number;
  /** This process. */
  benchSeconds: number;
  /** The broker's server processes together; undefined when the broker runs inside this process. */
  brokerSeconds: number | undefined;
  /** The target's PostgreSQL backends together; undefined for SQLite. */
  postgresSeconds: number | undefined;
}

/** Share of one core, in percent. */
export function corePercent(seconds: number | undefined, elapsedMs: number): number | undefined {
  return seconds === undefined ? undefined : (seconds * 100_000) / elapsedMs;
}

function sumCpu(pids: readonly number[]): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of pids) {
    const seconds = processCpuSeconds(pid);
    if (seconds !== undefined) byPid.set(pid, seconds);
  }
  return byPid;
}

/**
 * Starts measuring; `finish()` answers what each side spent since. A backend that appears during the
 * workload counts from zero (its whole life falls inside); one that exits during it is lost, which a
 * busy pool does not do (idle connections close only after seconds without work).
 */
export async function measureCpu(params: {
  brokerPids: readonly number[];
  backends: BackendWatch | undefined;
  postgresAppName: string | undefined;
}): Promise<{ finish(): Promise<CpuSpent> }> {
  const { brokerPids, backends, postgresAppName } = params;
  const backendPids = async () =>
    backends && postgresAppName !== undefined ? await backends.pids(postgresAppName) : [];
  const postgresBefore = sumCpu(await backendPids());
  const brokerBefore = sumCpu(brokerPids);
  const benchBefore = process.cpuUsage();
  const startedAt = performance.now();
  return {
    async finish() {
      const elapsedMs = performance.now() - startedAt;
      const bench = process.cpuUsage(benchBefore);
      const brokerAfter = sumCpu(brokerPids);
      let brokerSeconds: number | undefined;
      if (brokerPids.length > 0) {
        brokerSeconds = 0;
        for (const [pid, seconds] of brokerAfter)
          brokerSeconds += seconds - (brokerBefore.get(pid) ?? seconds);
      }
      let postgresSeconds: number | undefined;
      if (backends && postgresAppName !== undefined) {
        postgresSeconds = 0;
        for (const [pid, seconds] of sumCpu(await backendPids())) {
          postgresSeconds += seconds - (postgresBefore.get(pid) ?? 0);
        }
      }
      return { elapsedMs, benchSeconds: (bench.user + bench.system) / 1e6, brokerSeconds, postgresSeconds };
    },
  };
}
