/**
 * A consumer that a peer's client library drives: RabbitMQ's `basic.consume`, NATS JetStream's
 * `consume()`, a BullMQ Worker. The library hands over each delivery (`deliver`), the driver acks it
 * and reports each ack the broker confirmed (`acksConfirmed`). The broker enforces the credit (prefetch,
 * max_ack_pending, concurrency), so this class only counts, and turns the driver's hooks into a
 * BenchConsumer that the workloads treat like Hopper's push consumer.
 */
import { performance } from "node:perf_hooks";
import { peerStopTimeoutMs } from "../limits.js";
import { Wakeup } from "../progress.js";
import type { BenchConsumer, Delivery, OnMessage } from "../target.js";

/**
 * The answer of `receive` and `ackLater` on a peer whose library only pushes: `how` names the way it is
 * consumed instead (through consumePush).
 */
export function notPulled(how: string): Promise<never> {
  return Promise.reject(new Error(`${how} (consumePush), not by receive`));
}

/** What the driver does for the consumer once its subscription is set up. */
export interface SubscriptionHooks {
  /** Stops the subscription; what is unacked goes back to the broker. */
  stop(): Promise<void>;
  /**
   * Where the broker does not confirm acks (RabbitMQ), one round trip after the last ack, so that the
   * last ack's time is when the broker had processed it, not when it left this process.
   */
  confirmAcks?(): Promise<void>;
}

export class SubscriptionConsumer implements BenchConsumer {
  received = 0;
  acked = 0;
  ackErrors = 0;
  lastAckAtMs = Number.NaN;
  readonly activity = new Wakeup();
  readonly failed: Promise<never>;
  private failure: unknown;
  private rejectFailed!: (error: unknown) => void;
  private readonly started: Promise<SubscriptionHooks | undefined>;
  private stopping: Promise<void> | undefined;

  /** `start` sets up the subscription and resolves once messages can flow. */
  constructor(
    private readonly name: string,
    private readonly onMessage: OnMessage,
    start: (consumer: SubscriptionConsumer) => Promise<SubscriptionHooks>,
  ) {
    this.failed = new Promise<never>((_resolve, reject) => {
      this.rejectFailed = reject;
    });
    // A workload races `failed` against its end; a failure after the end must not go unhandled.
    this.failed.catch(() => {});
    this.started = start(this).catch((error: unknown) => {
      this.fail(error);
      return undefined;
    });
  }

  /** Called by the driver for each delivery, as it arrives. */
  deliver(delivery: Delivery): void {
    const receivedAtMs = performance.now();
    this.received++;
    try {
      this.onMessage(delivery, receivedAtMs);
    } catch (error) {
      this.fail(error);
    }
    this.activity.notify();
  }

  /** Called by the driver when the broker confirmed `count` acks (or, for RabbitMQ, they were sent). */
  acksConfirmed(count: number): void {
    this.acked += count;
    this.lastAckAtMs = performance.now();
    this.activity.notify();
  }

  /** Called by the driver when the broker refused an ack. */
  ackRefused(): void {
    this.ackErrors++;
    this.lastAckAtMs = performance.now();
    this.activity.notify();
  }

  /** Called by the driver on any failure of the subscription or of an ack: the run fails. */
  fail(error: unknown): void {
    if (this.failure !== undefined) return;
    const reason = error instanceof Error ? error.message : String(error);
    this.failure = new Error(`the consumer of ${this.name} failed: ${reason}`);
    this.rejectFailed(this.failure);
    this.activity.notify();
  }

  async ready(): Promise<void> {
    await this.started;
    if (this.failure !== undefined) throw this.failure;
  }

  async settled(): Promise<void> {
    while (this.acked + this.ackErrors < this.received) {
      if (this.failure !== undefined) throw this.failure;
      await this.activity.wait();
    }
    const hooks = await this.started;
    if (hooks?.confirmAcks) {
      await hooks.confirmAcks();
      this.lastAckAtMs = performance.now();
    }
    if (this.failure !== undefined) throw this.failure;
  }

  /** Stops the subscription, bounded: a broker that no longer answers must not hold the bench. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const hooks = await this.started;
      if (!hooks) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          console.error(
            `[bench] the consumer of ${this.name} did not stop within ${peerStopTimeoutMs} ms; leaving it to the target's close`,
          );
          resolve();
        }, peerStopTimeoutMs);
      });
      try {
        await Promise.race([hooks.stop(), timeout]);
      } catch (error) {
        this.fail(error);
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.stopping.then(() => {
      if (this.failure !== undefined) throw this.failure;
    });
  }
}
