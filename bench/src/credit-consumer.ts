/**
 * One consumer with a credit of unacked messages: it long-polls for at most min(100, free credit) (a
 * target may allow more per receive: Redis Streams reads up to the whole free credit),
 * hands each message to the workload, and acks it through `ackLater` (coalesced). Credit comes back
 * when the target confirms the ack, so "unacked" means exactly what the target still holds leased.
 */

import { performance } from "node:perf_hooks";
import { Wakeup } from "./progress.js";
import type { BenchConsumer, Delivery, QueueConnection } from "./target.js";

export interface CreditConsumerOptions {
  connection: QueueConnection;
  /** Unacked messages the consumer may hold at once. */
  creditMax: number;
  /** Most messages one receive asks for: Hopper's server answers at most 100. */
  receiveMax: number;
  /** Called for each message as it arrives, with the time its receive answered. */
  onMessage: (message: Delivery, receivedAtMs: number) => void;
}

export class CreditConsumer implements BenchConsumer {
  received = 0;
  acked = 0;
  /** Acks the server refused (stale_receipt: the lease ended and the message may come again). */
  ackErrors = 0;
  lastAckAtMs = Number.NaN;
  /** Notified after each receive answer and each ack answer, for workloads that wait for the end. */
  readonly activity = new Wakeup();
  private unacked = 0;
  private readonly creditFreed = new Wakeup();
  private readonly stopping = new AbortController();
  private failure: unknown;
  private readonly loop: Promise<void>;

  constructor(private readonly options: CreditConsumerOptions) {
    this.loop = this.run();
  }

  /** The first receive went out when the consumer was made. */
  async ready(): Promise<void> {}

  /** Every ack is answered to this process, so the last one's time is known as it comes. */
  async settled(): Promise<void> {
    while (this.acked + this.ackErrors < this.received) {
      if (this.failure !== undefined) throw this.failure;
      await this.activity.wait();
    }
  }

  /** Ends the long poll in progress and resolves once the loop has returned; rethrows its failure. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.creditFreed.notify();
    await this.loop;
    if (this.failure !== undefined) throw this.failure;
  }

  /** Rejects as soon as receiving or acking fails, so a workload can race it against its own end. */
  get failed(): Promise<never> {
    return this.loop.then(() => {
      if (this.failure !== undefined) throw this.failure;
      return new Promise<never>(() => {});
    });
  }

  private async run(): Promise<void> {
    const { connection, creditMax, receiveMax, onMessage } = this.options;
    const signal = this.stopping.signal;
    while (!signal.aborted && this.failure === undefined) {
      const freeCredit = creditMax - this.unacked;
      if (freeCredit <= 0) {
        await this.creditFreed.wait();
        continue;
      }
      let messages: Delivery[];
      try {
        messages = await connection.receive(Math.min(receiveMax, freeCredit), signal);
      } catch (error) {
        if (!signal.aborted) this.failure = error;
        return;
      }
      const receivedAtMs = performance.now();
      for (const message of messages) {
        this.received++;
        this.unacked++;
        try {
          onMessage(message, receivedAtMs);
        } catch (error) {
          this.failure = error;
          return;
        }
        this.ack(message.receipt);
      }
      this.activity.notify();
    }
  }

  private ack(receipt: string): void {
    this.options.connection.ackLater(receipt).then(
      (acked) => {
        if (acked) this.acked++;
        else this.ackErrors++;
        this.unacked--;
        this.lastAckAtMs = performance.now();
        this.creditFreed.notify();
        this.activity.notify();
      },
      (error: unknown) => {
        this.failure ??= error;
        this.creditFreed.notify();
        this.activity.notify();
      },
    );
  }
}
