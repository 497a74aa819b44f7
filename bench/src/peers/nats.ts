/**
 * NATS JetStream as a benchmark target, through the `nats` client: per workload a stream with file
 * storage and work-queue retention (`hopper-bench-…`, one subject of the same name; deleted and made
 * anew, deleted at the end), and one durable pull consumer with explicit acks. A publish resolves on the
 * stream's PubAck; JetStream answers once the message is in its file store, before the file is fsynced
 * (the server syncs on its sync interval, every 2 minutes by default), so a confirm is not durable
 * against a machine crash. Consumers use `consume()`, which pulls in batches of up to the credit, and
 * ack each message with `ack()`, as the client's JetStream README does for a durable consumer
 * (`ackAck()`, which waits for the server's reply to each ack, is the "double ack" NATS documents for
 * exactly-once processing, and halved W1 here). The last ack is timed once the server has read every
 * ack (a flush) and the consumer's info counts none pending. The server's max_ack_pending bounds the
 * unacked messages: the credit times the workload's consumers, since it counts for the durable
 * consumer as a whole.
 */
import {
  AckPolicy,
  type ConsumerMessages,
  connect,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
} from "nats";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { pidsNamed } from "../cpu.js";
import { consumerUnackedMax, natsRequestTimeoutMs, peerLeaseSeconds } from "../limits.js";
import { packageVersion } from "../package-version.js";
import type { Delivery, OnMessage, QueueConnection, QueueTarget } from "../target.js";
import { notPulled, SubscriptionConsumer } from "./subscription-consumer.js";

/** Streams (and their one subject) are named for the workload's queue with this prefix. */
const streamPrefix = "hopper-";
/** The one durable consumer of each stream. */
const durableName = "bench";

export async function startNatsTarget(params: { url: string }): Promise<QueueTarget> {
  const connection = await connect({ servers: params.url, name: "hopper-bench" });
  let jsm: JetStreamManager;
  try {
    jsm = await connection.jetstreamManager({ timeout: natsRequestTimeoutMs });
  } catch (error) {
    await connection.close();
    throw error;
  }
  const js = connection.jetstream({ timeout: natsRequestTimeoutMs });
  const streams = new Set<string>();
  /** Consumers started per stream, and the chain of max_ack_pending updates that follows their count. */
  const consumerCounts = new Map<string, number>();
  let limitUpdates: Promise<unknown> = Promise.resolve();
  const consumers = new Set<SubscriptionConsumer>();
  let closing: Promise<void> | undefined;
  return {
    label: "NATS JetStream",
    kind: "nats",
    versions: `nats-server ${connection.info?.version ?? "unknown"} · nats.js ${packageVersion("nats")}`,
    semantics:
      "confirm = PubAck from a file-storage stream (written, not yet fsynced); " +
      "ack = explicit ack() per message, not confirmed: timed by a flush and the consumer's info after it",
    confirmsAfterFsync: false,
    brokerPids: pidsNamed("nats-server"),
    postgresAppName: undefined,
    async createQueue(queue) {
      const name = streamPrefix + queue;
      await jsm.streams.delete(name).catch(() => false);
      await jsm.streams.add({
        name,
        subjects: [name],
        storage: StorageType.File,
        retention: RetentionPolicy.Workqueue,
        num_replicas: 1,
      });
      streams.add(name);
      await jsm.consumers.add(name, {
        durable_name: durableName,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(peerLeaseSeconds * 1000),
        max_ack_pending: consumerUnackedMax,
      });
      consumerCounts.set(name, 0);
    },
    connect: (queue) => new NatsPublisher(js, streamPrefix + queue),
    consumePush(queue, _index, credit, onMessage) {
      const stream = streamPrefix + queue;
      const count = (consumerCounts.get(stream) ?? 0) + 1;
      consumerCounts.set(stream, count);
      // The server's limit is per durable consumer, shared by its clients: each client adds its credit.
      // Updates run one after the other, each with the count as it stands then, so the last one wins.
      limitUpdates = limitUpdates.then(() =>
        count === 1
          ? undefined
          : jsm.consumers.update(stream, durableName, {
              max_ack_pending: credit * (consumerCounts.get(stream) ?? 1),
            }),
      );
      const consumer = startNatsConsumer(connection, js, stream, credit, onMessage, limitUpdates);
      consumers.add(consumer);
      return consumer;
    },
    counters: () => ({}),
    close() {
      closing ??= (async () => {
        await Promise.allSettled([...consumers].map((consumer) => consumer.stop()));
        for (const name of streams) await jsm.streams.delete(name).catch(() => false);
        await connection.close();
      })();
      return closing;
    },
  };
}

class NatsPublisher implements QueueConnection {
  constructor(
    private readonly js: JetStreamClient,
    private readonly subject: string,
  ) {}

  async publish(body: BenchBody): Promise<void> {
    const ack = await this.js.publish(this.subject, Buffer.from(JSON.stringify(body)));
    if (ack.duplicate)
      throw new Error(`JetStream called publish ${ack.seq} a duplicate; the bench sends no ids`);
  }

  receive(): Promise<Delivery[]> {
    return notPulled("JetStream is consumed with consume()");
  }

  ackLater(): Promise<boolean> {
    return notPulled("JetStream is consumed with consume()");
  }
}

/** consume() on the stream's durable consumer, up to `credit` messages per pull; ack() for each. */
function startNatsConsumer(
  connection: NatsConnection,
  js: JetStreamClient,
  stream: string,
  credit: number,
  onMessage: OnMessage,
  limitSet: Promise<unknown>,
): SubscriptionConsumer {
  return new SubscriptionConsumer(stream, onMessage, async (consumer) => {
    await limitSet;
    const durable = await js.consumers.get(stream, durableName);
    const messages: ConsumerMessages = await durable.consume({ max_messages: credit });
    const loop = (async () => {
      for await (const message of messages) {
        let body: BenchBody;
        try {
          body = readBenchBody(message.json());
        } catch (error) {
          consumer.fail(error);
          return;
        }
        consumer.deliver({ body, deliveryCount: message.info.deliveryCount, receipt: String(message.seq) });
        message.ack();
        consumer.acksConfirmed(1);
      }
    })().catch((error: unknown) => consumer.fail(error));
    return {
      async stop() {
        messages.stop();
        await loop;
      },
      async confirmAcks() {
        await connection.flush();
        while ((await durable.info()).num_ack_pending > 0);
      },
    };
  });
}
