/**
 * Fan-out: one producer publishes through a fanout exchange bound to `fanoutQueues` queues, so each
 * publish is stored once per queue; one consumer per queue (pull or push, as the run says) receives
 * and acks at the same time. The producer keeps W1's window of unconfirmed publishes, and publishes of
 * one event-loop turn share one `publishTo` request of up to 100. Each queue gets the exactly-once
 * check of W1. Hopper only: the peers have no exchanges.
 */
import { performance } from "node:perf_hooks";
import { startConsumer, stopConsumers } from "./consumers.js";
import { DeliveryLedger } from "./delivery-ledger.js";
import {
  fanoutQueues,
  progressStallMs,
  throughputDeadlineMsBase,
  throughputDeadlineMsPerMessage,
} from "./limits.js";
import { startMeasuring, type WorkloadContext, type WorkloadCosts } from "./measure.js";
import { withWatchdog } from "./progress.js";
import type { BenchConsumer } from "./target.js";
import { WindowedProducer } from "./throughput.js";

export interface FanoutQueueResult {
  queue: string;
  duplicates: number;
  /** Confirmed messages this queue never delivered. */
  missing: number;
  redeliveries: number | undefined;
  ackErrors: number;
}

export interface FanoutResult {
  /** Messages published to the exchange; each queue receives every one. */
  messages: number;
  queues: number;
  bodyBytes: number;
  /** Publishes confirmed per second: first publish → last confirm (durable in every queue). */
  publishPerSecond: number;
  publishMs: number;
  /** Deliveries acked per second over all queues: queues × messages ÷ (first publish → last ack). */
  deliveriesPerSecond: number;
  endToEndMs: number;
  perQueue: FanoutQueueResult[];
  costs: WorkloadCosts;
}

export async function runFanout(
  context: WorkloadContext,
  params: { exchange: string; queuePrefix: string; messages: number; bodyBytes: number },
): Promise<FanoutResult> {
  // Over 80 lines: one workload told in order, whose consumers share its ledgers.
  const { target } = context;
  const { exchange, messages, bodyBytes } = params;
  if (!target.createFanout) throw new Error(`${target.label} has no exchanges; the fan-out is Hopper's`);
  const queues = Array.from({ length: fanoutQueues }, (_unused, index) => `${params.queuePrefix}-${index}`);
  const publisher = await target.createFanout(exchange, queues);
  const ledgers = queues.map(() => new DeliveryLedger(messages));
  const consumers: BenchConsumer[] = [];
  try {
    // As in W1 the producer uses connection 0 and the consumers the next ones (other nodes, if any).
    queues.forEach((queue, index) => {
      const ledger = ledgers[index] as DeliveryLedger;
      consumers.push(startConsumer(context, queue, index + 1, (message) => ledger.record(message)));
    });
    await Promise.all(consumers.map((consumer) => consumer.ready()));
    const producer = new WindowedProducer(publisher, messages, bodyBytes);
    const measuring = await startMeasuring(context);
    const startedAtMs = performance.now();

    const consume = async (consumer: BenchConsumer, ledger: DeliveryLedger): Promise<void> => {
      while (ledger.distinct < messages) await consumer.activity.wait();
      await consumer.settled();
    };
    const sum = (count: (consumer: BenchConsumer) => number) =>
      consumers.reduce((total, consumer) => total + count(consumer), 0);
    const describe = () =>
      `${producer.confirmed}/${messages} publishes confirmed; ` +
      queues
        .map(
          (queue, index) =>
            `${queue}: ${(ledgers[index] as DeliveryLedger).describe("", producer.confirmed === messages)}`,
        )
        .join("; ");
    await withWatchdog(
      {
        workload: "fan-out",
        deadlineMs: throughputDeadlineMsBase + messages * queues.length * throughputDeadlineMsPerMessage,
        stallMs: progressStallMs,
        progress: () => producer.confirmed + sum((consumer) => consumer.received + consumer.acked),
        describe,
      },
      Promise.race([
        Promise.all([
          producer.run(),
          ...consumers.map((consumer, index) => consume(consumer, ledgers[index] as DeliveryLedger)),
        ]),
        ...consumers.map((consumer) => consumer.failed),
      ]),
    );
    for (const consumer of consumers) await consumer.stop();
    const costs = await measuring.finish();
    ledgers.forEach((ledger, index) => {
      ledger.assertComplete(`fan-out queue ${queues[index]}`, describe);
    });
    const lastAckAtMs = Math.max(...consumers.map((consumer) => consumer.lastAckAtMs));
    const endToEndMs = lastAckAtMs - startedAtMs;
    const publishMs = producer.lastConfirmAtMs - startedAtMs;
    return {
      messages,
      queues: queues.length,
      bodyBytes,
      publishPerSecond: (messages * 1000) / publishMs,
      publishMs,
      deliveriesPerSecond: (messages * queues.length * 1000) / endToEndMs,
      endToEndMs,
      perQueue: queues.map((queue, index) => {
        const ledger = ledgers[index] as DeliveryLedger;
        return {
          queue,
          duplicates: ledger.duplicates,
          missing: ledger.missing(),
          redeliveries: ledger.redeliveries,
          ackErrors: (consumers[index] as BenchConsumer).ackErrors,
        };
      }),
      costs,
    };
  } finally {
    await stopConsumers(consumers);
  }
}
