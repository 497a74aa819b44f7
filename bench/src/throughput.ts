/**
 * W1, throughput: one producer keeps up to `producerUnconfirmedMax` publishes unconfirmed while one
 * consumer, running at the same time, holds up to `consumerUnackedMax` unacked messages (pulling, or
 * pushed to with that prefetch; a push consumer's socket is up before the clock starts). Every
 * message carries its sequence number, so the run ends with an exactly-once check. With several
 * Hopper nodes the producer talks to node 0 and the consumer to node 1.
 */

import { performance } from "node:perf_hooks";
import { benchBody } from "./bench-message.js";
import { startConsumer, stopConsumers } from "./consumers.js";
import { DeliveryLedger } from "./delivery-ledger.js";
import {
  producerUnconfirmedMax,
  progressStallMs,
  throughputDeadlineMsBase,
  throughputDeadlineMsPerMessage,
} from "./limits.js";
import { startMeasuring, type WorkloadContext, type WorkloadCosts } from "./measure.js";
import { Wakeup, withWatchdog } from "./progress.js";
import type { QueueConnection } from "./target.js";

export interface ThroughputResult {
  messages: number;
  bodyBytes: number;
  /** Messages acked per second, from the first publish to the last ack. */
  endToEndPerSecond: number;
  /** Messages confirmed per second, from the first publish to the last confirm. */
  confirmPerSecond: number;
  endToEndMs: number;
  confirmMs: number;
  /** Deliveries of a sequence number already delivered. */
  duplicates: number;
  /** Confirmed sequence numbers that were never delivered. */
  missing: number;
  /** Deliveries whose deliveryCount was above 1 (a lease ended before the ack); undefined if unknown. */
  redeliveries: number | undefined;
  ackErrors: number;
  costs: WorkloadCosts;
}

/** Publishes `messages` with at most `producerUnconfirmedMax` unconfirmed; the state is for watchdogs. */
export class WindowedProducer {
  issued = 0;
  confirmed = 0;
  lastConfirmAtMs = Number.NaN;
  private failure: unknown;
  private readonly confirmArrived = new Wakeup();

  constructor(
    private readonly connection: Pick<QueueConnection, "publish">,
    private readonly messages: number,
    private readonly bodyBytes: number,
  ) {}

  /** Issues publishes while fewer than the window are unconfirmed; resolves once all are confirmed.
   * Publishes issued in one turn of the event loop may share one request (the client's batching). */
  async run(): Promise<void> {
    while (this.confirmed < this.messages) {
      if (this.failure !== undefined) throw this.failure;
      while (this.issued < this.messages && this.issued - this.confirmed < producerUnconfirmedMax) {
        const seq = this.issued++;
        this.connection.publish(benchBody(seq, performance.now(), this.bodyBytes)).then(
          () => {
            this.confirmed++;
            this.lastConfirmAtMs = performance.now();
            this.confirmArrived.notify();
          },
          (error: unknown) => {
            this.failure ??= error;
            this.confirmArrived.notify();
          },
        );
      }
      await this.confirmArrived.wait();
    }
  }
}

export async function runThroughput(
  context: WorkloadContext,
  params: { queue: string; messages: number; bodyBytes: number },
): Promise<ThroughputResult> {
  const { target } = context;
  const { queue, messages, bodyBytes } = params;
  await target.createQueue(queue);
  const ledger = new DeliveryLedger(messages);
  const consumer = startConsumer(context, queue, 1, (message) => ledger.record(message));
  try {
    await consumer.ready();
    const producer = new WindowedProducer(target.connect(queue, 0), messages, bodyBytes);
    const measuring = await startMeasuring(context);
    const startedAtMs = performance.now();

    // Every message delivered, then every delivery acked (or refused): nothing is left leased.
    const consume = async (): Promise<void> => {
      while (ledger.distinct < messages) await consumer.activity.wait();
      await consumer.settled();
    };
    const describe = () =>
      ledger.describe(`${producer.confirmed}/${messages} confirmed`, producer.confirmed === messages) +
      `, ${consumer.acked} acked${context.consumer === "push" ? " (a push consumer learns its acks at the end)" : ""}`;
    await withWatchdog(
      {
        workload: "W1 throughput",
        deadlineMs: throughputDeadlineMsBase + messages * throughputDeadlineMsPerMessage,
        stallMs: progressStallMs,
        progress: () => producer.confirmed + consumer.received + consumer.acked,
        describe,
      },
      Promise.race([Promise.all([producer.run(), consume()]), consumer.failed]),
    );
    await consumer.stop();
    const costs = await measuring.finish();
    ledger.assertComplete("W1", describe);
    const endToEndMs = consumer.lastAckAtMs - startedAtMs;
    const confirmMs = producer.lastConfirmAtMs - startedAtMs;
    return {
      messages,
      bodyBytes,
      endToEndPerSecond: (messages * 1000) / endToEndMs,
      confirmPerSecond: (messages * 1000) / confirmMs,
      endToEndMs,
      confirmMs,
      duplicates: ledger.duplicates,
      missing: ledger.missing(),
      redeliveries: ledger.redeliveries,
      ackErrors: consumer.ackErrors,
      costs,
    };
  } finally {
    await stopConsumers([consumer]);
  }
}
