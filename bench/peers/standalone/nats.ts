/**
 * NATS JetStream through the nats client alone: a file-storage stream with work-queue retention, a
 * durable pull consumer with explicit acks read with consume() and acked with ack() — the mode the
 * client's JetStream README uses throughout (ackAck, which waits for the server's reply to each ack,
 * is the "double ack" of exactly-once processing).
 * `node bench/dist/peers/standalone/nats.js [nats://127.0.0.1:4222]`
 */
import { AckPolicy, type ConsumerMessages, connect, RetentionPolicy, StorageType } from "nats";
import { prefetch, runBoth } from "./shape.js";

const connection = await connect({ servers: process.argv[2] ?? "nats://127.0.0.1:4222" });
const jsm = await connection.jetstreamManager();
const js = connection.jetstream();
const stream = "standalone";
let messages: ConsumerMessages | undefined;
let loop: Promise<void> = Promise.resolve();

await runBoth("NATS JetStream", {
  async fresh() {
    await jsm.streams.delete(stream).catch(() => false);
    await jsm.streams.add({
      name: stream,
      subjects: [stream],
      storage: StorageType.File,
      retention: RetentionPolicy.Workqueue,
    });
    await jsm.consumers.add(stream, { durable_name: "worker", ack_policy: AckPolicy.Explicit });
  },
  publish: async (body) => void (await js.publish(stream, body)),
  async consume(onBody) {
    const consumer = await js.consumers.get(stream, "worker");
    const open = await consumer.consume({ max_messages: prefetch });
    messages = open;
    loop = (async () => {
      for await (const message of open) {
        onBody(Buffer.from(message.data));
        message.ack();
      }
    })();
  },
  async acksDone() {
    // The acks are plain publishes: once the server has answered a PING it has read them all, and the
    // consumer's info says when it has applied them.
    await connection.flush();
    const consumer = await js.consumers.get(stream, "worker");
    while ((await consumer.info()).num_ack_pending > 0);
  },
  async stopConsuming() {
    messages?.stop();
    await loop;
  },
});
await jsm.streams.delete(stream);
await connection.close();
