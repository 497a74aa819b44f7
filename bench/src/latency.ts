/**
 * W2, latency at a fixed rate: messages are published on a schedule (open loop), each carrying the
 * time it was MEANT to be sent. Latency is measured from that intended time, so when the server or the
 * load generator stalls, the messages that should have gone out during the stall show the wait as
 * latency instead of silently not being sent (no coordinated omission). The consumers (one unless
 * told more: many idle workers on one queue) pull, or are pushed to (their sockets are up before the
 * schedule starts); a delivery's time is when its receive was answered, or when the pushed frame
 * reached the handler.
 */

import { performance } from "node:perf_hooks";
import { benchBody } from "./bench-message.js";
import { startConsumer, stopConsumers } from "./consumers.js";
import { latencyDrainMs, progressStallMs, scheduleLeadMs } from "./limits.js";
import { startMeasuring, type WorkloadContext, type WorkloadCosts } from "./measure.js";
import { Wakeup, withWatchdog } from "./progress.js";
import { type Percentiles, percentiles } from "./statistics.js";
import type { BenchConsumer, OnMessage } from "./target.js";

export interface LatencyResult {
  ratePerSecond: number;
  seconds: number;
  consumers: number;
  messages: number;
  /** Intended send time → the consumer's receive answered, in ms. */
  endToEndMs: Percentiles;
  /** The same for the messages meant to be sent after the schedule's first second: the steady state,
   * without the warm-up of processes that compile their per-message paths as those get hot. */
  endToEndAfterFirstSecondMs: Percentiles;
  /** Intended send time → the publish was confirmed (durable), in ms. */
  confirmMs: Percentiles;
  /** How late the load generator itself issued a publish, at worst, in ms (already part of the above). */
  scheduleLagMsMax: number;
  duplicates: number;
  /** How long it ran (schedule and drain). */
  elapsedMs: number;
  costs: WorkloadCosts;
}

export async function runLatency(
  context: WorkloadContext,
  params: { queue: string; ratePerSecond: number; seconds: number; bodyBytes: number; consumers: number },
): Promise<LatencyResult> {
  // Over 80 lines: one workload told in order, whose closures share its schedule and samples.
  const { target } = context;
  const { queue, ratePerSecond, seconds, bodyBytes } = params;
  await target.createQueue(queue);
  // As in W1: with several Hopper nodes the producer is on node 0 and the consumers on node 1.
  const producer = target.connect(queue, 0, "single");
  const messages = Math.round(ratePerSecond * seconds);
  const intervalMs = 1000 / ratePerSecond;
  const endToEndSamples: number[] = [];
  const afterFirstSecondSamples: number[] = [];
  const confirmSamples: number[] = [];
  const delivered = new Uint8Array(messages);
  let duplicates = 0;

  const onMessage: OnMessage = (message, receivedAtMs) => {
    const { seq, intendedAtMs } = message.body;
    if (!(seq >= 0 && seq < messages)) throw new Error(`received sequence number ${seq} out of range`);
    if (delivered[seq] === 1) {
      duplicates++;
      return;
    }
    delivered[seq] = 1;
    endToEndSamples.push(receivedAtMs - intendedAtMs);
    if (seq >= ratePerSecond) afterFirstSecondSamples.push(receivedAtMs - intendedAtMs);
  };
  const consumers = Array.from({ length: params.consumers }, () =>
    startConsumer(context, queue, 1, onMessage),
  );
  const sum = (count: (consumer: BenchConsumer) => number) =>
    consumers.reduce((total, consumer) => total + count(consumer), 0);
  let scheduleTimer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.all(consumers.map((consumer) => consumer.ready()));
    const measuring = await startMeasuring(context);
    const startedAtMs = performance.now();
    const scheduleStartMs = startedAtMs + scheduleLeadMs;
    let issued = 0;
    let confirmed = 0;
    let scheduleLagMsMax = 0;
    let publishFailure: unknown;
    const confirmArrived = new Wakeup();

    // Each tick issues every publish whose intended time has come, then sleeps until the next one.
    // A late tick sends the overdue ones together, still stamped with their own intended times.
    const publishDue = (): void => {
      const now = performance.now();
      while (issued < messages && scheduleStartMs + issued * intervalMs <= now) {
        const seq = issued++;
        const intendedAtMs = scheduleStartMs + seq * intervalMs;
        scheduleLagMsMax = Math.max(scheduleLagMsMax, now - intendedAtMs);
        producer.publish(benchBody(seq, intendedAtMs, bodyBytes)).then(
          () => {
            confirmSamples.push(performance.now() - intendedAtMs);
            confirmed++;
            confirmArrived.notify();
          },
          (error: unknown) => {
            publishFailure ??= error;
            confirmArrived.notify();
          },
        );
      }
      if (issued < messages) {
        scheduleTimer = setTimeout(
          publishDue,
          Math.max(0, scheduleStartMs + issued * intervalMs - performance.now()),
        );
      }
    };
    scheduleTimer = setTimeout(publishDue, scheduleLeadMs);

    const produce = async (): Promise<void> => {
      while (confirmed < messages) {
        if (publishFailure !== undefined) throw publishFailure;
        await confirmArrived.wait();
      }
    };
    const consume = async (): Promise<void> => {
      while (endToEndSamples.length < messages) {
        await Promise.race(consumers.map((consumer) => consumer.activity.wait()));
      }
      await Promise.all(consumers.map((consumer) => consumer.settled()));
    };
    await withWatchdog(
      {
        workload: "W2 latency",
        deadlineMs: seconds * 1000 + latencyDrainMs,
        stallMs: progressStallMs,
        progress: () => issued + confirmed + sum((consumer) => consumer.received),
        describe: () =>
          `${issued}/${messages} issued, ${confirmed} confirmed, ${endToEndSamples.length} delivered, ` +
          `${sum((consumer) => consumer.acked)} acked`,
      },
      Promise.race([Promise.all([produce(), consume()]), ...consumers.map((consumer) => consumer.failed)]),
    );
    for (const consumer of consumers) await consumer.stop();
    const elapsedMs = performance.now() - startedAtMs;
    return {
      ratePerSecond,
      seconds,
      consumers: params.consumers,
      messages,
      endToEndMs: percentiles(endToEndSamples),
      endToEndAfterFirstSecondMs: percentiles(afterFirstSecondSamples),
      confirmMs: percentiles(confirmSamples),
      scheduleLagMsMax,
      duplicates,
      elapsedMs,
      costs: await measuring.finish(),
    };
  } finally {
    // A failed run must not go on publishing into the next one.
    clearTimeout(scheduleTimer);
    await stopConsumers(consumers);
  }
}
