/**
 * Receiving: leases, long polls and what ends a lease (ack, nack, extend). A long poll waits on its
 * queue's wake-up topic (wake.ts) after the head it read before its look, so nothing committed while
 * it looked is missed; while it waits, a send may hand it messages directly (handoffs.ts).
 */
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { LeasedMessage } from "../model/message.js";
import type { QueueRecord } from "../model/queue.js";
import { retryDelayMs } from "../model/queue-attributes.js";
import { type HandoffSink, type Handoffs, type HandoffTerms, longPollClaim } from "./handoffs.js";
import type { QueueAdmin } from "./queue-admin.js";
import {
  checkBatchSize,
  checkDelay,
  deadLettered,
  type ItemResult,
  itemResultsTo,
  type QueueContext,
  toItemResult,
  wakeQueue,
} from "./queue-context.js";
import { queueTopic } from "./wake.js";

/** How a receive leases; see QueueBroker.receive. */
export interface ReceiveOptions {
  max?: number;
  waitMs?: number;
  visibilityTimeoutMs?: number;
  signal?: AbortSignal;
  /** False for a push consumer's own receives: it counts itself, for as long as it lives. */
  countAsConsumer?: boolean;
  /** At most once: the messages are deleted as they are leased, and lost if the caller fails. */
  autoAck?: boolean;
  /**
   * The queue's version (the head of its wake-up topic) read before the look of an earlier receive
   * that took fewer than it asked for, so found the queue drained (receiveLooking answers it). If the
   * head has not moved since, a long poll skips its first look, which could only find nothing, and
   * waits at once.
   */
  drainedAtVersion?: number;
  /** Called each time a look of this long poll finds nothing and it waits on: the queue is drained. */
  onDrained?: () => void;
}

/** How a nack ends its leases (the wire's NackBody without its receipts); see QueueBroker.nack. */
export interface NackOptions {
  /** When to deliver again; without it the queue's retry policy decides. Not with `deadLetter`. */
  delayMs?: number;
  /** Rejected for good: the messages go to the queue's dead-letter target now, not retried. */
  deadLetter?: boolean;
  /** The dead letters' x-dead-letter-reason; default `rejected`. Only with `deadLetter`. */
  reason?: string;
}

/**
 * Checks a nack's options (400 invalid_request) and answers the store's deadLetterNow for them:
 * undefined for a retrying nack.
 */
export function checkNackOptions(options: NackOptions): { reason: string } | undefined {
  const { deadLetter, delayMs, reason } = options;
  if (!deadLetter) {
    if (reason !== undefined) {
      throw new HopperError("invalid_request", "A nack's reason goes only with deadLetter: true.");
    }
    return undefined;
  }
  if (delayMs !== undefined) {
    throw new HopperError("invalid_request", "A dead-lettering nack is not retried, so it takes no delayMs.");
  }
  if (reason !== undefined && (reason.length < 1 || reason.length > limits.deadLetterReasonLengthMax)) {
    throw new HopperError(
      "invalid_request",
      `A nack's reason is 1 to ${limits.deadLetterReasonLengthMax} characters.`,
    );
  }
  return { reason: reason ?? "rejected" };
}

export class QueueReceiver {
  /** Messages whose body failed its checksum as a lease read them, since this process started. */
  corruptFound = 0;

  constructor(
    private readonly context: QueueContext,
    private readonly admin: QueueAdmin,
    private readonly handoffs: Handoffs,
  ) {}

