/**
 * What the parts of the queue broker share (queue-admin.ts, queue-send.ts, queue-receive.ts,
 * queue-redrive.ts, queue-housekeeping.ts; queues.ts puts them together): the store, the injected
 * clock and randomness, the queues' wake-ups and timers, and the checks that several of them make.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { ReceiptResult } from "../model/message.js";
import type { DeadLetterRoute } from "../model/queue.js";
import type { Random } from "../random.js";
import type { Applied, Store } from "../store/store.js";
import type { Claim } from "./handoffs.js";
import type { Router } from "./router.js";
import type { Scheduler } from "./scheduler.js";
import { queueTopic, type Wakeups } from "./wake.js";

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface QueueContext {
  readonly store: Store;
  readonly clock: Clock;
  readonly random: Random;
  readonly log: Logger;
  /** Resolves dead-letter exchanges; shared with the exchange broker. */
  readonly router: Router;
  /** The queues' wake-ups: a queue's topic (queueTopic) advances whenever messages may have become available. */
  readonly wake: Wakeups<Claim>;
  /** One timer per queue for what falls due in it; its passes are queue-housekeeping.ts's. */
  readonly scheduler: Scheduler;
  /** Set once by stop(): long polls answer at once, housekeeping ends. */
  stopped: boolean;
}

/** Messages of the queue may have become available: its long polls look again. */
export function wakeQueue(context: QueueContext, queue: string): void {
  context.wake.advance(queueTopic(queue));
}

/**
 * Messages arrived in a queue's dead-letter queues: their long polls may take them, and their timers
 * must now cover the messages' retention, so each is looked at at once.
 */
export function deadLettered(context: QueueContext, route: DeadLetterRoute | null, count: number): void {
  if (count === 0 || !route) return;
  for (const target of route.queues) {
    wakeQueue(context, target);
    context.scheduler.offer(target, context.clock.now());
  }
}

/** `ok`, or why one item of a batch (a message, a receipt) was refused. */
export type ItemResult = { ok: true } | { error: HopperError };

const namePattern = new RegExp(limits.namePattern);

export function checkName(name: string): void {
  if (!namePattern.test(name)) {
    throw new HopperError(
      "invalid_name",
      `"${name.slice(0, limits.refusedNameEchoLengthMax)}" is not a valid name.`,
      {
        name: name.slice(0, limits.refusedNameEchoLengthMax),
      },
    );
  }
}

export function checkRoutingKey(routingKey: string): void {
  if (routingKey.length > limits.routingKeyLengthMax) {
    throw new HopperError(
      "invalid_request",
      `Routing keys and patterns are at most ${limits.routingKeyLengthMax} characters.`,
    );
  }
}

export function checkBatchSize(size: number): void {
  if (size < 1 || size > limits.batchSizeMax) {
    throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} items.`, {
      size,
      max: limits.batchSizeMax,
    });
  }
}

export function checkDelay(delayMs: number): void {
  if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > limits.retryDelayMsMax) {
    throw new HopperError("invalid_request", `delayMs must be from 0 to ${limits.retryDelayMsMax}.`);
  }
}

/** A store's `applied` hook that hands its results on as the broker's (toItemResult). */
export function itemResultsTo(applied: ((results: ItemResult[]) => void) | undefined): Applied | undefined {
  return applied && ((results) => applied(results.map(toItemResult)));
}

export function toItemResult(result: ReceiptResult): ItemResult {
  if ("ok" in result) return result;
  return {
    error: new HopperError(
      result.error,
      result.error === "stale_receipt"
        ? "The lease this receipt names is gone: the message was acked, or leased again after the lease ended."
        : undefined,
    ),
  };
}
