/**
 * The workload shape the standalone peer scripts share, written apart from the bench's harness
 * (bench/src) so that each peer's figures can be checked against a driver that shares nothing with it.
 * W1: 50,000 bodies of 1 KiB, one producer with at most 1,000 unconfirmed publishes, one consumer
 * acking each message; msg/s from the first publish to the last ack the broker has processed.
 * W2: 1,000 msg/s for 10 s on a schedule (open loop), latency from each message's intended send time
 * to its arrival at the consumer.
 */
import { performance } from "node:perf_hooks";

export const messages = 50_000;
export const bodyBytes = 1024;
export const unconfirmedMax = 1000;
export const prefetch = 256;
export const ratePerSecond = 1000;
export const seconds = 10;

/** What a script gives the drivers: its client library doing one thing each. */
export interface Peer {
  /** Empties (or makes anew) the queue a workload runs on. */
  fresh(): Promise<void>;
  /** Resolves once the broker confirmed the publish. */
  publish(body: Buffer): Promise<void>;
  /** Subscribes with the prefetch; `onBody` is called for each message, which the script acks. */
  consume(onBody: (body: Buffer) => void): Promise<void>;
  /** Resolves once the broker has processed every ack sent so far. */
  acksDone(): Promise<void>;
  stopConsuming(): Promise<void>;
}

/** A JSON body of exactly `bodyBytes` bytes holding its sequence number and intended send time. */
function body(seq: number, intendedAtMs: number): Buffer {
  const head = JSON.stringify({ seq, t: intendedAtMs, pad: "" });
  return Buffer.from(`${head.slice(0, -2)}${"x".repeat(bodyBytes - head.length)}"}`);
}

export async function w1(peer: Peer): Promise<number> {
  await peer.fresh();
  let received = 0;
  let done!: () => void;
  const allReceived = new Promise<void>((resolve) => (done = resolve));
  await peer.consume(() => {
    if (++received === messages) done();
  });
  const startedAt = performance.now();
  let issued = 0;
  let confirmed = 0;
  const refill = (): void => {
    while (issued < messages && issued - confirmed < unconfirmedMax) {
      peer.publish(body(issued++, 0)).then(() => {
        confirmed++;
        refill();
      }, fail);
    }
  };
  refill();
  await allReceived;
  await peer.acksDone();
  const elapsedMs = performance.now() - startedAt;
  await peer.stopConsuming();
  return (messages * 1000) / elapsedMs;
}

export async function w2(peer: Peer): Promise<{ p50: number; p99: number; p99AfterFirstSecond: number }> {
  await peer.fresh();
  const total = ratePerSecond * seconds;
  const latencies: number[] = [];
  const afterFirstSecond: number[] = [];
  let done!: () => void;
  const allReceived = new Promise<void>((resolve) => (done = resolve));
  await peer.consume((received) => {
    const { seq, t } = JSON.parse(received.toString()) as { seq: number; t: number };
    const latency = performance.now() - t;
    latencies.push(latency);
    if (seq >= ratePerSecond) afterFirstSecond.push(latency);
    if (latencies.length === total) done();
  });
  const startAt = performance.now() + 20;
  let issued = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    for (; issued < total && startAt + (issued * 1000) / ratePerSecond <= now; issued++) {
      peer.publish(body(issued, startAt + (issued * 1000) / ratePerSecond)).catch(fail);
    }
    if (issued === total) clearInterval(timer);
  }, 1);
  await allReceived;
  await peer.stopConsuming();
  return {
    p50: rank(latencies, 0.5),
    p99: rank(latencies, 0.99),
    p99AfterFirstSecond: rank(afterFirstSecond, 0.99),
  };
}

/** A refused publish ends the script: its figures would mean nothing. */
export function fail(error: unknown): never {
  console.error(error);
  process.exit(1);
}

function rank(samples: number[], fraction: number): number {
  const sorted = Float64Array.from(samples).sort();
  return sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

/** This process's CPU since `since`, in µs per message of a workload of `count`. */
function cpuPerMessage(since: NodeJS.CpuUsage, count: number): string {
  const { user, system } = process.cpuUsage(since);
  return `client CPU ${Math.round((user + system) / count)} µs per message`;
}

/** Runs W1 then W2 and prints one line each, as `bench standalone` reads them. */
export async function runBoth(name: string, peer: Peer): Promise<void> {
  let cpu = process.cpuUsage();
  const perSecond = await w1(peer);
  console.log(`${name} W1 ${Math.round(perSecond)} msg/s, ${cpuPerMessage(cpu, messages)}`);
  cpu = process.cpuUsage();
  const latency = await w2(peer);
  console.log(
    `${name} W2 p50 ${latency.p50.toFixed(2)} ms p99 ${latency.p99.toFixed(2)} ms ` +
      `p99 after the first second ${latency.p99AfterFirstSecond.toFixed(2)} ms, ` +
      cpuPerMessage(cpu, ratePerSecond * seconds),
  );
}
