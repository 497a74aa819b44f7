/**
 * W1, throughput: one producer keeps up to `producerUnconfirmedMax` publishes unconfirmed while one
 * consumer, running at the same time, holds up to `consumerUnackedMax` unacked messages. Every
 * message carries its sequence number, so the run ends with an exactly-once check.
 */

import { performance } from "node:perf_hooks";
import type { HopperClient } from "@hopper/client";
import { benchBody, readBenchBody } from "./bench-message.js";
import { CreditConsumer } from "./credit-consumer.js";
import {
  consumerUnackedMax,
  producerUnconfirmedMax,
  progressStallMs,
  throughputDeadlineMsBase,
  throughputDeadlineMsPerMessage,
} from "./limits.js";
import { Wakeup, withWatchdog } from "./progress.js";
import {
  type CpuShares,
  countsSince,
  measureCpu,
  type RequestCounter,
  type RequestKind,
} from "./statistics.js";

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
  /** Deliveries whose deliveryCount was above 1 (a lease ended before the ack). */
  redeliveries: number;
  ackErrors: number;
  /** HTTP requests of each kind made during the workload. */
  requests: Record<RequestKind, number>;
  cpu: CpuShares;
}

export async function runThroughput(params: {
  client: HopperClient;
  serverUrl: string;
  requestCounter: RequestCounter;
  queue: string;
  messages: number;
  bodyBytes: number;
}): Promise<ThroughputResult> {
  const { client, queue, messages, bodyBytes } = params;
  await client.putQueue(queue);
  // One count per sequence number: 0 = not delivered yet, 2 or more = delivered again.
  const deliveries = new Uint16Array(messages);
  let distinctDelivered = 0;
  let duplicates = 0;
  let redeliveries = 0;

  const consumer = new CreditConsumer({
    client,
    queue,
    creditMax: consumerUnackedMax,
    onMessage: (message) => {
      const { seq } = readBenchBody(message.body);
      if (!(seq >= 0 && seq < messages)) throw new Error(`received sequence number ${seq} out of range`);
      if (message.deliveryCount > 1) redeliveries++;
      const count = deliveries[seq] as number;
      if (count > 0) duplicates++;
      else distinctDelivered++;
      deliveries[seq] = Math.min(count + 1, 0xffff);
    },
  });

  let issued = 0;
  let confirmed = 0;
  let lastConfirmAtMs = Number.NaN;
  let publishFailure: unknown;
  const confirmArrived = new Wakeup();
  const requestsBefore = params.requestCounter.snapshot();
  const cpu = await measureCpu(params.serverUrl);
  const startedAtMs = performance.now();

  // Issues publishes while fewer than the window are unconfirmed. Those issued in one turn of the
  // event loop share one request of up to 100 (the client's coalescing).
  const produce = async (): Promise<void> => {
    while (confirmed < messages) {
      if (publishFailure !== undefined) throw publishFailure;
      while (issued < messages && issued - confirmed < producerUnconfirmedMax) {
        const seq = issued++;
        client.publish(queue, { body: benchBody(seq, performance.now(), bodyBytes) }).then(
          () => {
            confirmed++;
            lastConfirmAtMs = performance.now();
            confirmArrived.notify();
          },
          (error: unknown) => {
            publishFailure ??= error;
            confirmArrived.notify();
          },
        );
      }
      await confirmArrived.wait();
    }
  };
  // Every message acked (or refused) means nothing is left leased; the consumer may stop.
  const consume = async (): Promise<void> => {
    while (distinctDelivered < messages || consumer.acked + consumer.ackErrors < consumer.received) {
      await consumer.activity.wait();
    }
  };

  // Once every publish is confirmed, a message still not delivered is missing, and the message says so.
  const describe = () => {
    const undelivered = messages - distinctDelivered;
    const state = confirmed === messages ? "MISSING (confirmed, never delivered)" : "not delivered yet";
    return (
      `${confirmed}/${messages} confirmed, ${distinctDelivered} delivered, ${undelivered} ${state}, ` +
      `${duplicates} duplicates, ${consumer.acked} acked`
    );
  };
  await withWatchdog(
    {
      workload: "W1 throughput",
      deadlineMs: throughputDeadlineMsBase + messages * throughputDeadlineMsPerMessage,
      stallMs: progressStallMs,
      progress: () => confirmed + consumer.received + consumer.acked,
      describe,
    },
    Promise.race([Promise.all([produce(), consume()]), consumer.failed]),
  );
  await consumer.stop();
  const cpuShares = await cpu.finish();

  let missing = 0;
  for (const count of deliveries) if (count === 0) missing++;
  if (missing > 0) throw new Error(`W1: ${missing} confirmed messages were never delivered: ${describe()}`);
  const endToEndMs = consumer.lastAckAtMs - startedAtMs;
  const confirmMs = lastConfirmAtMs - startedAtMs;
  return {
    messages,
    bodyBytes,
    endToEndPerSecond: (messages * 1000) / endToEndMs,
    confirmPerSecond: (messages * 1000) / confirmMs,
    endToEndMs,
    confirmMs,
    duplicates,
    missing,
    redeliveries,
    ackErrors: consumer.ackErrors,
    requests: countsSince(requestsBefore, params.requestCounter.snapshot()),
    cpu: cpuShares,
  };
}
