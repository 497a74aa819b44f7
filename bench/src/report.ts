/** Turns the measured figures into markdown tables, the verdict on the targets, and a JSON document. */
import type { FsyncProbeResult } from "./fsync-probe.js";
import type { BenchOptions, Command, RunSpec } from "./options.js";
import { dash, figureRows, fine, integer } from "./report-figures.js";
import type { RunReport } from "./run.js";

export interface BenchReport {
  benchmark: Command;
  startedAt: string;
  machine: { cpus: number; cpuModel: string; node: string; platform: string; loadAverage1m: number };
  options: BenchOptions;
  fsyncProbe: FsyncProbeResult;
  runs: RunReport[];
}

function headerLine(report: BenchReport): string {
  const { machine, options, fsyncProbe: probe } = report;
  return (
    `${report.benchmark}, ${report.startedAt}, ${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}; ` +
    `W1 ${options.messages} msgs, W2 ${options.ratePerSecond} msg/s × ${options.latencySeconds} s` +
    `${options.latencyConsumers > 1 ? ` to ${options.latencyConsumers} consumers` : ""}, ` +
    `W3 ${options.backlog} msgs, fan-out ${options.fanoutMessages} msgs, ` +
    `FIFO ${options.fifoMessages} msgs in ${options.fifoGroups} groups with ${options.fifoConsumers} consumers; bodies of ${options.bodyBytes} B; disk: ${integer.format(probe.flushesPerSecond)} ` +
    `flushes/s (4 KiB + fdatasync, p50 ${fine.format(probe.latencyMs.p50)}, p99 ${fine.format(probe.latencyMs.p99)} ms)`
  );
}

/** One row per figure, one column per run. Rows whose every cell is a dash are left out. */
export function markdownTable(report: BenchReport): string {
  const runs = report.runs;
  const lines = [headerLine(report), ""];
  if (runs.length === 1) {
    const run = runs[0] as RunReport;
    lines.push(`| Figure | ${run.label} | What it means |`, "|---|---|---|");
    for (const [figure, cell, meaning] of figureRows(report.fsyncProbe)) {
      const value = cell(run);
      if (value !== dash) lines.push(`| ${figure} | ${value} | ${meaning} |`);
    }
  } else {
    lines.push(`| Figure | ${runs.map((run) => run.label).join(" | ")} |`);
    lines.push(`|---|${runs.map(() => "---").join("|")}|`);
    for (const [figure, cell] of figureRows(report.fsyncProbe)) {
      const cells = runs.map(cell);
      if (cells.some((value) => value !== dash)) lines.push(`| ${figure} | ${cells.join(" | ")} |`);
    }
  }
  for (const run of runs) if (run.error) lines.push("", `**${run.label} failed:** ${run.error}`);
  if (report.benchmark === "compare") {
    // compare measures the brokers the other verdicts only cite, and says its own ratios.
    lines.push("", ...compareNotes(runs));
  } else {
    const verdict = targetsVerdict(runs);
    if (verdict.length > 0) lines.push("", ...verdict);
    const consumers = consumersVerdict(runs);
    if (consumers.length > 0) lines.push("", ...consumers);
  }
  const statements = statementTables(runs);
  if (statements.length > 0) lines.push("", ...statements);
  return lines.join("\n");
}

/**
 * The issue's targets: Hopper on PostgreSQL ≥ 5× pg-boss and ≥ 2× plain SKIP LOCKED in W1 end to end,
 * and W2's p99 ≤ 10 ms at 1,000 msg/s. One line per Hopper PostgreSQL run that can be compared.
 */
export function targetsVerdict(runs: readonly RunReport[]): string[] {
  const w1 = (target: string) =>
    runs.find((run) => run.spec.target === target && run.throughput)?.throughput?.endToEndPerSecond;
  const pgBoss = w1("pgboss");
  const skipLocked = w1("skiplocked");
  const lines: string[] = [];
  for (const run of runs) {
    if (run.spec.target !== "hopper" || run.spec.store !== "postgres") continue;
    const parts: string[] = [];
    const hopper = run.throughput?.endToEndPerSecond;
    const ratio = (peer: number | undefined, name: string, wanted: number) => {
      if (hopper === undefined || peer === undefined) return;
      const achieved = hopper / peer;
      parts.push(
        `${fine.format(achieved)}× ${name} (target ≥ ${wanted}×: ${achieved >= wanted ? "met" : "NOT met"})`,
      );
    };
    ratio(pgBoss, "pg-boss", 5);
    ratio(skipLocked, "plain SKIP LOCKED", 2);
    const p99 = run.latency?.endToEndMs.p99;
    if (p99 !== undefined && run.latency?.ratePerSecond === 1000) {
      parts.push(`W2 p99 ${fine.format(p99)} ms (target ≤ 10 ms: ${p99 <= 10 ? "met" : "NOT met"})`);
    }
    if (parts.length > 0) lines.push(`- ${run.label}: W1 end to end ${parts.join("; ")}`);
  }
  return lines;
}

