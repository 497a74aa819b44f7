/** Turns the measured figures into the group-commit verdict, a markdown table and a JSON document. */
import type { FsyncProbeResult } from "./fsync-probe.js";
import type { LatencyResult } from "./latency.js";
import type { QueueBenchOptions } from "./options.js";
import type { Percentiles, RequestKind } from "./statistics.js";
import type { ThroughputResult } from "./throughput.js";

export interface QueueBenchReport {
  benchmark: "queue";
  startedAt: string;
  machine: { cpus: number; cpuModel: string; node: string; platform: string; loadAverage1m: number };
  options: QueueBenchOptions;
  fsyncProbe: FsyncProbeResult;
  throughput: ThroughputResult;
  latency: LatencyResult;
  groupCommit: GroupCommitEvidence;
}

/**
 * Each commit with durability "fsync" costs at least one flush, so commits per second cannot exceed
 * the disk's flush rate. Dividing a rate of work by the flush rate therefore bounds from below how
 * much work one commit carried on average.
 */
export interface GroupCommitEvidence {
  /** W1 confirmed messages per flush, at least. Batching alone (≤ 100 messages per send request, one
   * commit each) can account for this; it shows that messages share commits, not how. */
  messagesPerFlushMin: number;
  /** Messages per send request in W1: what the client's publish coalescing achieved on its own. */
  messagesPerSendRequest: number;
  /** Send, receive and ack requests per flush, at least, in each workload. Each request is one or
   * more commit jobs, so a value above 1 proves that the server's group commit put several requests
   * into one commit; below 1 the run neither shows nor refutes it. */
  requestsPerFlushMin: { throughput: number; latency: number };
  /** With durability "os" commits do not flush, so none of this proves anything. */
  applies: boolean;
}

export function groupCommitEvidence(
  durability: QueueBenchOptions["durability"],
  probe: FsyncProbeResult,
  throughput: ThroughputResult,
  latency: LatencyResult,
): GroupCommitEvidence {
  return {
    messagesPerFlushMin: throughput.confirmPerSecond / probe.flushesPerSecond,
    messagesPerSendRequest: throughput.messages / throughput.requests.send,
    requestsPerFlushMin: {
      throughput: requestsPerSecond(throughput.requests, throughput.endToEndMs) / probe.flushesPerSecond,
      latency: requestsPerSecond(latency.requests, latency.elapsedMs) / probe.flushesPerSecond,
    },
    applies: durability === "fsync",
  };
}

/** Requests that are commit jobs on the server, per second. */
export function requestsPerSecond(requests: Record<RequestKind, number>, elapsedMs: number): number {
  return ((requests.send + requests.receive + requests.ack) * 1000) / elapsedMs;
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const fine = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });

function latencyCells(p: Percentiles): string {
  const ms = (value: number) => fine.format(value);
  return `p50 ${ms(p.p50)} · p99 ${ms(p.p99)} · p99.9 ${ms(p.p999)} · max ${ms(p.max)} ms`;
}

function requestCell(requests: Record<RequestKind, number>, elapsedMs: number, perFlush: number): string {
  const perSecond = requestsPerSecond(requests, elapsedMs);
  return (
    `${integer.format(perSecond)}/s (send ${requests.send} · receive ${requests.receive} · ack ${requests.ack}) · ` +
    `${fine.format(perFlush)} per flush`
  );
}

function cpuCell(cpu: ThroughputResult["cpu"]): string {
  const server = cpu.serverCorePercent === undefined ? "?" : integer.format(cpu.serverCorePercent);
  return `server ${server}% · bench ${integer.format(cpu.benchCorePercent)}% of one core`;
}

