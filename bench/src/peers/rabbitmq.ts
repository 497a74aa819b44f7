/**
 * RabbitMQ as a benchmark target, through amqplib: a durable classic or quorum queue per workload
 * (`hopper-bench-…`, deleted and declared anew, deleted again at the end). Publishers use a confirm
 * channel and persistent messages (deliveryMode 2): a publish resolves on the broker's `basic.ack`,
 * which RabbitMQ sends for a persistent message in a durable queue once it is written to disk (a quorum
 * queue: once its Raft log entry is fsynced). Consumers use `basic.consume` with manual acks and a
 * prefetch (`basic.qos`) of the workload's credit, and ack each delivery with its own `basic.ack` as it
 * arrives, as an AMQP application does (and as bench/peers/standalone/rabbitmq.ts does).
 *
 * AMQP 0-9-1 does not confirm acks, so an ack counts when it is written, and the last ack's time is
 * taken after one round trip on the consumer's channel behind it (a passive queue.declare).
 */
import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from "amqplib";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { pidsNamed } from "../cpu.js";
import { packageVersion } from "../package-version.js";
import type { Delivery, OnMessage, QueueConnection, QueueTarget } from "../target.js";
import { notPulled, SubscriptionConsumer } from "./subscription-consumer.js";

export type RabbitQueueType = "classic" | "quorum";

/** The bench's queues are named for the workload's queue with this prefix, and only those are touched. */
const queuePrefix = "hopper-";

export async function startRabbitMqTarget(params: {
  url: string;
  queueType: RabbitQueueType;
}): Promise<QueueTarget> {
  const { url, queueType } = params;
  // Publishers and consumers on separate connections, as RabbitMQ advises: its flow control throttles a
  // publishing connection, which must not hold up the acks of a consuming one.
  const publishing = await amqp.connect(url);
  let consuming: ChannelModel;
  try {
    consuming = await amqp.connect(url);
  } catch (error) {
    await publishing.close().catch(() => {});
    throw error;
  }
  let failure: unknown;
  for (const connection of [publishing, consuming]) {
    connection.on("error", (error: unknown) => {
      failure ??= error;
    });
  }
  const admin = await publishing.createChannel();
  const declared = new Set<string>();
  const consumers = new Set<SubscriptionConsumer>();
  const version = String(publishing.connection.serverProperties.version ?? "unknown");
  let closing: Promise<void> | undefined;
  const throwIfFailed = () => {
    if (failure !== undefined) throw failure;
  };
  return {
    label: `RabbitMQ ${queueType} queue`,
    kind: "rabbitmq",
    versions: `RabbitMQ ${version} · amqplib ${packageVersion("amqplib")}`,
    semantics:
      "confirm = basic.ack on a confirm channel for a persistent message in a durable " +
      (queueType === "quorum"
        ? "quorum queue (after its Raft log is fsynced)"
        : "classic queue (after it is written to disk)") +
      "; ack = basic.ack per message, not confirmed by AMQP: timed by a round trip after it",
    confirmsAfterFsync: true,
    brokerPids: pidsNamed("beam.smp"),
    postgresAppName: undefined,
    async createQueue(queue) {
      const name = queuePrefix + queue;
      await admin.deleteQueue(name);
      await admin.assertQueue(name, { durable: true, arguments: { "x-queue-type": queueType } });
      declared.add(name);
    },
    connect: (queue) => new RabbitPublisher(publishing, queuePrefix + queue, throwIfFailed),
    consumePush(queue, _index, credit, onMessage) {
      const consumer = startRabbitConsumer(consuming, queuePrefix + queue, credit, onMessage);
      consumers.add(consumer);
      return consumer;
    },
    counters: () => ({}),
    close() {
      closing ??= (async () => {
        await Promise.allSettled([...consumers].map((consumer) => consumer.stop()));
        for (const name of declared) await admin.deleteQueue(name).catch(() => {});
        await consuming.close().catch(() => {});
        await publishing.close().catch(() => {});
      })();
      return closing;
    },
  };
}

/** Publishes on a confirm channel of its own, opened at the first publish. */
class RabbitPublisher implements QueueConnection {
  private channel: Promise<ConfirmChannel> | undefined;

  constructor(
    private readonly connection: ChannelModel,
    private readonly queue: string,
    private readonly throwIfFailed: () => void,
  ) {}

  async publish(body: BenchBody): Promise<void> {
    this.throwIfFailed();
    this.channel ??= this.connection.createConfirmChannel();
    const channel = await this.channel;
    const content = Buffer.from(JSON.stringify(body));
    await new Promise<void>((resolve, reject) => {
      channel.sendToQueue(
        this.queue,
        content,
        { persistent: true, contentType: "application/json" },
        (error) =>
          error ? reject(new Error(`RabbitMQ did not confirm a publish: ${String(error)}`)) : resolve(),
      );
    });
  }

  receive(): Promise<Delivery[]> {
    return notPulled("RabbitMQ is consumed with basic.consume");
  }

  ackLater(): Promise<boolean> {
    return notPulled("RabbitMQ is consumed with basic.consume");
  }
}

/** basic.consume on a channel of its own with basic.qos(credit); one basic.ack per delivery. */
function startRabbitConsumer(
  connection: ChannelModel,
  queue: string,
  credit: number,
  onMessage: OnMessage,
): SubscriptionConsumer {
  return new SubscriptionConsumer(queue, onMessage, async (consumer) => {
    const channel: Channel = await connection.createChannel();
    channel.on("error", (error: unknown) => consumer.fail(error));
    await channel.prefetch(credit);
    const { consumerTag } = await channel.consume(
      queue,
      (message) => {
        if (message === null) {
          consumer.fail(new Error("RabbitMQ cancelled the consumer"));
          return;
        }
        let body: BenchBody;
        try {
          body = readBenchBody(JSON.parse(message.content.toString("utf8")));
        } catch (error) {
          consumer.fail(error);
          return;
        }
        consumer.deliver({
          body,
          // A classic queue says only whether a message was delivered before; that is all the ledger needs.
          deliveryCount: message.fields.redelivered ? 2 : 1,
          receipt: String(message.fields.deliveryTag),
        });
        channel.ack(message);
        consumer.acksConfirmed(1);
      },
      { noAck: false },
    );
    return {
      async stop() {
        await channel.cancel(consumerTag);
        await channel.close();
      },
      async confirmAcks() {
        await channel.checkQueue(queue);
      },
    };
  });
}
