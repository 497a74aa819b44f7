/**
 * Turns the attributes a client sends into a queue's complete attributes: validates every range
 * (the edge schema checks types; this is the authority on values) and fills the defaults. On update,
 * attributes the client leaves out keep their current values, as SQS's SetQueueAttributes does.
 */
import { HopperError } from "../errors.js";
import { limits, queueDefaults } from "../limits.js";
import type { DeadLetterTarget, OverflowPolicy, QueueAttributes, QueueKind, RetryPolicy } from "./queue.js";

/** The attributes as the API accepts them (API.md "Queues"). */
export interface QueueAttributesInput {
  kind?: QueueKind;
  visibilityTimeoutMs?: number;
  retentionMs?: number;
  delayMs?: number;
  receiveWaitMs?: number;
  maxMessageBytes?: number;
  deadLetter?:
    | { queue: string; maxDeliveries: number }
    | { exchange: string; routingKey?: string; maxDeliveries: number }
    | null;
  retry?: Partial<RetryPolicy>;
  maxDepth?: number | null;
  overflow?: OverflowPolicy;
  dedupWindowMs?: number;
  contentBasedDedup?: boolean;
  pushbackDepth?: number | null;
  pushbackAgeMs?: number | null;
  alerts?: Record<string, number>;
}

/** Attributes that API.md names but this version does not implement yet; refused, never ignored. */
const notYetImplemented = ["alerts"] as const;

export const defaultAttributes: QueueAttributes = {
  visibilityTimeoutMs: queueDefaults.visibilityTimeoutMs,
  retentionMs: queueDefaults.retentionMs,
  delayMs: queueDefaults.delayMs,
  receiveWaitMs: queueDefaults.receiveWaitMs,
  maxMessageBytes: queueDefaults.maxMessageBytes,
  deadLetter: null,
  retry: { ...queueDefaults.retry },
  maxDepth: null,
  overflow: "reject",
  dedupWindowMs: 0,
  contentBasedDedup: false,
  pushbackDepth: null,
  pushbackAgeMs: null,
};

/** A new queue's attributes before the client's: FIFO queues deduplicate by default, as SQS's do. */
export function initialAttributes(kind: QueueKind): QueueAttributes {
  return kind === "fifo"
    ? { ...defaultAttributes, dedupWindowMs: queueDefaults.fifoDedupWindowMs }
    : defaultAttributes;
}

function checkRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new HopperError("invalid_attribute", `${name} must be an integer from ${min} to ${max}.`, {
      attribute: name,
      min,
      max,
    });
  }
}

