/**
 * RabbitMQ through amqplib alone: a durable classic or quorum queue, persistent messages published on
 * a confirm channel, a consumer on its own connection with basic.qos(256) acking each message.
 * `node bench/dist/peers/standalone/rabbitmq.js classic|quorum [amqp://guest:guest@127.0.0.1:5672]`
 */
import amqp, { type ConsumeMessage } from "amqplib";
import { fail, prefetch, runBoth } from "./shape.js";

const queueType = process.argv[2] ?? "classic";
if (queueType !== "classic" && queueType !== "quorum") fail(`classic or quorum, not ${queueType}`);
const url = process.argv[3] ?? "amqp://guest:guest@127.0.0.1:5672";
const queue = `standalone-${queueType}`;
// Publishers and consumers on separate connections, as RabbitMQ's documentation advises.
const publishing = await amqp.connect(url);
const consuming = await amqp.connect(url);
const confirms = await publishing.createConfirmChannel();
const channel = await consuming.createChannel();
await channel.prefetch(prefetch);
let consumerTag = "";

await runBoth(`RabbitMQ ${queueType}`, {
  async fresh() {
    await confirms.deleteQueue(queue);
    await confirms.assertQueue(queue, { durable: true, arguments: { "x-queue-type": queueType } });
  },
  publish: (body) =>
    new Promise((resolve, reject) =>
      confirms.sendToQueue(queue, body, { persistent: true }, (error) => (error ? reject(error) : resolve())),
    ),
  async consume(onBody) {
    const reply = await channel.consume(queue, (message: ConsumeMessage | null) => {
      if (message === null) fail("the consumer was cancelled");
      onBody(message.content);
      channel.ack(message);
    });
    consumerTag = reply.consumerTag;
  },
  // AMQP does not confirm acks: one round trip on the consumer's channel behind the last one.
  acksDone: async () => void (await channel.checkQueue(queue)),
  stopConsuming: async () => void (await channel.cancel(consumerTag)),
});
await confirms.deleteQueue(queue);
await consuming.close();
await publishing.close();
