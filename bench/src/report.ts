/** Turns the measured figures into markdown tables, the verdict on the targets, and a JSON document. */
import { corePercent } from "./cpu.js";
import type { KeyedQueuePhase, QueueKind } from "./fifo.js";
import type { FsyncProbeResult } from "./fsync-probe.js";
import { fifoThroughputRatioMin } from "./limits.js";
import type { WorkloadCosts } from "./measure.js";
import type { BenchOptions, Command, RunSpec } from "./options.js";
import type { RunReport } from "./run.js";
import type { Percentiles } from "./statistics.js";

export interface BenchReport {
  benchmark: Command;
  startedAt: string;
  machine: { cpus: number; cpuModel: string; node: string; platform: string; loadAverage1m: number };
  options: BenchOptions;
  fsyncProbe: FsyncProbeResult;
  runs: RunReport[];
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const fine = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });
const dash = "–";

function latencyCell(p: Percentiles): string {
  if (p.count === 0) return dash;
  return `p50 ${fine.format(p.p50)} · p99 ${fine.format(p.p99)} · max ${fine.format(p.max)} ms`;
}

/** CPU per message, in µs, of the broker processes, the PostgreSQL backends and this process. */
function cpuPerMessageCell(costs: WorkloadCosts, messages: number): string {
  const perMessage = (seconds: number | undefined) =>
    seconds === undefined ? dash : integer.format((seconds * 1e6) / messages);
  const { cpu } = costs;
  return (
    `broker ${perMessage(cpu.brokerSeconds)} · PostgreSQL ${perMessage(cpu.postgresSeconds)} · ` +
    `bench ${perMessage(cpu.benchSeconds)} µs`
  );
}

/** CPU as a share of one core over the workload, for the same three. */
function coreShareCell(costs: WorkloadCosts): string {
  const share = (seconds: number | undefined) => {
    const percent = corePercent(seconds, costs.cpu.elapsedMs);
    return percent === undefined ? dash : `${integer.format(percent)}%`;
  };
  const { cpu } = costs;
  return `broker ${share(cpu.brokerSeconds)} · PostgreSQL ${share(cpu.postgresSeconds)} · bench ${share(cpu.benchSeconds)}`;
}

function roundTripsCell(costs: WorkloadCosts, messages: number): string {
  if (!costs.wire) return dash;
  const statements = Object.values(costs.wire.statements).reduce((total, count) => total + count, 0);
  return `${fine.format(costs.wire.roundTrips / messages)} round trips · ${fine.format(statements / messages)} statements`;
}

/**
 * The machine's disks over the workload, per message: flushes per 100 (fsync/fdatasync that reached
 * the device) and KiB written. Every target writes to the same disk, so this compares across targets.
 */
function diskCell(costs: WorkloadCosts, messages: number): string {
  if (!costs.disk) return dash;
  const { flushes, bytesWritten } = costs.disk;
  const flushed = flushes === undefined ? "? flushes" : `${fine.format((flushes * 100) / messages)} flushes`;
  return `${flushed} · ${decimal.format(bytesWritten / 1024 / messages)} KiB`;
}

/** HTTP requests of the workload; a push consumer's traffic is WebSocket frames, which are not counted. */
function requestsCell(costs: WorkloadCosts, elapsedMs: number): string {
  const { send = 0, publish = 0, receive = 0, ack = 0, other = 0 } = costs.counters;
  const total = send + publish + receive + ack;
  if (total === 0) return dash;
  const perSecond = (total * 1000) / elapsedMs;
  const sent = publish > 0 ? `publish ${publish}` : `send ${send}`;
  const stats = other > 0 ? ` (+ ${other} other: queue stats, setup)` : "";
  return `${integer.format(perSecond)}/s (${sent} · receive ${receive} · ack ${ack})${stats}`;
}

