/**
 * FIFO, issue 4: the same load through a standard queue and through a FIFO queue, one after the other
 * in one run, so that their ratio comes from the same conditions. One producer sends `messages` bodies
 * with keys g0, g1, … round-robin over `groups` (W1's window: ≤ 1,000 unconfirmed, ≤ 100 per send
 * request); `consumers` consumers, each exactly like W1's (≤ 100 per receive, ≤ 256 unacked, acks
 * batched), run at the same time and ack what they get. Each phase checks exactly-once delivery (the
 * ledger) and each group's order (group-order.ts). Hopper only: the peers have no FIFO queues. With
 * several Hopper nodes the producer is on node 0 and consumer c on node c modulo the node count, as in
 * W3.
 *
 * The producer makes its send requests itself, rather than through the client's coalescing `publish`,
 * so that it knows which messages travelled together: the order check needs that. The requests are
 * the ones `publish` would make: the publishes that fit the window at one wake-up, at most 100 each.
 */
import { performance } from "node:perf_hooks";
import { benchBody } from "./bench-message.js";
import { startConsumer, stopConsumers } from "./consumers.js";
import { DeliveryLedger } from "./delivery-ledger.js";
import { GroupOrderCheck, type GroupOrderResult, groupKey } from "./group-order.js";
import {
  batchItemsMax,
  producerUnconfirmedMax,
  progressStallMs,
  throughputDeadlineMsBase,
  throughputDeadlineMsPerMessage,
} from "./limits.js";
import { startMeasuring, type WorkloadContext, type WorkloadCosts } from "./measure.js";
import { Wakeup, withWatchdog } from "./progress.js";
import type { BenchConsumer, KeyedMessage, KeyedSender } from "./target.js";

export type QueueKind = "standard" | "fifo";

/** One queue's pass through the workload. */
export interface KeyedQueuePhase {
  kind: QueueKind;
  /** Messages acked per second, from the first send to the last ack. */
  endToEndPerSecond: number;
  /** Messages confirmed per second, from the first send to the last confirm. */
  confirmPerSecond: number;
  endToEndMs: number;
  confirmMs: number;
  duplicates: number;
  missing: number;
  redeliveries: number | undefined;
  ackErrors: number;
  order: GroupOrderResult;
  /** When the phase began: the machine's load drifts between phases. */
  startedAt: string;
  costs: WorkloadCosts;
}

export interface FifoResult {
  messages: number;
  groups: number;
  consumers: number;
  bodyBytes: number;
  /** In the order they ran. */
  phases: KeyedQueuePhase[];
  /** FIFO end to end ÷ standard end to end, when both ran. */
  fifoToStandard: number | undefined;
}

export async function runFifo(
  context: WorkloadContext,
  params: {
    queuePrefix: string;
    kinds: readonly QueueKind[];
    messages: number;
    groups: number;
    consumers: number;
    bodyBytes: number;
    log: (message: string) => void;
  },
): Promise<FifoResult> {
  const phases: KeyedQueuePhase[] = [];
  for (const kind of params.kinds) {
    const phase = await runPhase(context, { ...params, kind, queue: `${params.queuePrefix}-${kind}` });
    params.log(
      `${kind}: ${Math.round(phase.endToEndPerSecond)} msg/s end to end, ` +
        `${phase.order.violations} order violations`,
    );
    phases.push(phase);
  }
  const rate = (kind: QueueKind) => phases.find((phase) => phase.kind === kind)?.endToEndPerSecond;
  const fifo = rate("fifo");
  const standard = rate("standard");
  return {
    messages: params.messages,
    groups: params.groups,
    consumers: params.consumers,
    bodyBytes: params.bodyBytes,
    phases,
    fifoToStandard: fifo !== undefined && standard !== undefined ? fifo / standard : undefined,
  };
}

