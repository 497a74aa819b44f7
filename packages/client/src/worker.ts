import type { HopperClient } from "./client.js";
import { interruptibleWait } from "./clock.js";
import { HopperError, nackOptionsAfter } from "./errors.js";
import { LeaseHeartbeat } from "./lease-heartbeat.js";
import {
  batchSizeMax,
  emptyReceiveIntervalMsMin,
  heartbeatMsDefault,
  leaseMsDefault,
  receiveBackoffMsMax,
  receiveBackoffMsMin,
  receiveWaitMsDefault,
  receiveWaitMsMax,
  workerConcurrencyMax,
} from "./limits.js";
import { type ItemResult, isItemError, type ReceivedMessage } from "./types.js";

export interface HandlerContext {
  /** Fires, with a `stale_receipt` HopperError as its reason, when the message's lease is lost. */
  signal: AbortSignal;
}

export type MessageHandler = (message: ReceivedMessage, context: HandlerContext) => Promise<void> | void;

export interface WorkerOptions {
  /** How many handlers may run at once, 1–1000. Default 1. */
  concurrency?: number;
  /** The lease length to ask for. Default: the queue's `visibilityTimeoutMs`. */
  visibilityTimeoutMs?: number;
  /** How often to extend a running handler's lease. Default: a third of the lease length, or 10 s. */
  heartbeatMs?: number;
  /** Long poll of each receive, 0–20000. Default 20000. */
  waitMs?: number;
  /** Receives every failure: receive, extend, ack and nack errors, handler throws, lost leases. */
  onError?: (error: unknown, message?: ReceivedMessage) => void;
  /**
   * "pull" (default): long-poll receives over HTTP, with heartbeats. "push": the server pushes over a
   * WebSocket (`client.consume`); `visibilityTimeoutMs`, `heartbeatMs` and `waitMs` do not apply.
   */
  mode?: "pull" | "push";
  /** Push mode: the most messages held at once, 1–1000. Default: `concurrency`. */
  prefetch?: number;
}

export interface Worker {
  /** Stops receiving at once, lets running handlers finish and settles their messages. Idempotent. */
  stop(): Promise<void>;
  /** Resolves once the worker has stopped and every message it held is acked, nacked or released. */
  readonly done: Promise<void>;
}

interface WorkerSettings {
  concurrency: number;
  visibilityTimeoutMs: number | undefined;
  leaseMs: number;
  heartbeatMs: number;
  /** True when the caller chose the heartbeat; otherwise it follows the lease length. */
  heartbeatMsGiven: boolean;
  waitMs: number;
  onError: (error: unknown, message?: ReceivedMessage) => void;
}

/**
 * Runs `handler` for each message of `queue` with at most `concurrency` at once: acks on success,
 * nacks on a throw (the queue's retry policy picks the delay; an UnrecoverableError dead-letters the
 * message at once instead), and extends each lease while its handler runs.
 */
export function createWorker(
  client: HopperClient,
  queue: string,
  handler: MessageHandler,
  options: WorkerOptions = {},
): Worker {
  if (options.mode === "push") {
    const prefetch = options.prefetch ?? options.concurrency ?? 1;
    return client.consume(queue, handler, { prefetch, ...(options.onError && { onError: options.onError }) });
  }
  const worker = new QueueWorker(client, queue, handler, resolveSettings(options));
  return { stop: () => worker.stop(), done: worker.done };
}

class QueueWorker {
  readonly done: Promise<void>;
  private stopping = false;
  private readonly running = new Set<Promise<void>>();
  private pollController: AbortController | undefined;
  private wakeSlotWaiter: (() => void) | undefined;
  private wakePause: (() => void) | undefined;

