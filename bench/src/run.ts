/**
 * One run: starts one target (Hopper with its store and nodes, or a peer), puts it through the chosen
 * workloads in order, and closes it (processes stopped, schema dropped, queues and streams deleted)
 * whether the run succeeded or not.
 */
import { loadavg } from "node:os";
import { type BacklogResult, runBacklog } from "./backlog.js";
import { type FanoutResult, runFanout } from "./fanout.js";
import { type FifoResult, runFifo } from "./fifo.js";
import { startHopperTarget } from "./hopper-target.js";
import { type LatencyResult, runLatency } from "./latency.js";
import type { WorkloadContext } from "./measure.js";
import type { BenchOptions, ConsumerMode, RunSpec } from "./options.js";
import { startBullMqTarget } from "./peers/bullmq.js";
import { startNatsTarget } from "./peers/nats.js";
import { startPgBossTarget } from "./peers/pg-boss.js";
import { startRabbitMqTarget } from "./peers/rabbitmq.js";
import { startRedisStreamsTarget } from "./peers/redis-streams.js";
import { startSkipLockedTarget } from "./peers/skip-locked.js";
import type { PgWireCounter } from "./pg-wire-counter.js";
import { BackendWatch } from "./postgres.js";
import type { QueueTarget } from "./target.js";
import { runThroughput, type ThroughputResult } from "./throughput.js";

export interface RunReport {
  spec: RunSpec;
  label: string;
  startedAt: string;
  /** The machine is shared: the load when the run began says how much its figures may be disturbed. */
  loadAverage1m: number;
  /** The target's server and client versions, and what its confirms and acks mean (target.ts). */
  versions?: string;
  semantics?: string;
  confirmsAfterFsync?: boolean;
  throughput?: ThroughputResult;
  latency?: LatencyResult;
  backlog?: BacklogResult;
  fanout?: FanoutResult;
  fifo?: FifoResult;
  /** Why the run stopped, if it failed; the figures it finished are kept. */
  error?: string;
}

/** Closes whatever is open when the bench is interrupted: the targets of the run in progress. */
export const openTargets = new Set<QueueTarget>();

export async function runOne(
  spec: RunSpec,
  options: BenchOptions,
  shared: { wireCounter: PgWireCounter | undefined; log: (message: string) => void },
): Promise<RunReport> {
  // Over 80 lines: one run told in order: start the target, run each workload, read its costs, close.
  const { log, wireCounter } = shared;
  const startedAt = new Date().toISOString();
  const loadAverage1m = loadavg()[0] ?? Number.NaN;
  const connectUrl = wireCounter ? wireCounter.relayUrl(options.pgUrl) : options.pgUrl;
  const usesPostgres =
    spec.target === "skiplocked" ||
    spec.target === "pgboss" ||
    (spec.target === "hopper" && spec.store === "postgres");
  let target: QueueTarget | undefined;
  let backends: BackendWatch | undefined;
  const report: RunReport = { spec, label: describeSpec(spec, options), startedAt, loadAverage1m };
  try {
    if (usesPostgres) backends = await BackendWatch.open(options.pgUrl);
    if (spec.target === "hopper") {
      target = await startHopperTarget({
        store:
          spec.store === "sqlite"
            ? { kind: "sqlite", durability: options.durability }
            : spec.store === "log"
              ? { kind: "log", durability: options.durability }
              : { kind: "postgres", url: options.pgUrl, nodes: spec.nodes },
        profileDir: options.profileDir,
        wireCounter,
        countFrames: options.countFrames && spec.consumer === "push",
        // The push targets use the WebSocket both ways: producers send over it too.
        publishOver: spec.consumer === "push" ? "websocket" : "http",
        client: spec.client ?? "sdk",
        log,
      });
    } else {
      log(`starting ${report.label}`);
      target = await startPeer(spec, options, connectUrl);
    }
    openTargets.add(target);
    report.versions = target.versions;
    report.semantics = target.semantics;
    report.confirmsAfterFsync = target.confirmsAfterFsync;
    // A peer with a subscription of its own (RabbitMQ, NATS, BullMQ) has no pull consumer to use.
    const consumer: ConsumerMode =
      spec.target === "hopper" ? spec.consumer : target.consumePush ? "push" : "pull";
    report.label = target.label + consumerSuffix(spec, options);
    const context: WorkloadContext = { target, backends, wireCounter, consumer };
    for (const workload of options.workloads) {
      if (workload === "w1") {
        log(`${report.label}: W1 throughput, ${options.messages} messages of ${options.bodyBytes} bytes`);
        report.throughput = await runThroughput(context, {
          queue: "bench-w1-throughput",
          messages: options.messages,
          bodyBytes: options.bodyBytes,
        });
        log(`W1: ${Math.round(report.throughput.endToEndPerSecond)} msg/s end to end`);
      } else if (workload === "w2") {
        const to = options.latencyConsumers > 1 ? ` to ${options.latencyConsumers} consumers` : "";
        log(
          `${report.label}: W2 latency, ${options.ratePerSecond} msg/s for ${options.latencySeconds} s${to}`,
        );
        report.latency = await runLatency(context, {
          queue: "bench-w2-latency",
          ratePerSecond: options.ratePerSecond,
          seconds: options.latencySeconds,
          bodyBytes: options.bodyBytes,
          consumers: options.latencyConsumers,
        });
        log(`W2: p99 ${report.latency.endToEndMs.p99.toFixed(1)} ms end to end`);
      } else if (workload === "fanout") {
        log(
          `${report.label}: fan-out, ${options.fanoutMessages} messages of ${options.bodyBytes} bytes to an exchange bound to 3 queues`,
        );
        report.fanout = await runFanout(context, {
          exchange: "bench-fanout",
          queuePrefix: "bench-fanout",
          messages: options.fanoutMessages,
          bodyBytes: options.bodyBytes,
        });
        log(
          `fan-out: ${Math.round(report.fanout.deliveriesPerSecond)} deliveries/s, ` +
            `${Math.round(report.fanout.publishPerSecond)} publishes/s`,
        );
      } else if (workload === "fifo") {
        log(
          `${report.label}: FIFO, ${options.fifoMessages} messages in ${options.fifoGroups} groups, ` +
            `${options.fifoConsumers} consumers, queues: ${options.fifoQueues.join(" then ")}`,
        );
        report.fifo = await runFifo(context, {
          queuePrefix: "bench-fifo",
          kinds: options.fifoQueues,
          messages: options.fifoMessages,
          groups: options.fifoGroups,
          consumers: options.fifoConsumers,
          bodyBytes: options.bodyBytes,
          log,
        });
        const ratio = report.fifo.fifoToStandard;
        if (ratio !== undefined) log(`FIFO: ${ratio.toFixed(2)} × the standard queue's rate`);
      } else {
        log(`${report.label}: W3 backlog, ${options.backlog} messages`);
        report.backlog = await runBacklog(context, {
          queue: "bench-w3-backlog",
          messages: options.backlog,
          bodyBytes: options.bodyBytes,
          log,
        });
        log(`W3: drained at ${Math.round(report.backlog.drainPerSecond)} msg/s`);
      }
    }
  } catch (error) {
    report.error = error instanceof Error ? error.message : String(error);
    log(`${report.label} FAILED: ${report.error}`);
  } finally {
    if (target) {
      log(`closing ${report.label}`);
      await target.close().catch((error: unknown) => log(`closing ${report.label} failed: ${String(error)}`));
      openTargets.delete(target);
    }
    await backends?.close();
  }
  return report;
}

