/**
 * Push consumption (DESIGN.md §7), free of any protocol: a consumer has a credit of `prefetch`
 * deliveries. While credit is left and it is not paused, it leases messages with a long poll and hands
 * each to `deliver`; an ack or nack gives the credit back. Every delivery is a short lease (`leaseMs`)
 * that the consumer renews in one batch every third of it while it holds the delivery, so that if the
 * server dies the messages come back within one lease. A consumer that holds a delivery longer than the
 * ack timeout loses it: the lease is handed back and the credit comes back. Cancelling hands every
 * lease it holds back at once, so another consumer can take those messages without waiting. Stopping
 * the leasing keeps the leases, for a consumer that finishes what it holds before it goes.
 *
 * Credit beyond the consumer's own receive takes hand-offs (handoffs.ts): while its last look found the
 * queue drained, a send into the queue may lease its messages to the consumer as it writes them, even
 * while a look is under way. Held, reserved for such sends, and asked for by the receive under way
 * together never exceed the prefetch.
 */
import type { Clock } from "../clock.js";
import { HopperError, invariant } from "../errors.js";
import { limits } from "../limits.js";
import type { LeasedMessage } from "../model/message.js";
import type { Claim } from "./handoffs.js";
import type { ItemResult, NackOptions, QueueBroker } from "./queues.js";

/** What a consumer needs of the broker; a QueueBroker is one. */
export type PushBroker = Pick<
  QueueBroker,
  "receiveLooking" | "addHandoffSink" | "ack" | "nack" | "extend" | "consumerOpened" | "consumerClosed"
>;

export interface PushConsumerOptions {
  broker: PushBroker;
  clock: Clock;
  queue: string;
  /** The most unacked deliveries held at once, 1 to `limits.prefetchMax`. */
  prefetch: number;
  /** Pushes leased messages to the consumer, in order: each lease's batch in one call, so an adapter may
   * write them in one frame. Called only while the consumer is not paused. */
  deliver: (messages: LeasedMessage[]) => void;
  /** The consumer ended by itself (its queue was deleted); it holds nothing any more. */
  onEnd?: (error: HopperError) => void;
  /** A receive failed for a passing reason (store unreachable) and will be retried, or a lease timed out. */
  onWarning?: (error: unknown) => void;
  /** How long a delivery may stay unacked. Default `limits.consumerAckTimeoutMs`. */
  ackTimeoutMs?: number;
  /** The lease of each delivery, renewed while held. Default `limits.pushLeaseMs`. */
  leaseMs?: number;
}

/**
 * The leases of one receive: delivered together, they share their ack deadline, so one timer serves
 * them all (a timer per delivery cost about 1 µs each, 3 % of a drain's server CPU). It is cancelled
 * once none of them is held.
 */
interface LeaseBatch {
  readonly receipts: readonly string[];
  held: number;
  cancelTimer: () => void;
}

interface HeldLease {
  readonly batch: LeaseBatch;
}

export class PushConsumer {
  readonly queue: string;
  readonly prefetch: number;
  /** Leases this consumer holds, delivered or waiting to be, by receipt. */
  private readonly held = new Map<string, HeldLease>();
  /** Leased while paused: delivered, in order, once the consumer resumes. */
  private readonly undelivered: LeasedMessage[] = [];
  private readonly receiveAbort = new AbortController();
  private readonly ackTimeoutMs: number;
  private readonly leaseMs: number;
  /** The least free credit worth a lease while deliveries are held (see canReceive). */
  private readonly refillMin: number;
  /** Credit promised to sends that hand off to this consumer and are not done yet. */
  private reserved = 0;
  /** The `max` of the receive under way, 0 between receives. */
  private receiving = 0;
  /** The last look took fewer messages than it asked for: the queue was drained then. */
  private drained = false;
  /** Settle when the hand-offs under way are done; cancel waits for them to hand their leases back. */
  private readonly handoffsUnderWay = new Set<Promise<void>>();
  private removeSink: (() => void) | undefined;
  private cancelRenewal: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private wakeSleep: (() => void) | undefined;
  private paused = false;
  private ended = false;
  /** stopLeasing() was called: no more leases, neither by receive nor by hand-off. */
  private leasingStopped = false;
  private stoppingLeasing: Promise<void> | undefined;
  private cancelling: Promise<void> | undefined;