/** With --count-frames: the push consumer's WebSocket frames over the workload, per 100 deliveries. */
function framesCell(costs: WorkloadCosts, deliveries: number): string {
  const count = (name: string) => costs.counters[name] ?? 0;
  const deliver = count("ws← deliver");
  const acks = count("ws→ ack");
  if (deliver + acks === 0) return dash;
  const per100 = (value: number) => fine.format((value * 100) / deliveries);
  return (
    `deliver ${per100(deliver)} · ack ${per100(acks)} (${fine.format(count("ws→ ack receipts") / Math.max(acks, 1))} receipts each) · ` +
    `server→client TCP reads ${per100(count("ws← chunks"))}`
  );
}

/** The store's group commit over the workload, per 100 messages: store calls, and commits. */
function storeCell(costs: WorkloadCosts, messages: number): string {
  if (!costs.store) return dash;
  const per100 = (count: number) => fine.format((count * 100) / messages);
  return `${per100(costs.store.jobs)} calls · ${per100(costs.store.commits)} commits`;
}

type Row = [figure: string, cell: (run: RunReport) => string, meaning: string];

/** Every figure, one row each, as a function of one run; a workload that did not run shows a dash. */
function figureRows(probe: FsyncProbeResult): Row[] {
  const w1 = (cell: (w: NonNullable<RunReport["throughput"]>) => string) => (run: RunReport) =>
    run.throughput ? cell(run.throughput) : dash;
  const w2 = (cell: (w: NonNullable<RunReport["latency"]>) => string) => (run: RunReport) =>
    run.latency ? cell(run.latency) : dash;
  const w3 = (cell: (w: NonNullable<RunReport["backlog"]>) => string) => (run: RunReport) =>
    run.backlog ? cell(run.backlog) : dash;
  /** A W3 cell of one figure for each phase: "enqueue …; drain …". */
  const w3Phases = (
    w: NonNullable<RunReport["backlog"]>,
    cell: (costs: WorkloadCosts, messages: number) => string,
  ) => `enqueue ${cell(w.enqueueCosts, w.messages)}; drain ${cell(w.drainCosts, w.messages)}`;
  const fanout = (cell: (w: NonNullable<RunReport["fanout"]>) => string) => (run: RunReport) =>
    run.fanout ? cell(run.fanout) : dash;
  return [
    [
      "W1 end-to-end",
      w1((w) => `**${integer.format(w.endToEndPerSecond)} msg/s**`),
      "first publish → last ack, one producer (≤ 1,000 unconfirmed) and one consumer (≤ 256 unacked) at once",
    ],
    [
      "W1 confirm",
      w1((w) => `${integer.format(w.confirmPerSecond)} msg/s`),
      "first publish → last durable confirm",
    ],
    [
      "W1 exactly-once",
      w1((w) => `${w.duplicates} dup · ${w.missing} missing · ${w.redeliveries ?? "?"} redelivered`),
      "every sequence number delivered once; a missing one fails the run",
    ],
    [
      "W1 messages per flush (at least)",
      w1((w) => decimal.format(w.confirmPerSecond / probe.flushesPerSecond)),
      `confirm rate ÷ the disk's ${integer.format(probe.flushesPerSecond)} flushes/s: > 1 means commits are shared`,
    ],
    [
      "W1 CPU per message",
      w1((w) => cpuPerMessageCell(w.costs, w.messages)),
      "CPU time ÷ messages: broker processes (Hopper's nodes), the target's PostgreSQL backends, the bench process (for the peers it includes the queue library)",
    ],
    ["W1 CPU share", w1((w) => coreShareCell(w.costs)), "CPU time ÷ wall time, in % of one core"],
    [
      "W1 PostgreSQL traffic per message",
      w1((w) => roundTripsCell(w.costs, w.messages)),
      "with --count-round-trips: Sync + simple Query messages, and Parse + Query statements",
    ],
    [
      "W1 HTTP requests",
      w1((w) => requestsCell(w.costs, w.endToEndMs)),
      "Hopper only; a push consumer's frames are not HTTP requests",
    ],
    [
      "W1 WebSocket frames per 100 messages",
      w1((w) => framesCell(w.costs, w.messages)),
      "with --count-frames (push): deliver frames, ack frames and receipts per ack frame, and the relay's reads from the server",
    ],
    [
      "W1 store calls and commits per 100 messages",
      w1((w) => storeCell(w.costs, w.messages)),
      "Hopper on SQLite (/metrics): store calls (send, receive, ack, …) and the group commits they shared",
    ],
    [
      "W1 disk flushes per 100 messages · KiB written per message",
      w1((w) => diskCell(w.costs, w.messages)),
      "the machine's disks (/proc/diskstats), whoever wrote: the broker, or PostgreSQL for the targets stored there",
    ],
    [
      "W2 end-to-end latency",
      w2((w) => `**${latencyCell(w.endToEndMs)}**`),
      "at a fixed rate; intended send time → receive answered (no coordinated omission)",
    ],
    [
      "W2 end-to-end after the first second",
      w2((w) => latencyCell(w.endToEndAfterFirstSecondMs)),
      "the same, without the messages of the schedule's first second (the processes warming up)",
    ],
    [
      "W2 confirm latency",
      w2((w) => latencyCell(w.confirmMs)),
      "intended send time → publish confirmed durable",
    ],
    [
      "W2 schedule lag (max)",
      w2((w) => `${fine.format(w.scheduleLagMsMax)} ms`),
      "how late the load generator itself issued a publish; already part of both latencies",
    ],
    ["W2 CPU per message", w2((w) => cpuPerMessageCell(w.costs, w.messages)), "as for W1"],
    ["W2 CPU share", w2((w) => coreShareCell(w.costs)), "in % of one core"],
    ["W2 HTTP requests", w2((w) => requestsCell(w.costs, w.elapsedMs)), "as for W1"],
    ["W2 WebSocket frames per 100 messages", w2((w) => framesCell(w.costs, w.messages)), "as for W1"],
    ["W2 store calls and commits per 100 messages", w2((w) => storeCell(w.costs, w.messages)), "as for W1"],
    [
      "W2 disk flushes per 100 messages · KiB written per message",
      w2((w) => diskCell(w.costs, w.messages)),
      "as for W1",
    ],
    [
      "W2 PostgreSQL traffic per message",
      w2((w) => roundTripsCell(w.costs, w.messages)),
      "with --count-round-trips; includes the consumers' empty polls",
    ],
    [
      "W3 enqueue",
      w3((w) => `**${integer.format(w.enqueuePerSecond)} msg/s**`),
      "no consumer; one producer, ≤ 1,000 unconfirmed; first publish → last confirm",
    ],
    [
      "W3 drain",
      w3((w) => `**${integer.format(w.drainPerSecond)} msg/s**`),
      "consumers (≤ 100 per receive, ≤ 256 unacked each, acks batched) start → last ack",
    ],
    [
      "W3 exactly-once",
      w3((w) => `${w.duplicates} dup · 0 missing · ${w.redeliveries ?? "?"} redelivered`),
      "as for W1",
    ],
    ["W3 enqueue CPU per message", w3((w) => cpuPerMessageCell(w.enqueueCosts, w.messages)), "as for W1"],
    ["W3 drain CPU per message", w3((w) => cpuPerMessageCell(w.drainCosts, w.messages)), "as for W1"],
    ["W3 drain CPU share", w3((w) => coreShareCell(w.drainCosts)), "in % of one core"],
    ["W3 enqueue CPU share", w3((w) => coreShareCell(w.enqueueCosts)), "in % of one core"],
    ["W3 store calls and commits per 100 messages", w3((w) => w3Phases(w, storeCell)), "as for W1"],
    [
      "W3 disk flushes per 100 messages · KiB written per message",
      w3((w) => w3Phases(w, diskCell)),
      "as for W1",
    ],
    [
      "W3 PostgreSQL traffic per message",
      w3((w) => (w.enqueueCosts.wire ? w3Phases(w, roundTripsCell) : dash)),
      "with --count-round-trips",
    ],
    [
      "Fan-out publish",
      fanout((w) => `**${integer.format(w.publishPerSecond)} msg/s**`),
      "publishTo a fanout exchange bound to 3 queues, ≤ 1,000 unconfirmed, ≤ 100 per request; first publish → last confirm",
    ],
    [
      "Fan-out deliveries",
      fanout((w) => `**${integer.format(w.deliveriesPerSecond)} deliveries/s**`),
      "3 × messages ÷ (first publish → last ack); one consumer per queue (≤ 256 unacked) at the same time",
    ],
    [
      "Fan-out exactly-once per queue",
      fanout((w) =>
        w.perQueue
          .map((q) => `${q.duplicates} dup · ${q.missing} missing · ${q.redeliveries ?? "?"} redelivered`)
          .join("; "),
      ),
      "each queue got every message once",
    ],
    [
      "Fan-out CPU per delivery",
      fanout((w) => cpuPerMessageCell(w.costs, w.messages * w.queues)),
      "CPU time ÷ (3 × messages)",
    ],
    ["Fan-out CPU share", fanout((w) => coreShareCell(w.costs)), "in % of one core"],
    ["Fan-out HTTP requests", fanout((w) => requestsCell(w.costs, w.endToEndMs)), "as for W1"],
    [
      "Fan-out WebSocket frames per 100 deliveries",
      fanout((w) => framesCell(w.costs, w.messages * w.queues)),
      "as for W1, over the 3 consumers",
    ],
    [
      "Fan-out store calls and commits per 100 messages published",
      fanout((w) => storeCell(w.costs, w.messages)),
      "as for W1",
    ],
    ...fifoRows(),
    [
      "load average at start",
      (run) => fine.format(run.loadAverage1m),
      "1-minute load average of the machine",
    ],
  ];
}

