/**
 * The figures of a bench report, one row each: its name, its cell as a function of one run, and what it
 * means. report.ts lays them out as a table, one column per run.
 */
import { corePercent } from "./cpu.js";
import type { KeyedQueuePhase, QueueKind } from "./fifo.js";
import type { FsyncProbeResult } from "./fsync-probe.js";
import { fifoThroughputRatioMin } from "./limits.js";
import type { WorkloadCosts } from "./measure.js";
import type { RunReport } from "./run.js";
import type { Percentiles } from "./statistics.js";

export const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
export const fine = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });
export const dash = "–";

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

export type Row = [figure: string, cell: (run: RunReport) => string, meaning: string];

/** Every figure, one row each, as a function of one run; a workload that did not run shows a dash. */
export function figureRows(probe: FsyncProbeResult): Row[] {
  return [
    ...w1Rows(probe),
    ...w2Rows(),
    ...w3Rows(),
    ...fanoutRows(),
    ...fifoRows(),
    [
      "load average at start",
      (run) => fine.format(run.loadAverage1m),
      "1-minute load average of the machine",
    ],
  ];
}

/** A cell of one workload's figure: a dash when the run did not run that workload. */
function cellOf<W>(
  pick: (run: RunReport) => W | undefined,
  cell: (w: W) => string,
): (run: RunReport) => string {
  return (run) => {
    const workload = pick(run);
    return workload ? cell(workload) : dash;
  };
}

type Throughput = NonNullable<RunReport["throughput"]>;
type Latency = NonNullable<RunReport["latency"]>;
type Backlog = NonNullable<RunReport["backlog"]>;
type Fanout = NonNullable<RunReport["fanout"]>;
const w1 = (cell: (w: Throughput) => string) => cellOf((run) => run.throughput, cell);
const w2 = (cell: (w: Latency) => string) => cellOf((run) => run.latency, cell);
const w3 = (cell: (w: Backlog) => string) => cellOf((run) => run.backlog, cell);
const fanout = (cell: (w: Fanout) => string) => cellOf((run) => run.fanout, cell);

/** W1's rows: throughput, one producer and one consumer at once. */
function w1Rows(probe: FsyncProbeResult): Row[] {
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
  ];
}

/** W2's rows: latency at a fixed rate. */
function w2Rows(): Row[] {
  return [
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
  ];
}

/** A W3 cell of one figure for each phase: "enqueue …; drain …". */
function w3Phases(w: Backlog, cell: (costs: WorkloadCosts, messages: number) => string): string {
  return `enqueue ${cell(w.enqueueCosts, w.messages)}; drain ${cell(w.drainCosts, w.messages)}`;
}

/** W3's rows: a backlog enqueued with no consumer, then drained. */
function w3Rows(): Row[] {
  return [
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
  ];
}

/** The fan-out workload's rows: one exchange bound to three queues. */
function fanoutRows(): Row[] {
  return [
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