export function resolveAttributes(
  queueName: string,
  current: QueueAttributes,
  input: QueueAttributesInput,
): QueueAttributes {
  for (const name of notYetImplemented) {
    if (input[name] !== undefined) {
      throw new HopperError("not_implemented", `The attribute ${name} is not implemented yet.`, {
        attribute: name,
      });
    }
  }
  const next: QueueAttributes = {
    visibilityTimeoutMs: input.visibilityTimeoutMs ?? current.visibilityTimeoutMs,
    retentionMs: input.retentionMs ?? current.retentionMs,
    delayMs: input.delayMs ?? current.delayMs,
    receiveWaitMs: input.receiveWaitMs ?? current.receiveWaitMs,
    maxMessageBytes: input.maxMessageBytes ?? current.maxMessageBytes,
    deadLetter:
      input.deadLetter === undefined
        ? current.deadLetter
        : input.deadLetter && resolveDeadLetter(queueName, input.deadLetter),
    retry: { ...current.retry, ...input.retry },
    maxDepth: input.maxDepth === undefined ? current.maxDepth : input.maxDepth,
    overflow: input.overflow ?? current.overflow,
    dedupWindowMs: input.dedupWindowMs ?? current.dedupWindowMs,
    contentBasedDedup: input.contentBasedDedup ?? current.contentBasedDedup,
    pushbackDepth: input.pushbackDepth === undefined ? current.pushbackDepth : input.pushbackDepth,
    pushbackAgeMs: input.pushbackAgeMs === undefined ? current.pushbackAgeMs : input.pushbackAgeMs,
  };
  checkRange("visibilityTimeoutMs", next.visibilityTimeoutMs, 0, limits.visibilityTimeoutMsMax);
  checkRange("retentionMs", next.retentionMs, limits.retentionMsMin, limits.retentionMsMax);
  checkRange("delayMs", next.delayMs, 0, next.retentionMs);
  checkRange("receiveWaitMs", next.receiveWaitMs, 0, limits.waitMsMax);
  checkRange("maxMessageBytes", next.maxMessageBytes, 1, limits.messageBytesMax);
  checkRange("retry.initialDelayMs", next.retry.initialDelayMs, 0, limits.retryDelayMsMax);
  checkRange("retry.maxDelayMs", next.retry.maxDelayMs, next.retry.initialDelayMs, limits.retryDelayMsMax);
  if (!(next.retry.multiplier >= 1 && next.retry.multiplier <= limits.retryMultiplierMax)) {
    throw new HopperError(
      "invalid_attribute",
      `retry.multiplier must be from 1 to ${limits.retryMultiplierMax}.`,
      {
        attribute: "retry.multiplier",
      },
    );
  }
  if (next.maxDepth !== null) checkRange("maxDepth", next.maxDepth, 1, limits.maxDepthMax);
  checkRange("dedupWindowMs", next.dedupWindowMs, 0, limits.dedupWindowMsMax);
  if (next.pushbackDepth !== null) checkRange("pushbackDepth", next.pushbackDepth, 1, limits.maxDepthMax);
  if (next.pushbackAgeMs !== null) checkRange("pushbackAgeMs", next.pushbackAgeMs, 1, next.retentionMs);
  if (next.contentBasedDedup && next.dedupWindowMs === 0) {
    throw new HopperError("invalid_attribute", "contentBasedDedup needs a dedupWindowMs above 0.", {
      attribute: "contentBasedDedup",
    });
  }
  if (next.overflow === "dead-letter-oldest" && !next.deadLetter) {
    throw new HopperError("invalid_attribute", "overflow dead-letter-oldest needs a deadLetter target.", {
      attribute: "overflow",
    });
  }
  if (next.deadLetter) {
    checkRange("deadLetter.maxDeliveries", next.deadLetter.maxDeliveries, 1, limits.maxDeliveriesMax);
    if ("queue" in next.deadLetter && next.deadLetter.queue === queueName) {
      throw new HopperError("invalid_attribute", "A queue cannot be its own dead-letter queue.", {
        attribute: "deadLetter.queue",
      });
    }
  }
  return next;
}

/** A dead-letter exchange routes with the given key, or by default with the queue's own name. */
function resolveDeadLetter(
  queueName: string,
  input: NonNullable<QueueAttributesInput["deadLetter"]>,
): DeadLetterTarget {
  if ("queue" in input) return { queue: input.queue, maxDeliveries: input.maxDeliveries };
  return {
    exchange: input.exchange,
    routingKey: input.routingKey ?? queueName,
    maxDeliveries: input.maxDeliveries,
  };
}

/**
 * The delay before a nacked message is visible again: exponential in the number of deliveries so far,
 * capped, and with full jitter (a uniform draw from [0, delay]) so that retries of a failed burst
 * spread out instead of arriving together.
 */
export function retryDelayMs(policy: RetryPolicy, deliveryCount: number, randomFloat: () => number): number {
  const exponent = Math.max(0, deliveryCount - 1);
  const ceilingMs = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** exponent);
  return policy.jitter === "full" ? Math.floor(randomFloat() * (ceilingMs + 1)) : Math.floor(ceilingMs);
}

/**
 * Why a publish into a queue is refused by its pushback limits, if it is: the queue holds
 * pushbackDepth messages or more, or its oldest message is pushbackAgeMs old or older. The refusal
 * carries retryAfterMs, which the HTTP adapter sends as Retry-After.
 */
export function pushbackRefusal(
  queue: string,
  attributes: QueueAttributes,
  state: { depth: number; oldestPublishedAt: number | null; now: number },
): HopperError | undefined {
  const { pushbackDepth, pushbackAgeMs } = attributes;
  const refuse = (why: string, details: Record<string, number>) =>
    new HopperError("backpressure", `Queue "${queue}" ${why}; retry later.`, {
      queue,
      ...details,
      retryAfterMs: limits.pushbackRetryAfterMs,
    });
  if (pushbackDepth !== null && state.depth >= pushbackDepth) {
    return refuse(`holds ${state.depth} messages (pushbackDepth ${pushbackDepth})`, {
      depth: state.depth,
      pushbackDepth,
    });
  }
  const oldestAgeMs = state.oldestPublishedAt === null ? 0 : state.now - state.oldestPublishedAt;
  if (pushbackAgeMs !== null && oldestAgeMs >= pushbackAgeMs) {
    return refuse(`has a message ${oldestAgeMs} ms old (pushbackAgeMs ${pushbackAgeMs})`, {
      oldestAgeMs,
      pushbackAgeMs,
    });
  }
  return undefined;
}