  constructor(
    private readonly client: HopperClient,
    private readonly queue: string,
    private readonly handler: MessageHandler,
    private readonly settings: WorkerSettings,
  ) {
    this.done = this.run();
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.pollController?.abort();
      this.wakeSlotWaiter?.();
      this.wakePause?.();
    }
    return this.done;
  }

  private async run(): Promise<void> {
    if (this.settings.visibilityTimeoutMs === undefined) await this.learnLeaseLength();
    let failuresInRow = 0;
    while (!this.stopping) {
      const freeSlots = this.settings.concurrency - this.running.size;
      if (freeSlots <= 0) {
        await this.waitForSlot();
        continue;
      }
      const startedAt = this.client.clock.now();
      let messages: ReceivedMessage[];
      try {
        messages = await this.receive(Math.min(freeSlots, batchSizeMax));
        failuresInRow = 0;
      } catch (error) {
        if (this.stopping) break;
        failuresInRow += 1;
        this.report(error);
        await this.pause(backoffMs(failuresInRow));
        continue;
      }
      messages.forEach((message, index) => {
        this.track(index < freeSlots && !this.stopping ? this.handle(message) : this.release(message));
      });
      const elapsedMs = this.client.clock.now() - startedAt;
      if (messages.length === 0 && elapsedMs < emptyReceiveIntervalMsMin) {
        await this.pause(emptyReceiveIntervalMsMin - elapsedMs);
      }
    }
    await Promise.all(this.running);
  }

  /**
   * Reads the queue's lease length, so that heartbeats come well inside it: a queue with a 1 s lease
   * would otherwise lose every lease before the default 10 s heartbeat. If the queue cannot be read,
   * the defaults stay and the failure is reported.
   */
  private async learnLeaseLength(): Promise<void> {
    try {
      const { attributes } = await this.client.getQueue(this.queue);
      const leaseMs = attributes.visibilityTimeoutMs;
      if (leaseMs === undefined || leaseMs < 2) return;
      this.settings.leaseMs = leaseMs;
      this.settings.visibilityTimeoutMs = leaseMs;
      if (!this.settings.heartbeatMsGiven) this.settings.heartbeatMs = Math.max(1, Math.floor(leaseMs / 3));
    } catch (error) {
      this.report(error);
    }
  }

  private async receive(max: number): Promise<ReceivedMessage[]> {
    const controller = new AbortController();
    this.pollController = controller;
    try {
      const { waitMs, visibilityTimeoutMs } = this.settings;
      return await this.client.receive(this.queue, {
        max,
        waitMs,
        visibilityTimeoutMs,
        signal: controller.signal,
      });
    } finally {
      this.pollController = undefined;
    }
  }

  /** Holds a slot until `work` settles; `work` never rejects. */
  private track(work: Promise<void>): void {
    const tracked = work.finally(() => {
      this.running.delete(tracked);
      this.wakeSlotWaiter?.();
    });
    this.running.add(tracked);
  }

  private async handle(message: ReceivedMessage): Promise<void> {
    const { leaseMs, heartbeatMs } = this.settings;
    const report = (error: unknown) => this.report(error, message);
    const heartbeat = new LeaseHeartbeat({
      client: this.client,
      queue: this.queue,
      receipt: message.receipt,
      leaseMs,
      heartbeatMs,
      report,
    });
    let failed = false;
    let failure: unknown;
    try {
      await this.handler(message, { signal: heartbeat.signal });
    } catch (error) {
      failed = true;
      failure = error;
      if (!heartbeat.leaseLost) report(error);
    }
    heartbeat.stop();
    // A lost lease may already be held by another consumer; its receipt can no longer ack or nack.
    if (heartbeat.leaseLost) return;
    const settled = failed
      ? this.client.nackLater(this.queue, message.receipt, nackOptionsAfter(failure))
      : this.client.ackLater(this.queue, message.receipt);
    await this.reportItemResult(settled, message);
  }

  /** Gives back a message the worker will not run, so it is delivered again at once. */
  private async release(message: ReceivedMessage): Promise<void> {
    await this.reportItemResult(this.client.nackLater(this.queue, message.receipt, { delayMs: 0 }), message);
  }

  private async reportItemResult(answer: Promise<ItemResult>, message: ReceivedMessage): Promise<void> {
    try {
      const result = await answer;
      if (isItemError(result)) this.report(HopperError.fromItem(result.error, 200), message);
    } catch (error) {
      this.report(error, message);
    }
  }

  private report(error: unknown, message?: ReceivedMessage): void {
    try {
      this.settings.onError(error, message);
    } catch {
      // An onError that throws must not stop the worker or leave a message unsettled.
    }
  }

  private waitForSlot(): Promise<void> {
    return new Promise((resolve) => {
      this.wakeSlotWaiter = () => {
        this.wakeSlotWaiter = undefined;
        resolve();
      };
    });
  }

  /** Waits `delayMs` on the client's clock, or until `stop()`. */
  private pause(delayMs: number): Promise<void> {
    const { wait, wake } = interruptibleWait(this.client.clock, delayMs);
    this.wakePause = wake;
    return wait.then(() => {
      this.wakePause = undefined;
    });
  }
}

/** Capped exponential back-off: 250 ms, 500 ms, 1 s, … up to 30 s. */
function backoffMs(failuresInRow: number): number {
  const exponent = Math.min(failuresInRow - 1, 30);
  return Math.min(receiveBackoffMsMax, receiveBackoffMsMin * 2 ** exponent);
}

function resolveSettings(options: WorkerOptions): WorkerSettings {
  const concurrency = options.concurrency ?? 1;
  assertIntegerInRange("concurrency", concurrency, 1, workerConcurrencyMax);
  const waitMs = options.waitMs ?? receiveWaitMsDefault;
  assertIntegerInRange("waitMs", waitMs, 0, receiveWaitMsMax);
  const { visibilityTimeoutMs } = options;
  if (visibilityTimeoutMs !== undefined) {
    assertIntegerInRange("visibilityTimeoutMs", visibilityTimeoutMs, 1, Number.MAX_SAFE_INTEGER);
  }
  const leaseMs = visibilityTimeoutMs ?? leaseMsDefault;
  const heartbeatMs =
    options.heartbeatMs ??
    (visibilityTimeoutMs === undefined
      ? heartbeatMsDefault
      : Math.max(1, Math.floor(visibilityTimeoutMs / 3)));
  assertIntegerInRange("heartbeatMs", heartbeatMs, 1, Number.MAX_SAFE_INTEGER);
  if (heartbeatMs >= leaseMs) {
    throw new RangeError(`heartbeatMs (${heartbeatMs}) must be shorter than the lease (${leaseMs} ms)`);
  }
  const onError = options.onError ?? ((error: unknown) => console.error("hopper worker:", error));
  const heartbeatMsGiven = options.heartbeatMs !== undefined;
  return { concurrency, visibilityTimeoutMs, leaseMs, heartbeatMs, heartbeatMsGiven, waitMs, onError };
}

function assertIntegerInRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}
