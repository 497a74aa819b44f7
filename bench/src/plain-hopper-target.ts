/**
 * The bench's adapters around the frozen plain client (plain-hopper-client.ts), so that the workloads
 * drive it as they drive every target: a producer whose publishes of one turn go out as one `send` of
 * up to 100 `bodyBase64` items (W1, W3) or one request per message (W2), and a push consumer that acks
 * each delivery in its own frame and knows each ack's answer, so its last ack is timed exactly.
 */
import { TurnBatcher } from "./batcher.js";
import { type BenchBody, readBenchBody } from "./bench-message.js";
import { batchItemsMax } from "./limits.js";
import { notPulled, SubscriptionConsumer } from "./peers/subscription-consumer.js";
import type { PlainHopperClient } from "./plain-hopper-client.js";
import type { BenchConsumer, Delivery, OnMessage, PublishShape, QueueConnection } from "./target.js";

export class PlainConnection implements QueueConnection {
  private readonly sends: TurnBatcher<Buffer, undefined>;

  constructor(client: PlainHopperClient, queue: string, shape: PublishShape) {
    this.sends = new TurnBatcher(
      async (bodies) => {
        await client.send(queue, bodies);
        return bodies.map(() => undefined);
      },
      shape === "single" ? 1 : batchItemsMax,
    );
  }

  async publish(body: BenchBody): Promise<void> {
    await this.sends.add(Buffer.from(JSON.stringify(body)));
  }

  receive(): Promise<Delivery[]> {
    return notPulled("the plain client consumes over its WebSocket");
  }

  ackLater(): Promise<boolean> {
    return notPulled("the plain client consumes over its WebSocket");
  }
}

/** The plain client's consumer as a bench consumer: every ack is answered, so none is timed by a poll. */
export function startPlainPushConsumer(
  client: PlainHopperClient,
  queue: string,
  prefetch: number,
  onMessage: OnMessage,
): BenchConsumer {
  return new SubscriptionConsumer(queue, onMessage, async (consumer) => {
    const plain = client.consume(
      queue,
      prefetch,
      (message) =>
        consumer.deliver({
          body: readBenchBody(message.body),
          deliveryCount: message.deliveryCount,
          receipt: message.receipt,
        }),
      (ok, refused) => {
        if (ok > 0) consumer.acksConfirmed(ok);
        for (let index = 0; index < refused; index++) consumer.ackRefused();
      },
      (error) => consumer.fail(error),
    );
    await plain.consuming;
    return { stop: () => plain.close() };
  });
}