  constructor(private readonly options: PushConsumerOptions) {
    const { prefetch } = options;
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > limits.prefetchMax) {
      throw new HopperError("invalid_request", `prefetch must be from 1 to ${limits.prefetchMax}.`, {
        max: limits.prefetchMax,
      });
    }
    this.queue = options.queue;
    this.prefetch = prefetch;
    this.ackTimeoutMs = options.ackTimeoutMs ?? limits.consumerAckTimeoutMs;
    this.leaseMs = Math.min(options.leaseMs ?? limits.pushLeaseMs, this.ackTimeoutMs);
    this.refillMin = Math.max(1, Math.min(limits.receiveMax, Math.floor(prefetch / 4)));
  }

  /** Unacked deliveries held now; never more than `prefetch`. */
  get unacked(): number {
    return this.held.size;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Whether this consumer holds the lease `receipt` names. */
  holds(receipt: string): boolean {
    return this.held.has(receipt);
  }

  /** Starts leasing and delivering. */
  start(): void {
    this.options.broker.consumerOpened(this.queue);
    this.removeSink = this.options.broker.addHandoffSink(this.queue, { claim: () => this.claimHandoff() });
    this.pump();
  }

  /** Stops delivering (the consumer's send buffer is full); leases already taken wait for resume(). */
  pause(): void {
    this.paused = true;
  }

  /** Delivers what waited, in order, then leases again while credit is left. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    const waiting = this.undelivered.splice(0);
    if (waiting.length > 0 && !this.ended) this.options.deliver(waiting);
    this.pump();
  }

  /** Deletes the messages; a receipt this consumer does not hold answers `stale_receipt`. */
  async ack(receipts: string[]): Promise<ItemResult[]> {
    return this.settle(receipts, (held, applied) => this.options.broker.ack(this.queue, held, applied));
  }

  /**
   * Ends the leases; each message comes back after `delayMs`, or as the queue's retry policy says, or
   * with `deadLetter` goes to the dead-letter target (refused with no target: the lease stays held).
   */
  async nack(receipts: string[], options: NackOptions = {}): Promise<ItemResult[]> {
    return this.settle(receipts, (held, applied) =>
      this.options.broker.nack(this.queue, held, options, applied),
    );
  }

  /** Hands the messages back at once, without counting a nack. */
  async release(receipts: string[]): Promise<ItemResult[]> {
    return this.settle(receipts, (held) => this.options.broker.extend(this.queue, held, 0));
  }

  /**
   * Stops leasing, and keeps every lease held so that it can still be acked or nacked: a consumer that
   * is stopping finishes the messages it has without being given more, whose deliveries would be
   * counted although it never ran them. Resolves once no receive or hand-off is under way, so every
   * lease this consumer will get has been delivered (or, while paused, waits for resume()). Idempotent.
   */
  stopLeasing(): Promise<void> {
    this.stoppingLeasing ??= this.stopLeasingOnce();
    return this.stoppingLeasing;
  }

  private async stopLeasingOnce(): Promise<void> {
    this.leasingStopped = true;
    this.receiveAbort.abort();
    this.wakeSleep?.();
    // A receive answered as the abort came delivers its leases as the loop ends.
    await this.loop;
    await Promise.all(this.handoffsUnderWay);
  }

  /**
   * Stops leasing and hands back every lease held (delivered or not) at once. Resolves when the broker
   * has them back. Idempotent.
   */
  cancel(): Promise<void> {
    this.cancelling ??= this.cancelOnce();
    return this.cancelling;
  }

  private async cancelOnce(): Promise<void> {
    this.options.broker.consumerClosed(this.queue);
    this.removeSink?.();
    this.ended = true;
    this.cancelRenewal?.();
    this.receiveAbort.abort();
    this.wakeSleep?.();
    // A receive that was answered as the abort came has added its leases to `held` once the loop ends.
    await this.loop;
    await Promise.all(this.handoffsUnderWay);
    this.undelivered.length = 0;
    const receipts = [...this.held.keys()];
    this.forgetAll();
    const batches = [];
    for (let start = 0; start < receipts.length; start += limits.batchSizeMax) {
      batches.push(receipts.slice(start, start + limits.batchSizeMax));
    }
    const outcomes = await Promise.allSettled(
      batches.map((batch) => this.options.broker.extend(this.queue, batch, 0)),
    );
    for (const outcome of outcomes) {
      // The leases end by their timeout instead; nothing is lost, only later.
      if (outcome.status === "rejected") this.options.onWarning?.(outcome.reason);
    }
  }

  /**
   * Runs one ack, nack or release for the receipts this consumer holds, in the caller's order. A lease
   * that is settled, or found gone, gives its credit back as soon as the broker's store holds the
   * outcome (`applied`; the log store's comes before it is durable) or else with the answer; one whose
   * call failed stays held.
   */
  private async settle(
    receipts: string[],
    call: (held: string[], applied: (results: ItemResult[]) => void) => Promise<ItemResult[]>,
  ): Promise<ItemResult[]> {
    // Each held lease is settled once, however often the caller named it.
    const heldReceipts = [...new Set(receipts)].filter((receipt) => this.held.has(receipt));
    const giveBack = (results: ItemResult[]) => {
      invariant(results.length === heldReceipts.length, "one result per receipt");
      heldReceipts.forEach((receipt, index) => {
        const result = results[index] as ItemResult;
        if ("ok" in result || result.error.code === "stale_receipt") this.forget(receipt);
      });
      this.pump();
    };
    const heldResults = heldReceipts.length > 0 ? await call(heldReceipts, giveBack) : [];
    giveBack(heldResults);
    const resultByReceipt = new Map(heldReceipts.map((receipt, index) => [receipt, heldResults[index]]));
    return receipts.map((receipt) => resultByReceipt.get(receipt) ?? notHeldResult());
  }

  /** Drops every held lease and its batch's timer. */
  private forgetAll(): void {
    for (const lease of this.held.values()) lease.batch.cancelTimer();
    this.held.clear();
  }

  /** Drops a lease from the held set, giving its credit back. */
  private forget(receipt: string): void {
    const lease = this.held.get(receipt);
    if (!lease) return;
    this.held.delete(receipt);
    lease.batch.held--;
    if (lease.batch.held === 0) lease.batch.cancelTimer();
  }

  /** Starts the receive loop unless it runs already or there is nothing for it to do. */
  private pump(): void {
    if (this.loop || !this.canReceive()) return;
    this.loop = this.receiveLoop().finally(() => {
      this.loop = undefined;
      this.pump();
    });
  }

  /**
   * Leases when nothing is held (so a quiet queue is pushed at once), or when at least a quarter of the
   * credit (up to a full receive of 100) is free: credit that comes back a few acks at a time is
   * gathered into larger leases rather than spent on one store call per ack frame.
   */
  private canReceive(): boolean {
    if (this.ended || this.leasingStopped || this.paused) return false;
    const free = this.freeCredit();
    if (free < 1) return false;
    return this.held.size + this.reserved === 0 || free >= this.refillMin;
  }

  /** Credit neither held nor promised to a hand-off under way. */
  private freeCredit(): number {
    return this.prefetch - this.held.size - this.reserved;
  }

  /**
   * A send's claim on the credit left beyond the receive under way (up to a receive's worth), while
   * the last look found the queue drained; the claim settles with what the send leased to it.
   */
  private claimHandoff(): Claim | undefined {
    if (this.ended || this.leasingStopped || this.paused || !this.drained) return undefined;
    const room = Math.min(limits.receiveMax, this.freeCredit() - this.receiving);
    if (room < 1) return undefined;
    this.reserved += room;
    let done = () => {};
    const underWay = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.handoffsUnderWay.add(underWay);
    return {
      terms: { max: room, visibilityTimeoutMs: this.leaseMs },
      settle: (leased) => {
        this.reserved -= room;
        this.handoffsUnderWay.delete(underWay);
        if (leased.length > 0) this.take(leased);
        done();
        this.pump();
      },
    };
  }

  private async receiveLoop(): Promise<void> {
    let failuresInRow = 0;
    // The queue's version before the look of the last receive that took less than it asked for: the
    // queue was drained then, and the next receive need not look again until something notifies.
    let drainedAtVersion: number | undefined;
    while (this.canReceive()) {
      const startedAt = this.options.clock.now();
      const max = Math.min(this.freeCredit(), limits.receiveMax);
      let messages: LeasedMessage[];
      this.receiving = max;
      try {
        const received = await this.options.broker.receiveLooking(this.queue, {
          max,
          waitMs: limits.waitMsMax,
          visibilityTimeoutMs: this.leaseMs,
          signal: this.receiveAbort.signal,
          countAsConsumer: false,
          drainedAtVersion,
          onDrained: () => {
            this.drained = true;
          },
        });
        messages = received.messages;
        failuresInRow = 0;
        drainedAtVersion = messages.length < max ? received.version : undefined;
        this.drained = drainedAtVersion !== undefined;
      } catch (error) {
        this.receiving = 0;
        drainedAtVersion = undefined;
        this.drained = false;
        if (this.ended || this.leasingStopped) return;
        if (error instanceof HopperError && error.code === "queue_not_found") {
          this.end(error);
          return;
        }
        failuresInRow++;
        this.options.onWarning?.(error);
        await this.sleep(backoffMs(failuresInRow));
        continue;
      }
      // In the same step as take: credit moves from the receive to the held leases, never counted free.
      this.receiving = 0;
      this.take(messages);
      const elapsedMs = this.options.clock.now() - startedAt;
      if (messages.length === 0 && elapsedMs < limits.waitMsMax)
        await this.sleep(limits.pushEmptyReceivePauseMs);
    }
  }

  /** Holds each new lease against the credit and delivers it, or keeps it until resume(). */
  private take(messages: LeasedMessage[]): void {
    const deliverable: LeasedMessage[] = [];
    const batch: LeaseBatch = {
      receipts: messages.map((message) => message.receipt),
      held: messages.length,
      cancelTimer: () => {},
    };
    if (messages.length > 0) {
      batch.cancelTimer = this.options.clock.setTimer(this.options.clock.now() + this.ackTimeoutMs, () => {
        for (const receipt of batch.receipts) {
          if (this.held.get(receipt)?.batch === batch) this.ackTimedOut(receipt);
        }
      });
    }
    for (const message of messages) {
      this.held.set(message.receipt, { batch });
      invariant(this.held.size <= this.prefetch, "a consumer never holds more than its prefetch");
      // After cancel() the leases are only held, so that cancel hands them back.
      if (this.ended) continue;
      if (this.paused) this.undelivered.push(message);
      else deliverable.push(message);
    }
    if (deliverable.length > 0) this.options.deliver(deliverable);
    this.scheduleRenewal();
  }

  /** Keeps one renewal timer while any lease is held: every third of the lease, all are extended. */
  private scheduleRenewal(): void {
    if (this.cancelRenewal || this.ended || this.held.size === 0) return;
    const atMs = this.options.clock.now() + Math.max(1, Math.floor(this.leaseMs / 3));
    this.cancelRenewal = this.options.clock.setTimer(atMs, () => {
      this.cancelRenewal = undefined;
      return this.renew();
    });
  }

  /** Extends every held lease by `leaseMs`; a lease found gone is dropped and its credit comes back. */
  private async renew(): Promise<void> {
    const receipts = [...this.held.keys()];
    for (let start = 0; start < receipts.length && !this.ended; start += limits.batchSizeMax) {
      const batch = receipts.slice(start, start + limits.batchSizeMax);
      try {
        const results = await this.options.broker.extend(this.queue, batch, this.leaseMs);
        results.forEach((result, index) => {
          if ("error" in result && result.error.code === "stale_receipt") this.forget(batch[index] as string);
        });
      } catch (error) {
        // The leases run out by themselves if this keeps failing; the next renewal tries again.
        this.options.onWarning?.(error);
      }
    }
    this.scheduleRenewal();
    this.pump();
  }

  /** The delivery was held past the ack timeout: its lease is handed back, so its credit comes back. */
  private ackTimedOut(receipt: string): void {
    if (!this.held.has(receipt)) return;
    this.forget(receipt);
    this.options.broker.extend(this.queue, [receipt], 0).catch((error: unknown) => {
      // The lease then ends by itself within one lease length, as it is no longer renewed.
      this.options.onWarning?.(error);
    });
    const index = this.undelivered.findIndex((message) => message.receipt === receipt);
    if (index >= 0) this.undelivered.splice(index, 1);
    this.options.onWarning?.(
      new HopperError(
        "stale_receipt",
        `A delivery of queue "${this.queue}" was not acked within ${this.ackTimeoutMs} ms; its lease ended.`,
        {
          queue: this.queue,
          ackTimeoutMs: this.ackTimeoutMs,
        },
      ),
    );
    this.pump();
  }

  /** The queue is gone: nothing is held (its messages went with it), and nothing more will come. */
  private end(error: HopperError): void {
    this.options.broker.consumerClosed(this.queue);
    this.removeSink?.();
    this.ended = true;
    this.cancelRenewal?.();
    this.cancelling = Promise.resolve();
    this.forgetAll();
    this.undelivered.length = 0;
    this.options.onEnd?.(error);
  }

  /** Waits on the injected clock, or until cancel() or stopLeasing(). */
  private sleep(delayMs: number): Promise<void> {
    if (this.ended || this.leasingStopped) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        cancelTimer();
        this.wakeSleep = undefined;
        resolve();
      };
      const cancelTimer = this.options.clock.setTimer(this.options.clock.now() + delayMs, wake);
      this.wakeSleep = wake;
    });
  }
}

function notHeldResult(): ItemResult {
  return {
    error: new HopperError(
      "stale_receipt",
      "This consumer holds no lease with this receipt: it was acked, its lease ended, or it was never delivered here.",
    ),
  };
}

/** Capped exponential back-off: 250 ms, 500 ms, 1 s, … up to 30 s. */
function backoffMs(failuresInRow: number): number {
  const { pushReceiveBackoffMsMin: first, pushReceiveBackoffMsMax: last } = limits;
  return Math.min(last, first * 2 ** Math.min(failuresInRow - 1, 30));
}