  /**
   * receive, answering also the queue's version (queueVersion) read before the look that answered.
   * When that look took fewer messages than asked for, the queue was drained at that version: pass it
   * as the next receive's drainedAtVersion.
   */
  async receiveLooking(
    name: string,
    options: ReceiveOptions,
  ): Promise<{ messages: LeasedMessage[]; version: number }> {
    const max = options.max ?? 1;
    if (!Number.isInteger(max) || max < 1 || max > limits.receiveMax) {
      throw new HopperError("invalid_request", `max must be from 1 to ${limits.receiveMax}.`);
    }
    const { clock, wake } = this.context;
    let queue = await this.admin.queue(name);
    const waitMs = options.waitMs ?? queue.attributes.receiveWaitMs;
    const deadlineMs = clock.now() + Math.min(waitMs, limits.waitMsMax);
    const counted = options.countAsConsumer !== false;
    if (counted) this.admin.consumerOpened(name);
    // A long poll takes hand-offs (a send leasing to it as it writes), but not to delete them at once.
    const terms: HandoffTerms | undefined = options.autoAck
      ? undefined
      : { max, visibilityTimeoutMs: options.visibilityTimeoutMs ?? queue.attributes.visibilityTimeoutMs };
    const topic = queueTopic(name);
    try {
      for (let look = 0; ; look++) {
        // Read before the look: whatever the look cannot see has moved the head past it.
        const version = wake.head(topic);
        // Whatever makes messages available advances the head (a send, a nack, a move, another node's
        // commit, a delay or lease falling due through the scheduler), so an unchanged head after a
        // drained look means there is nothing to take yet. Only a long poll skips: it then waits below,
        // having offered the scheduler the next time something falls due.
        const skip = look === 0 && waitMs > 0 && options.drainedAtVersion === version;
        const leased = skip ? [] : await this.lease(queue, max, options.visibilityTimeoutMs, options.autoAck);
        const kept = await this.unlessLeft(name, leased, options);
        if (kept.length > 0 || options.signal?.aborted || this.context.stopped || clock.now() >= deadlineMs) {
          return { messages: kept, version };
        }
        options.onDrained?.();
        // Claimed by a send: what it leased is ours once the send is done; nothing means look again.
        const handed = await this.waitFor(name, deadlineMs, version, options.signal, terms);
        if (handed.length > 0) return { messages: await this.unlessLeft(name, handed, options), version };
        queue = await this.admin.queue(name);
      }
    } finally {
      if (counted) this.admin.consumerClosed(name);
    }
  }

  /**
   * The messages leased to a receive, unless its caller left meanwhile: then they are handed back at
   * once (their lease cut to 0) rather than left to wait out a lease nobody holds, and none answered.
   */
  private async unlessLeft(
    name: string,
    leased: LeasedMessage[],
    options: ReceiveOptions,
  ): Promise<LeasedMessage[]> {
    if (!options.signal?.aborted || options.autoAck) return leased;
    if (leased.length > 0)
      await this.extend(
        name,
        leased.map((message) => message.receipt),
        0,
      );
    return [];
  }

  /**
   * A long poll's wait on its queue's topic after `version` (Wakeups.waitAfter): answers what a send
   * handed off to it, or nothing, which means look again. Another node may hold leases or delays this
   * node has not seen, so it reads the queue's next visibility time and offers it to the scheduler; the
   * waiter is registered before that read, so that a send committed meanwhile can hand off to it. If
   * the read fails, the wait ends at once, unless a send has claimed it: its hand-off is then the answer.
   */
  private async waitFor(
    name: string,
    deadlineMs: number,
    version: number,
    signal: AbortSignal | undefined,
    terms: HandoffTerms | undefined,
  ): Promise<LeasedMessage[]> {
    const { clock, store, scheduler, wake } = this.context;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) stop.abort();
    const offer = terms && longPollClaim(terms);
    try {
      const waiting = wake.waitAfter(queueTopic(name), version, {
        timeoutMs: Math.max(0, deadlineMs - clock.now()),
        signal: stop.signal,
        claimable: offer?.claim,
      });
      // Awaited below in either case; this only keeps a refusal from counting as unhandled meanwhile.
      waiting.catch(() => {});
      try {
        const { nextVisibleAt } = await store.queueNextEvents({ queue: name, now: clock.now() });
        if (nextVisibleAt !== null && nextVisibleAt < deadlineMs) scheduler.offer(name, nextVisibleAt);
      } catch (error) {
        stop.abort();
        const end = await waiting;
        if (offer && typeof end === "object") return await offer.handed;
        throw error;
      }
      const end = await waiting;
      return offer && typeof end === "object" ? await offer.handed : [];
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Adds a taker of the queue's sends besides its long polls (handoffs.ts; a push consumer with credit
   * beyond its own receive). Answers the function that removes it.
   */
  addHandoffSink(name: string, sink: HandoffSink): () => void {
    return this.handoffs.addSink(name, sink);
  }

  /** The head of the queue's wake-up topic: see receive's drainedAtVersion. */
  queueVersion(name: string): number {
    return this.context.wake.head(queueTopic(name));
  }