/** The FIFO workload's rows: each queue's figures, then their ratio. */
function fifoRows(): Row[] {
  const phase =
    (kind: QueueKind, cell: (phase: KeyedQueuePhase, messages: number) => string) => (run: RunReport) => {
      const found = run.fifo?.phases.find((candidate) => candidate.kind === kind);
      return found && run.fifo ? cell(found, run.fifo.messages) : dash;
    };
  const both = (
    name: string,
    cell: (phase: KeyedQueuePhase, messages: number) => string,
    meaning: string,
  ): Row[] => [
    [`FIFO workload, standard queue: ${name}`, phase("standard", cell), meaning],
    [`FIFO workload, FIFO queue: ${name}`, phase("fifo", cell), "as for the standard queue"],
  ];
  return [
    ...both(
      "end-to-end",
      (p) => `**${integer.format(p.endToEndPerSecond)} msg/s**`,
      "first send → last ack; one producer (≤ 1,000 unconfirmed, ≤ 100 per send) and the consumers (each ≤ 100 per receive, ≤ 256 unacked) at once; keys g0… round-robin",
    ),
    [
      "FIFO ÷ standard, end to end",
      (run) => {
        const ratio = run.fifo?.fifoToStandard;
        if (ratio === undefined) return dash;
        const met = ratio >= fifoThroughputRatioMin ? "met" : "NOT met";
        return `**${fine.format(ratio)}×** (target ≥ ${fifoThroughputRatioMin}×: ${met})`;
      },
      "issue 4: a FIFO queue stays within 2× of the standard queue's throughput",
    ],
    ...both(
      "confirm",
      (p) => `${integer.format(p.confirmPerSecond)} msg/s`,
      "first send → last durable confirm",
    ),
    ...both(
      "exactly-once",
      (p) => `${p.duplicates} dup · ${p.missing} missing · ${p.redeliveries ?? "?"} redelivered`,
      "as for W1",
    ),
    ...both(
      "group order",
      (p) =>
        `${p.order.violations} violations (${p.order.outOfOrder} out of order · ${p.order.disagreeing} disagreeing) · ` +
        `${p.order.requestPairsReversed} request pairs stored reversed`,
      "a FIFO queue must show 0 violations; a standard queue promises no order (group-order.ts); a reversed pair of concurrent send requests is allowed",
    ),
    ...both("CPU per message", (p, messages) => cpuPerMessageCell(p.costs, messages), "as for W1"),
    ...both("CPU share", (p) => coreShareCell(p.costs), "in % of one core"),
    ...both("HTTP requests", (p) => requestsCell(p.costs, p.endToEndMs), "as for W1"),
    ...both(
      "store calls and commits per 100 messages",
      (p, messages) => storeCell(p.costs, messages),
      "as for W1",
    ),
  ];
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