export function markdownTable(report: QueueBenchReport): string {
  const { fsyncProbe: probe, throughput: w1, latency: w2, groupCommit: gc, options } = report;
  const rows: [string, string, string][] = [
    [
      "Disk flush rate (probe)",
      `${integer.format(probe.flushesPerSecond)}/s ` +
        `(p50 ${fine.format(probe.latencyMs.p50)}, p99 ${fine.format(probe.latencyMs.p99)} ms)`,
      "4 KiB append + fdatasync in a loop for 1 s, beside the data file: the most commits/s the disk allows",
    ],
    [
      "W1 end-to-end",
      `${integer.format(w1.endToEndPerSecond)} msg/s`,
      `${w1.messages} msgs of ${w1.bodyBytes} B, first publish → last ack, producer and consumer together`,
    ],
    [
      "W1 confirm",
      `${integer.format(w1.confirmPerSecond)} msg/s`,
      "first publish → last durable confirm (the publish side alone)",
    ],
    [
      "W1 exactly-once",
      `${w1.duplicates} duplicates · ${w1.missing} missing · ${w1.redeliveries} redeliveries`,
      "every sequence number delivered once; a missing one fails the run",
    ],
    [
      "W1 messages per flush (at least)",
      decimal.format(gc.messagesPerFlushMin),
      "confirm rate ÷ flush rate: > 1 means messages share commits (batching alone can do that)",
    ],
    [
      "W1 messages per send request",
      decimal.format(gc.messagesPerSendRequest),
      "what the client's publish coalescing (≤ 100) achieved",
    ],
    [
      "W1 requests",
      requestCell(w1.requests, w1.endToEndMs, gc.requestsPerFlushMin.throughput),
      "send + receive + ack requests (each ≥ 1 commit job) per second, and per flush",
    ],
    [
      "W1 CPU",
      cpuCell(w1.cpu),
      "CPU time ÷ wall time; the server's one thread also blocks in fsync (not CPU time), " +
        "so it can be saturated below 100%",
    ],
    [
      `W2 end-to-end latency at ${w2.ratePerSecond} msg/s`,
      latencyCells(w2.endToEndMs),
      `${w2.messages} msgs over ${w2.seconds} s; intended send time → receive answered`,
    ],
    ["W2 confirm latency", latencyCells(w2.confirmMs), "intended send time → publish confirmed durable"],
    [
      "W2 schedule lag (max)",
      `${fine.format(w2.scheduleLagMsMax)} ms`,
      "how late the load generator issued a publish; already included in the latencies",
    ],
    [
      "W2 requests",
      requestCell(w2.requests, w2.elapsedMs, gc.requestsPerFlushMin.latency),
      "as for W1; > 1 per flush means the server shares one commit among requests",
    ],
    ["W2 CPU", cpuCell(w2.cpu), "share of one core over the workload"],
  ];
  const { machine } = report;
  const header =
    `Queue benchmark, durability ${options.durability}, ${report.startedAt}, ` +
    `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, ` +
    `load average ${fine.format(machine.loadAverage1m)} at start`;
  const lines = [header, "", "| Figure | Value | What it means |", "|---|---|---|"];
  for (const [figure, value, meaning] of rows) lines.push(`| ${figure} | ${value} | ${meaning} |`);
  lines.push("", groupCommitVerdict(gc));
  return lines.join("\n");
}

/** One paragraph saying what the flush comparison proves, and what it does not. */
export function groupCommitVerdict(gc: GroupCommitEvidence): string {
  if (!gc.applies) {
    return "Durability os: commits do not wait for a flush, so the flush comparison proves nothing.";
  }
  const messagesPerFlush = decimal.format(gc.messagesPerFlushMin);
  const messages =
    gc.messagesPerFlushMin > 1
      ? `Commits are shared: at least ${messagesPerFlush} confirmed messages per flush in W1, ` +
        `with ${decimal.format(gc.messagesPerSendRequest)} messages per send request from client batching.`
      : `W1 confirmed ${messagesPerFlush} messages per flush: no sharing of commits is shown.`;
  const requestsPerFlush = Math.max(gc.requestsPerFlushMin.throughput, gc.requestsPerFlushMin.latency);
  if (requestsPerFlush > 1) {
    return `${messages} The server's group commit put at least ${decimal.format(requestsPerFlush)} requests into one commit.`;
  }
  return (
    `${messages} Whether the server puts several requests into one commit is not shown: ` +
    "no workload made more requests per second than the disk can flush."
  );
}