/** Starts a target that is not Hopper. */
function startPeer(
  spec: Exclude<RunSpec, { target: "hopper" }>,
  options: BenchOptions,
  connectUrl: string,
): Promise<QueueTarget> {
  switch (spec.target) {
    case "skiplocked":
      return startSkipLockedTarget({ url: options.pgUrl, connectUrl });
    case "pgboss":
      return startPgBossTarget({ url: options.pgUrl, connectUrl });
    case "rabbitmq":
      return startRabbitMqTarget({ url: options.rabbitmqUrl, queueType: spec.queueType });
    case "nats":
      return startNatsTarget({ url: options.natsUrl });
    case "redis-streams":
      return startRedisStreamsTarget({ serverPath: options.redisServerPath });
    case "bullmq":
      return startBullMqTarget({ serverPath: options.redisServerPath });
  }
}

export function describeSpec(spec: RunSpec, options: Pick<BenchOptions, "durability" | "command">): string {
  if (spec.target === "skiplocked") return "plain SKIP LOCKED";
  if (spec.target === "pgboss") return "pg-boss 10.4.2";
  if (spec.target === "rabbitmq") return `RabbitMQ ${spec.queueType} queue`;
  if (spec.target === "nats") return "NATS JetStream";
  if (spec.target === "redis-streams") return "Redis Streams";
  if (spec.target === "bullmq") return "BullMQ";
  const suffix = consumerSuffix(spec, options);
  if (spec.store === "sqlite") return `Hopper SQLite (${options.durability})${suffix}`;
  if (spec.store === "log")
    return `Hopper log store${options.durability === "fsync" ? "" : " (os)"}${suffix}`;
  return `Hopper PostgreSQL, ${spec.nodes} node${spec.nodes === 1 ? "" : "s"}${suffix}`;
}

/** Names the consumer in a label when it is push, or when pull and push are being compared. */
function consumerSuffix(spec: RunSpec, options: Pick<BenchOptions, "command">): string {
  if (spec.target !== "hopper") return "";
  const compared = options.command === "compare-consumers" || options.command === "compare";
  const client = spec.client === "plain" ? ", plain client" : "";
  return spec.consumer === "push" || compared ? `, ${spec.consumer}${client}` : client;
}