/**
 * compare: each target's versions and what its confirms and acks mean, the ratio of Hopper's best W1
 * end to end to the best durable peer's, and the caveats that apply to the targets that ran.
 */
export function compareNotes(runs: readonly RunReport[]): string[] {
  const lines = ["Versions:", ""];
  for (const run of runs) lines.push(`- ${run.label}: ${run.versions ?? "(not started)"}`);
  lines.push("", "What a confirm and an ack mean:", "");
  for (const run of runs) {
    const durable = run.confirmsAfterFsync ? "after fsync" : "**before fsync**";
    lines.push(`- ${run.label} (confirms ${durable}): ${run.semantics ?? "(not started)"}`);
  }
  const best = (candidates: readonly RunReport[]) => {
    let found: RunReport | undefined;
    for (const run of candidates) {
      const rate = run.throughput?.endToEndPerSecond;
      if (rate !== undefined && rate > (found?.throughput?.endToEndPerSecond ?? -1)) found = run;
    }
    return found;
  };
  const hopper = best(runs.filter((run) => run.spec.target === "hopper" && run.confirmsAfterFsync));
  const peers = runs.filter((run) => run.spec.target !== "hopper");
  const durablePeer = best(peers.filter((run) => run.confirmsAfterFsync));
  const anyPeer = best(peers);
  const ratio = (peer: RunReport | undefined, what: string) => {
    const hopperRate = hopper?.throughput?.endToEndPerSecond;
    const peerRate = peer?.throughput?.endToEndPerSecond;
    if (hopper === undefined || hopperRate === undefined || peer === undefined || peerRate === undefined)
      return;
    lines.push(
      `- W1 end to end, Hopper's best (${hopper.label}, ${integer.format(hopperRate)} msg/s) ÷ ${what} ` +
        `(${peer.label}, ${integer.format(peerRate)} msg/s) = **${fine.format(hopperRate / peerRate)}×**`,
    );
  };
  lines.push("", "Ratios:", "");
  ratio(durablePeer, "the best peer that confirms after fsync");
  if (anyPeer !== durablePeer) ratio(anyPeer, "the best peer of all");
  lines.push("", "Caveats:", "", ...compareCaveats(runs).map((caveat) => `- ${caveat}`));
  return lines;
}

/** The caveats that hold for the targets of a compare run. */
function compareCaveats(runs: readonly RunReport[]): string[] {
  const ran = (target: RunReport["spec"]["target"]) => runs.some((run) => run.spec.target === target);
  const caveats = [
    "The machine is shared: two cores for the bench, every broker and other sessions' work. The load " +
      "average at each run's start is in the table; treat differences under ~30% between runs as noise.",
    "Each target's client runs in the bench process, so a peer's bench CPU includes its client library " +
      "(for pg-boss, the SKIP LOCKED queue and BullMQ, the queue logic too). Broker CPU is read from " +
      "/proc: Hopper's servers, RabbitMQ's beam.smp, nats-server, the private redis-server; for the " +
      "PostgreSQL targets, the PostgreSQL column. RabbitMQ and NATS are the machine's shared services, so " +
      "their CPU includes anything else they did meanwhile.",
  ];
  if (ran("nats")) {
    caveats.push(
      "NATS JetStream answers a publish (PubAck) and an ack once they are written to its file store, " +
        "BEFORE fsync: the server flushes on its sync interval (2 minutes by default), so its confirms " +
        "are not durable against a machine crash, unlike every other target here.",
    );
  }
  if (ran("rabbitmq")) {
    caveats.push(
      "RabbitMQ does not confirm acks (AMQP 0-9-1): an ack counts when it is sent, and the last ack's " +
        "time is taken after one more round trip on the consumer's channel. Its credit is the " +
        "broker's prefetch (basic.qos 256 per consumer), and the acks of one turn share one basic.ack. " +
        "By RabbitMQ's own rule a persistent message is confirmed once it is on disk OR once every queue " +
        "delivered it and got its ack, and a classic queue may deliver a message before confirming it, so " +
        "its end-to-end latency can be below its confirm latency.",
    );
  }
  if (ran("redis-streams") || ran("bullmq")) {
    caveats.push(
      "Redis runs as a private redis-server per run, with appendonly yes and appendfsync always: it " +
        "answers writes after the AOF fsync of their event-loop pass (group commit). Redis Streams keeps " +
        "acked entries in the stream (XACK clears only the pending list) and has no reclaim of a dead " +
        "consumer's entries here (no XAUTOCLAIM); BullMQ removes jobs on completion.",
    );
  }
  if (ran("nats") || ran("bullmq")) {
    caveats.push(
      "NATS JetStream's max_ack_pending and BullMQ's concurrency hold the credit of 256 per consumer; in " +
        "W3, NATS's limit is 4 × 256 for the one durable consumer that the 4 clients share.",
    );
  }
  return caveats;
}

