/** Makes a workload's consumers: pulling (every target) or pushed to (Hopper), as the run was told. */
import { CreditConsumer } from "./credit-consumer.js";
import { consumerUnackedMax, receiveMessagesMax } from "./limits.js";
import type { WorkloadContext } from "./measure.js";
import type { BenchConsumer, OnMessage } from "./target.js";

/**
 * A consumer of `queue` with a credit of `consumerUnackedMax` unacked messages, for consumer number
 * `index` of the workload. Pull: receive ≤ min(100, free credit) with a long poll, `ackLater` each.
 * Push: `client.consume` with `prefetch` equal to that credit, acked by the client; for the peers
 * that have no pull consumer, their own subscription with that prefetch (target.consumePush).
 */
export function startConsumer(
  context: WorkloadContext,
  queue: string,
  index: number,
  onMessage: OnMessage,
): BenchConsumer {
  const { target } = context;
  if (context.consumer === "push") {
    if (!target.consumePush) throw new Error(`${target.label} has no push consumer`);
    return target.consumePush(queue, index, consumerUnackedMax, onMessage);
  }
  return new CreditConsumer({
    connection: target.connect(queue, index),
    creditMax: consumerUnackedMax,
    receiveMax: target.receiveMessagesMax ?? receiveMessagesMax,
    onMessage,
  });
}

/** Stops every consumer, even if some fail; used on the way out of a workload, failed or not. */
export async function stopConsumers(consumers: readonly BenchConsumer[]): Promise<void> {
  await Promise.allSettled(consumers.map((consumer) => consumer.stop()));
}
