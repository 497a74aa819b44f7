/**
 * W3, backlog: first fill the queue with `messages` and no consumer (one producer, W1's window of
 * unconfirmed publishes), then drain it with `backlogConsumers` consumers at once, each with W1's
 * credit and receive size and its own batched acks. Fill and drain are timed apart. With several
 * Hopper nodes the producer is on node 0 and consumer c on node c modulo the node count.
 */
import { performance } from "node:perf_hooks";
import { startConsumer, stopConsumers } from "./consumers.js";
import { DeliveryLedger } from "./delivery-ledger.js";
import {
  backlogConsumers,
  backlogDeadlineMsBase,
  progressStallMs,
  throughputDeadlineMsPerMessage,
} from "./limits.js";
import { startMeasuring, type WorkloadContext, type WorkloadCosts } from "./measure.js";
import { withWatchdog } from "./progress.js";
import type { BenchConsumer } from "./target.js";
import { WindowedProducer } from "./throughput.js";

export interface BacklogResult {
  messages: number;
  bodyBytes: number;
  consumers: number;
  /** Messages confirmed per second while filling: first publish → last confirm. */
  enqueuePerSecond: number;
  enqueueMs: number;
  enqueueCosts: WorkloadCosts;
  /** Messages acked per second while draining: consumers start → last ack. */
  drainPerSecond: number;
  drainMs: number;
  drainCosts: WorkloadCosts;
  duplicates: number;
  redeliveries: number | undefined;
  ackErrors: number;
}

export async function runBacklog(
  context: WorkloadContext,
  params: { queue: string; messages: number; bodyBytes: number; log: (message: string) => void },
): Promise<BacklogResult> {
  const { target } = context;
  const { queue, messages, bodyBytes } = params;
  const deadlineMs = backlogDeadlineMsBase + messages * throughputDeadlineMsPerMessage;
  await target.createQueue(queue);

  const producer = new WindowedProducer(target.connect(queue, 0), messages, bodyBytes);
  const filling = await startMeasuring(context);
  const fillStartedAtMs = performance.now();
  await withWatchdog(
    {
      workload: "W3 backlog (enqueue)",
      deadlineMs,
      stallMs: progressStallMs,
      progress: () => producer.confirmed,
      describe: () => `${producer.issued} issued, ${producer.confirmed}/${messages} confirmed`,
    },
    producer.run(),
  );
  const enqueueMs = producer.lastConfirmAtMs - fillStartedAtMs;
  const enqueueCosts = await filling.finish();
  params.log(
    `W3: ${messages} enqueued in ${(enqueueMs / 1000).toFixed(1)} s; draining with ${backlogConsumers} consumers`,
  );

  const ledger = new DeliveryLedger(messages);
  const draining = await startMeasuring(context);
  const drainStartedAtMs = performance.now();
  // The drain's clock includes starting the consumers (for push, opening their sockets).
  const consumers = Array.from({ length: backlogConsumers }, (_unused, index) =>
    startConsumer(context, queue, index, (message) => ledger.record(message)),
  );
  const sum = (count: (consumer: BenchConsumer) => number) =>
    consumers.reduce((total, consumer) => total + count(consumer), 0);
  const drained = async (): Promise<void> => {
    while (ledger.distinct < messages) {
      await Promise.race(consumers.map((consumer) => consumer.activity.wait()));
    }
    await Promise.all(consumers.map((consumer) => consumer.settled()));
  };
  const describe = () => `${ledger.describe(`${messages} confirmed`, true)}, ${sum((c) => c.acked)} acked`;
  try {
    await withWatchdog(
      {
        workload: "W3 backlog (drain)",
        deadlineMs,
        stallMs: progressStallMs,
        progress: () => sum((consumer) => consumer.received + consumer.acked),
        describe,
      },
      Promise.race([drained(), ...consumers.map((consumer) => consumer.failed)]),
    );
  } finally {
    await stopConsumers(consumers);
  }
  for (const consumer of consumers) await consumer.stop();
  // A consumer that got nothing (others took the whole backlog first) has no last ack.
  const lastAcks = consumers.map((consumer) => consumer.lastAckAtMs).filter(Number.isFinite);
  const drainMs = Math.max(...lastAcks) - drainStartedAtMs;
  const drainCosts = await draining.finish();
  ledger.assertComplete("W3", describe);
  return {
    messages,
    bodyBytes,
    consumers: backlogConsumers,
    enqueuePerSecond: (messages * 1000) / enqueueMs,
    enqueueMs,
    enqueueCosts,
    drainPerSecond: (messages * 1000) / drainMs,
    drainMs,
    drainCosts,
    duplicates: ledger.duplicates,
    redeliveries: ledger.redeliveries,
    ackErrors: sum((consumer) => consumer.ackErrors),
  };
}