/** The issue's reference figures, measured elsewhere (RabbitMQ, quorum queues), not by this bench. */
const rabbitReference =
  "RabbitMQ quorum queues (the issue's reference, not measured here): 23k msg/s end to end, p99 3 ms at 1,000 msg/s";

/**
 * Push against pull on the same store (and, on PostgreSQL, the same number of nodes), workload by
 * workload, for each such pair of Hopper runs: compare-consumers runs one pair, compare-pg one per node
 * count. Push should beat pull on W1 end to end, W2's p99 and fan-out deliveries; each line says whether
 * it did. A run with no twin (compare-pg's SQLite run is pull only) is left out.
 */
export function consumersVerdict(runs: readonly RunReport[]): string[] {
  type HopperRun = RunReport & { spec: Extract<RunSpec, { target: "hopper" }> };
  const hopperRuns = runs.filter((run): run is HopperRun => run.spec.target === "hopper");
  const setupOf = ({ spec }: HopperRun) =>
    spec.store === "postgres" ? `postgres/${spec.nodes}` : spec.store;
  const pairs = hopperRuns.flatMap((pull) => {
    if (pull.spec.consumer !== "pull") return [];
    const push = hopperRuns.find((run) => run.spec.consumer === "push" && setupOf(run) === setupOf(pull));
    return push ? [{ pull, push }] : [];
  });
  const lines: string[] = [];
  const higherIsBetter = (
    prefix: string,
    name: string,
    pullValue: number | undefined,
    pushValue: number | undefined,
    unit: string,
  ) => {
    if (pullValue === undefined || pushValue === undefined) return;
    const ratio = pushValue / pullValue;
    lines.push(
      `- ${prefix}${name}: push ${integer.format(pushValue)} ${unit}, pull ${integer.format(pullValue)} ${unit}: ` +
        `push ÷ pull = ${fine.format(ratio)}× (${ratio > 1 ? "push beats pull" : "push does NOT beat pull"})`,
    );
  };
  for (const { pull, push } of pairs) {
    // With several pairs each line names its pull run; with one, the table above says which it is.
    const prefix = pairs.length > 1 ? `${pull.label}: ` : "";
    higherIsBetter(
      prefix,
      "W1 end to end",
      pull.throughput?.endToEndPerSecond,
      push.throughput?.endToEndPerSecond,
      "msg/s",
    );
    const pullP99 = pull.latency?.endToEndMs.p99;
    const pushP99 = push.latency?.endToEndMs.p99;
    if (pullP99 !== undefined && pushP99 !== undefined) {
      lines.push(
        `- ${prefix}W2 end-to-end p99: push ${fine.format(pushP99)} ms, pull ${fine.format(pullP99)} ms ` +
          `(p50 ${fine.format(push.latency?.endToEndMs.p50 ?? Number.NaN)} vs ${fine.format(pull.latency?.endToEndMs.p50 ?? Number.NaN)} ms): ` +
          `${pushP99 < pullP99 ? "push beats pull" : "push does NOT beat pull"}`,
      );
    }
    higherIsBetter(
      prefix,
      "Fan-out deliveries",
      pull.fanout?.deliveriesPerSecond,
      push.fanout?.deliveriesPerSecond,
      "deliveries/s",
    );
  }
  if (lines.length > 0) lines.push(`- ${rabbitReference}`);
  return lines;
}

/**
 * With --count-round-trips: the statements each run sent to PostgreSQL in W1, per 100 messages (one
 * full batch), most frequent first.
 */
function statementTables(runs: readonly RunReport[]): string[] {
  const lines: string[] = [];
  for (const run of runs) {
    const w1 = run.throughput;
    if (!w1?.costs.wire) continue;
    const per100 = (count: number) => fine.format((count * 100) / w1.messages);
    lines.push(
      `W1 statements of ${run.label}, per 100 messages (${per100(w1.costs.wire.roundTrips)} round trips):`,
      "",
      "```",
    );
    const sorted = Object.entries(w1.costs.wire.statements).sort((a, b) => b[1] - a[1]);
    for (const [text, count] of sorted.slice(0, statementsListedMax)) {
      lines.push(`${per100(count).padStart(7)}  ${text}`);
    }
    lines.push("```", "");
  }
  return lines;
}

/** The statement listing shows the most frequent ones; rarer ones (housekeeping, setup) are in the JSON. */
const statementsListedMax = 15;
