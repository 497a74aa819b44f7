/**
 * Hopper's push consumer as a benchmark consumer: `client.consume(queue, handler, { prefetch })` over a
 * WebSocket. The server keeps at most `prefetch` unacked deliveries out, as the pull consumer keeps its
 * credit. The handler records the delivery and returns, and the client acks it: acks of one event-loop
 * turn share one `ack` frame of at most 100 receipts (consume.ts coalesces them as `ackLater` does).
 *
 * The client does not tell its caller when an ack is confirmed, so `settled()` asks the queue's stats
 * instead: once every message has been delivered, it reads `GET /v1/queues/{queue}` back to back until
 * nothing is in flight, and takes the answer's arrival as the last ack's time (an upper bound, late by
 * at most one stats request: ~1–3 ms here). With several push consumers on one queue (W3) each waits for
 * the whole queue, which is what the workload needs anyway.
 */
import { type Consumer, type HopperClient, HopperError } from "@hopper/client";
import { readBenchBody } from "./bench-message.js";
import { pushReadyTimeoutMs, pushStopTimeoutMs, statsPollMs } from "./limits.js";
import { Wakeup } from "./progress.js";
import type { BenchConsumer, OnMessage } from "./target.js";

export class PushConsumer implements BenchConsumer {
  received = 0;
  acked = 0;
  ackErrors = 0;
  lastAckAtMs = Number.NaN;
  readonly activity = new Wakeup();
  readonly failed: Promise<never>;
  private failure: unknown;
  private rejectFailed!: (error: unknown) => void;
  private readonly consumer: Consumer;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly client: HopperClient,
    private readonly queue: string,
    prefetch: number,
    onMessage: OnMessage,
  ) {
    this.failed = new Promise<never>((_resolve, reject) => {
      this.rejectFailed = reject;
    });
    // A workload races `failed` against its end; a failure after the end must not go unhandled.
    this.failed.catch(() => {});
    this.consumer = client.consume(
      queue,
      (message) => {
        const receivedAtMs = performance.now();
        this.received++;
        try {
          onMessage(
            {
              body: readBenchBody(message.body),
              deliveryCount: message.deliveryCount,
              receipt: message.receipt,
              key: message.key,
            },
            receivedAtMs,
          );
        } catch (error) {
          // Returning normally still acks it; the run fails on the recorded error.
          this.fail(error);
        }
        this.activity.notify();
      },
      { prefetch, onError: (error) => this.onError(error) },
    );
  }

  /** Waits until the server counts this queue's push consumer, so the WebSocket is up and consuming. */
  async ready(): Promise<void> {
    const deadline = performance.now() + pushReadyTimeoutMs;
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const { stats } = await this.client.getQueue(this.queue);
      if (stats.consumers >= 1) return;
      if (performance.now() > deadline) {
        throw new Error(
          `the push consumer of "${this.queue}" was not consuming within ${pushReadyTimeoutMs} ms ` +
            "(the queue's stats count no consumer)",
        );
      }
      await sleep(statsPollMs);
    }
  }

  /** Reads the queue's stats until nothing is in flight: every delivery so far is acked (or went back). */
  async settled(): Promise<void> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const { stats } = await this.client.getQueue(this.queue);
      const answeredAtMs = performance.now();
      this.acked = Math.max(this.acked, this.received - this.ackErrors - stats.inFlight);
      if (stats.inFlight === 0) {
        this.lastAckAtMs = answeredAtMs;
        this.activity.notify();
        return;
      }
      await sleep(statsPollMs);
    }
  }

  /** Lets the handlers' acks finish and closes the socket; bounded, since a dead server never answers. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          console.error(
            `[bench] the push consumer of "${this.queue}" did not stop within ${pushStopTimeoutMs} ms; leaving its socket to the server's stop`,
          );
          resolve();
        }, pushStopTimeoutMs);
      });
      try {
        await Promise.race([this.consumer.stop(), timeout]);
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.stopping.then(() => {
      if (this.failure !== undefined) throw this.failure;
    });
  }

  /**
   * A refused ack (stale_receipt: the lease ended first, and the message comes again) is counted, as
   * the pull consumer counts it. Anything else (a dropped connection, a failed ack frame) fails the run:
   * the client would reconnect, but a benchmark that loses its connection measures nothing useful.
   */
  private onError(error: unknown): void {
    if (error instanceof HopperError && error.code === "stale_receipt") {
      this.ackErrors++;
      this.activity.notify();
      return;
    }
    const reason = error instanceof Error ? error.message : String(error);
    this.fail(new Error(`the push consumer of "${this.queue}" reported: ${reason}`));
  }

  private fail(error: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = error;
    this.rejectFailed(error);
    this.activity.notify();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