  private async lease(
    queue: QueueRecord,
    max: number,
    visibilityTimeoutMs?: number,
    autoAck = false,
  ): Promise<LeasedMessage[]> {
    const { clock, store, scheduler, log } = this.context;
    const now = clock.now();
    const leaseMs = visibilityTimeoutMs ?? queue.attributes.visibilityTimeoutMs;
    const leaseExpiresAt = now + leaseMs;
    const deadLetter = await this.admin.deadLetterRoute(queue);
    const {
      messages,
      deadLettered: deadLetteredCount,
      corrupt = 0,
    } = await store.queueLease({
      queue: queue.name,
      max,
      now,
      leaseExpiresAt,
      expiredBefore: now - queue.attributes.retentionMs,
      inFlightMax: limits.inFlightMax,
      deadLetter,
      autoAck,
    });
    if (messages.length > 0 && !autoAck) scheduler.offer(queue.name, leaseExpiresAt);
    // Deleted at once, the FIFO heads handed their groups on: other long polls may take the next.
    if (messages.length > 0 && autoAck && queue.kind === "fifo") wakeQueue(this.context, queue.name);
    deadLettered(this.context, deadLetter, deadLetteredCount);
    if (corrupt > 0) {
      this.corruptFound += corrupt;
      // Never silent: a body changed on disk is the store's damage, which an operator must hear of.
      log.error(
        { queue: queue.name, corrupt, deadLettered: deadLetter !== null },
        "messages whose body failed its checksum were withheld from delivery",
      );
    }
    return messages;
  }

  /**
   * Deletes the messages whose leases the receipts name; answers once that is durable. `applied`, if
   * given, hears the results as soon as the store holds them, which may be before (store.ts Applied).
   */
  async ack(
    name: string,
    receipts: string[],
    applied?: (results: ItemResult[]) => void,
  ): Promise<ItemResult[]> {
    checkBatchSize(receipts.length);
    const queue = await this.admin.queue(name);
    const results = await this.context.store.queueAck({
      queue: name,
      receipts,
      applied: itemResultsTo(applied),
    });
    // In a FIFO queue an ack hands the group to its next message, which a long poll may be waiting for.
    if (queue.kind === "fifo" && results.some((result) => "ok" in result)) wakeQueue(this.context, name);
    return results.map(toItemResult);
  }

  /**
   * Ends leases early; each message is retried after `delayMs`, or after the queue's retry policy, or
   * with `deadLetter` goes to the queue's dead-letter target at once (`no_dead_letter_target` per item
   * when it has none, the lease left as it was). `applied` as in ack.
   */
  async nack(
    name: string,
    receipts: string[],
    options: NackOptions = {},
    applied?: (results: ItemResult[]) => void,
  ): Promise<ItemResult[]> {
    checkBatchSize(receipts.length);
    const { delayMs } = options;
    const deadLetterNow = checkNackOptions(options);
    if (delayMs !== undefined) checkDelay(delayMs);
    const { clock, store, scheduler, random } = this.context;
    const queue = await this.admin.queue(name);
    const now = clock.now();
    let earliestRetryMs = Number.POSITIVE_INFINITY;
    const deadLetter = await this.admin.deadLetterRoute(queue);
    const { results, deadLettered: deadLetteredCount } = await store.queueNack({
      queue: name,
      receipts,
      now,
      retryDelayMs: (deliveryCount) => {
        const ms = delayMs ?? retryDelayMs(queue.attributes.retry, deliveryCount, random.float);
        earliestRetryMs = Math.min(earliestRetryMs, ms);
        return ms;
      },
      deadLetter,
      ...(deadLetterNow && { deadLetterNow }),
      applied: itemResultsTo(applied),
    });
    deadLettered(this.context, deadLetter, deadLetteredCount);
    const groupMovedOn = queue.kind === "fifo" && deadLetteredCount > 0;
    if (earliestRetryMs === 0 || groupMovedOn) wakeQueue(this.context, name);
    else if (Number.isFinite(earliestRetryMs)) scheduler.offer(name, now + earliestRetryMs);
    return results.map(toItemResult);
  }

  /** Heartbeat: each named lease now ends `visibilityTimeoutMs` from now. */
  async extend(name: string, receipts: string[], visibilityTimeoutMs: number): Promise<ItemResult[]> {
    checkBatchSize(receipts.length);
    if (
      !Number.isInteger(visibilityTimeoutMs) ||
      visibilityTimeoutMs < 0 ||
      visibilityTimeoutMs > limits.visibilityTimeoutMsMax
    ) {
      throw new HopperError(
        "invalid_request",
        `visibilityTimeoutMs must be from 0 to ${limits.visibilityTimeoutMsMax}.`,
      );
    }
    await this.admin.queue(name);
    const leaseExpiresAt = this.context.clock.now() + visibilityTimeoutMs;
    const results = await this.context.store.queueExtend({ queue: name, receipts, leaseExpiresAt });
    // A lease cut short (visibilityTimeoutMs 0 releases the message at once) may wake a waiter.
    this.context.scheduler.offer(name, leaseExpiresAt);
    return results.map(toItemResult);
  }
}
