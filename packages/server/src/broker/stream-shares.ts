/**
 * What a stream's share groups do at the broker (docs/streams.md "Share groups"): checks every input,
 * fills the defaults of a share group's attributes, and makes a receive wait (`waitMs`) on the stream's
 * topic (wake.ts) until records are appended, a nack makes one visible, or the first lease in flight
 * ends. What a share group means is model/stream-share.ts's, applied by the store.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits, queueDefaults } from "../limits.js";
import type { ShareAttributes, ShareInfo, sharePending } from "../model/stream-share.js";
import type { ShareRecord } from "../store/stream-store.js";
import { checkName, type ItemResult, toItemResult } from "./queue-context.js";
import { type StreamBrokerStore, streamTopic } from "./stream-groups.js";
import type { Wakeups } from "./wake.js";

export interface ShareReceiveOptions {
  max?: number | undefined;
  waitMs?: number | undefined;
  visibilityTimeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

function checkCount(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new HopperError("invalid_request", `${name} must be an integer from ${min} to ${max}.`, {
      [name]: value,
    });
}

function checkReceipts(receipts: readonly string[]): void {
  checkCount("receipts", receipts.length, 1, limits.batchSizeMax);
}

export class StreamShareBroker {
  /** Records dead-lettered by each stream's share groups since the process started, for /metrics. */
  readonly deadLettered = new Map<string, number>();

  constructor(
    private readonly store: StreamBrokerStore,
    private readonly clock: Clock,
    private readonly wake: Wakeups,
    private readonly newId: () => string,
    private readonly stopped: () => boolean,
  ) {}

  /** Creates the share group or updates its attributes; omitted ones keep their values. */
  async putShare(
    name: string,
    group: string,
    input: Partial<Omit<ShareAttributes, "deadLetter">> & { deadLetter?: ShareAttributes["deadLetter"] },
  ): Promise<{ created: boolean; share: ShareInfo }> {
    checkName(name);
    checkName(group);
    const current = (
      await this.store
        .streamSharePending({ name, group, limit: 1, now: this.clock.now() })
        .catch((error: unknown) => {
          if (error instanceof HopperError && error.code === "group_not_found") return undefined;
          throw error;
        })
    )?.share.attributes;
    const attributes: ShareAttributes = {
      visibilityTimeoutMs:
        input.visibilityTimeoutMs ?? current?.visibilityTimeoutMs ?? queueDefaults.visibilityTimeoutMs,
      deadLetter: input.deadLetter === undefined ? (current?.deadLetter ?? null) : input.deadLetter,
      start: input.start ?? current?.start ?? "earliest",
    };
    checkCount("visibilityTimeoutMs", attributes.visibilityTimeoutMs, 0, limits.visibilityTimeoutMsMax);
    if (attributes.deadLetter) {
      checkName(attributes.deadLetter.queue);
      checkCount("deadLetter.maxDeliveries", attributes.deadLetter.maxDeliveries, 1, limits.maxDeliveriesMax);
    }
    return this.store.streamShareUpsert({ name, group, attributes, now: this.clock.now() });
  }

  /**
   * Leases up to `max` records: those whose lease ended first, then new ones. With `waitMs` and none
   * to hand out, waits for an append, a nack, or the end of the first lease in flight.
   */
  async receive(name: string, group: string, options: ShareReceiveOptions): Promise<ShareRecord[]> {
    checkName(name);
    checkName(group);
    const max = options.max ?? 1;
    checkCount("max", max, 1, limits.receiveMax);
    const waitMs = options.waitMs ?? 0;
    checkCount("waitMs", waitMs, 0, limits.waitMsMax);
    const { attributes } = (
      await this.store.streamSharePending({ name, group, limit: 1, now: this.clock.now() })
    ).share;
    const leaseMs = options.visibilityTimeoutMs ?? attributes.visibilityTimeoutMs;
    checkCount("visibilityTimeoutMs", leaseMs, 0, limits.visibilityTimeoutMsMax);
    const topic = streamTopic(name);
    const deadline = this.clock.now() + waitMs;
    // Bounded: each turn answers, or waits until the head moves, a lease ends or the deadline passes.
    for (;;) {
      const position = this.wake.head(topic);
      const now = this.clock.now();
      const received = await this.store.streamShareReceive({
        name,
        group,
        max,
        leaseMs,
        inFlightMax: limits.streamShareInFlightMax,
        newId: this.newId,
        now,
      });
      this.countDeadLetters(name, received.deadLettered);
      const leftMs = deadline - this.clock.now();
      if (received.records.length > 0 || leftMs <= 0 || this.stopped()) return received.records;
      const untilLeaseEnds =
        received.nextVisibleAt === null ? leftMs : Math.max(1, received.nextVisibleAt - now);
      const end = await this.wake.waitAfter(topic, position, {
        timeoutMs: Math.min(leftMs, untilLeaseEnds),
        signal: options.signal,
      });
      if (end === "cancelled" || this.stopped()) return received.records;
    }
  }

  async ack(name: string, group: string, receipts: readonly string[]): Promise<ItemResult[]> {
    checkName(name);
    checkName(group);
    checkReceipts(receipts);
    return (await this.store.streamShareAck({ name, group, receipts, now: this.clock.now() })).map(
      toItemResult,
    );
  }

  /** Nack: visible again after `delayMs` (default at once), or dead-lettered past maxDeliveries. */
  async nack(name: string, group: string, receipts: readonly string[], delayMs = 0): Promise<ItemResult[]> {
    checkName(name);
    checkName(group);
    checkReceipts(receipts);
    checkCount("delayMs", delayMs, 0, limits.retryDelayMsMax);
    const { results, deadLettered } = await this.store.streamShareNack({
      name,
      group,
      receipts,
      delayMs,
      newId: this.newId,
      now: this.clock.now(),
    });
    this.countDeadLetters(name, deadLettered);
    // Waiting receives look again: a record nacked without a delay is there for them now.
    this.wake.advance(streamTopic(name));
    return results.map(toItemResult);
  }

  async extend(
    name: string,
    group: string,
    receipts: readonly string[],
    visibilityTimeoutMs: number,
  ): Promise<ItemResult[]> {
    checkName(name);
    checkName(group);
    checkReceipts(receipts);
    checkCount("visibilityTimeoutMs", visibilityTimeoutMs, 0, limits.visibilityTimeoutMsMax);
    const now = this.clock.now();
    const results = await this.store.streamShareExtend({
      name,
      group,
      receipts,
      leaseMs: visibilityTimeoutMs,
      now,
    });
    return results.map(toItemResult);
  }

  pending(
    name: string,
    group: string,
    limit: number = limits.streamReadLimitDefault,
  ): Promise<{
    share: ShareInfo;
    pending: ReturnType<typeof sharePending>;
  }> {
    checkName(name);
    checkName(group);
    checkCount("limit", limit, 1, limits.streamSharePendingMax);
    return this.store.streamSharePending({ name, group, limit, now: this.clock.now() });
  }

  private countDeadLetters(stream: string, count: number): void {
    if (count > 0) this.deadLettered.set(stream, (this.deadLettered.get(stream) ?? 0) + count);
  }
}
