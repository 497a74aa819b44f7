/** Small measuring tools shared by the workloads: percentiles, request counts, CPU time. */
import { performance } from "node:perf_hooks";

export interface Percentiles {
  count: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

/** Nearest-rank percentiles (no interpolation), so every figure is a sample that really happened. */
export function percentiles(samples: readonly number[]): Percentiles {
  const sorted = Float64Array.from(samples).sort();
  const rank = (fraction: number) =>
    sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
  return { count: sorted.length, p50: rank(0.5), p99: rank(0.99), p999: rank(0.999), max: rank(1) };
}

export type RequestKind = "send" | "receive" | "ack" | "other";

/**
 * A `fetch` for HopperClient that counts requests by kind. Send, receive and ack are each one
 * group-commit job on the server (a receive at least one), so their rate, set against the disk's flush
 * rate, shows whether commits are shared across requests and not only within a batch.
 */
export class RequestCounter {
  readonly counts: Record<RequestKind, number> = { send: 0, receive: 0, ack: 0, other: 0 };

  readonly fetch: typeof fetch = (input, init) => {
    this.counts[requestKind(String(input instanceof Request ? input.url : input), init?.method)]++;
    return globalThis.fetch(input, init);
  };

  snapshot(): Record<RequestKind, number> {
    return { ...this.counts };
  }
}

function requestKind(url: string, method = "GET"): RequestKind {
  if (method !== "POST") return "other";
  if (url.endsWith("/messages")) return "send";
  if (url.endsWith("/receive")) return "receive";
  if (url.endsWith("/ack")) return "ack";
  return "other";
}

export function countsSince(
  before: Record<RequestKind, number>,
  after: Record<RequestKind, number>,
): Record<RequestKind, number> {
  return {
    send: after.send - before.send,
    receive: after.receive - before.receive,
    ack: after.ack - before.ack,
    other: after.other - before.other,
  };
}

// prom-client's process_cpu_seconds_total under the server's prefix, whatever that prefix is exactly.
const serverCpuPattern = /^hopper_\w*cpu_seconds_total\s+(\S+)$/m;

/** The server's CPU time so far, in seconds, from its /metrics; undefined if the metric is missing. */
export async function serverCpuSeconds(serverUrl: string): Promise<number | undefined> {
  const response = await fetch(`${serverUrl}/metrics`);
  const match = serverCpuPattern.exec(await response.text());
  return match ? Number(match[1]) : undefined;
}

/** CPU use of this process and of the server over one workload, as a share of one core. */
export interface CpuShares {
  /** The load generator (this process). */
  benchCorePercent: number;
  /** The server process; undefined if its metrics do not say. */
  serverCorePercent: number | undefined;
}

/** Starts measuring CPU time; `finish()` answers the shares since the start. */
export async function measureCpu(serverUrl: string): Promise<{ finish(): Promise<CpuShares> }> {
  const startedAt = performance.now();
  const benchBefore = process.cpuUsage();
  const serverBefore = await serverCpuSeconds(serverUrl);
  return {
    async finish() {
      const elapsedMs = performance.now() - startedAt;
      const bench = process.cpuUsage(benchBefore);
      const serverAfter = await serverCpuSeconds(serverUrl);
      const serverCorePercent =
        serverBefore === undefined || serverAfter === undefined
          ? undefined
          : ((serverAfter - serverBefore) * 1000 * 100) / elapsedMs;
      return { benchCorePercent: ((bench.user + bench.system) / 1000 / elapsedMs) * 100, serverCorePercent };
    },
  };
}