async function runPhase(
  context: WorkloadContext,
  params: {
    queue: string;
    kind: QueueKind;
    messages: number;
    groups: number;
    consumers: number;
    bodyBytes: number;
  },
): Promise<KeyedQueuePhase> {
  const { target } = context;
  const { queue, kind, messages, groups } = params;
  if (!target.createKeyedQueue)
    throw new Error(`${target.label} has no FIFO queues; the workload is Hopper's`);
  const startedAt = new Date().toISOString();
  const sender = await target.createKeyedQueue(queue, kind);
  const ledger = new DeliveryLedger(messages);
  const order = new GroupOrderCheck(messages, groups);
  const consumers: BenchConsumer[] = [];
  try {
    for (let index = 0; index < params.consumers; index++) {
      consumers.push(
        startConsumer(context, queue, index, (message) => {
          ledger.record(message);
          order.recordDelivery(message.body.seq, message.key);
        }),
      );
    }
    await Promise.all(consumers.map((consumer) => consumer.ready()));
    const producer = new RequestWindowProducer(sender, order, params);
    const measuring = await startMeasuring(context);
    const startedAtMs = performance.now();

    const sum = (count: (consumer: BenchConsumer) => number) =>
      consumers.reduce((total, consumer) => total + count(consumer), 0);
    const consume = async (): Promise<void> => {
      while (ledger.distinct < messages) {
        await Promise.race(consumers.map((consumer) => consumer.activity.wait()));
      }
      await Promise.all(consumers.map((consumer) => consumer.settled()));
    };
    const describe = () =>
      ledger.describe(`${producer.confirmed}/${messages} confirmed`, producer.confirmed === messages) +
      `, ${sum((consumer) => consumer.acked)} acked`;
    await withWatchdog(
      {
        workload: `FIFO workload (${kind} queue)`,
        deadlineMs: throughputDeadlineMsBase + messages * throughputDeadlineMsPerMessage,
        stallMs: progressStallMs,
        progress: () => producer.confirmed + sum((consumer) => consumer.received + consumer.acked),
        describe,
      },
      Promise.race([Promise.all([producer.run(), consume()]), ...consumers.map((c) => c.failed)]),
    );
    for (const consumer of consumers) await consumer.stop();
    const costs = await measuring.finish();
    ledger.assertComplete(`FIFO workload (${kind} queue)`, describe);
    // A consumer that never got a message has no last ack (NaN); in a FIFO queue with few groups some
    // consumers may go without.
    const lastAckAtMs = Math.max(
      ...consumers.map((consumer) => consumer.lastAckAtMs).filter((atMs) => Number.isFinite(atMs)),
    );
    const endToEndMs = lastAckAtMs - startedAtMs;
    const confirmMs = producer.lastConfirmAtMs - startedAtMs;
    return {
      kind,
      endToEndPerSecond: (messages * 1000) / endToEndMs,
      confirmPerSecond: (messages * 1000) / confirmMs,
      endToEndMs,
      confirmMs,
      duplicates: ledger.duplicates,
      missing: ledger.missing(),
      redeliveries: ledger.redeliveries,
      ackErrors: sum((consumer) => consumer.ackErrors),
      order: order.result(),
      startedAt,
      costs,
    };
  } finally {
    await stopConsumers(consumers);
  }
}

/**
 * Sends `messages` keyed bodies with at most `producerUnconfirmedMax` unconfirmed, in requests of at
 * most `batchItemsMax`, and tells the order check when each request leaves and is confirmed.
 */
class RequestWindowProducer {
  issued = 0;
  confirmed = 0;
  lastConfirmAtMs = Number.NaN;
  private failure: unknown;
  private readonly confirmArrived = new Wakeup();

  constructor(
    private readonly sender: KeyedSender,
    private readonly order: GroupOrderCheck,
    private readonly params: { messages: number; groups: number; bodyBytes: number },
  ) {}

  async run(): Promise<void> {
    const { messages, groups, bodyBytes } = this.params;
    while (this.confirmed < messages) {
      if (this.failure !== undefined) throw this.failure;
      for (;;) {
        const room = producerUnconfirmedMax - (this.issued - this.confirmed);
        const count = Math.min(batchItemsMax, room, messages - this.issued);
        if (count <= 0) break;
        const firstSeq = this.issued;
        this.issued += count;
        const nowMs = performance.now();
        const batch: KeyedMessage[] = [];
        for (let seq = firstSeq; seq < firstSeq + count; seq++) {
          batch.push({ body: benchBody(seq, nowMs, bodyBytes), key: groupKey(seq, groups) });
        }
        const request = this.order.requestIssued(firstSeq, count, performance.now());
        this.sender.send(batch).then(
          () => {
            this.confirmed += count;
            this.lastConfirmAtMs = performance.now();
            this.order.requestConfirmed(request, this.lastConfirmAtMs);
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
