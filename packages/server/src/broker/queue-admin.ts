/**
 * Queue administration: create, update, read, list and delete queues, their stats, peek and purge;
 * the cache of queue records the other parts read attributes from; and what a queue's attributes
 * resolve to (its dead-letter route, its send policy).
 */
import { HopperError, queueKindMismatch, queueNotFound } from "../errors.js";
import { limits } from "../limits.js";
import type { MessageState, StoredMessage } from "../model/message.js";
import { type SendPolicy, sendPolicyOf } from "../model/policies.js";
import type {
  DeadLetterRoute,
  QueueAttributes,
  QueueCounters,
  QueueDepth,
  QueueKind,
  QueueRecord,
} from "../model/queue.js";
import {
  initialAttributes,
  type QueueAttributesInput,
  resolveAttributes,
} from "../model/queue-attributes.js";
import type { QueueListPage } from "../store/store.js";
import { checkName, checkRoutingKey, type QueueContext } from "./queue-context.js";

/** A queue's stats: its depth by state, its oldest message's age, its consumers, and its counters. */
export interface QueueStats extends QueueCounters {
  available: number;
  delayed: number;
  inFlight: number;
  /** Messages whose body failed its checksum, kept without a dead-letter target (QueueDepth.corrupt). */
  corrupt: number;
  oldestMessageAgeMs: number;
  consumers: number;
}

export interface QueueInfo {
  name: string;
  kind: QueueKind;
  attributes: QueueAttributes;
  stats: QueueStats;
}

export class QueueAdmin {
  /** Queue records by name, read once and dropped when the queue changes (here or on another node). */
  private readonly records = new Map<string, QueueRecord>();
  /** Consumers per queue, for stats: receives in progress and live push consumers. */
  private readonly consumers = new Map<string, number>();
  /** Messages that left with their deleted queue; the queue's own counters went with it. */
  removedWithDeletedQueues = 0;

  constructor(
    private readonly context: QueueContext,
    /** Told after a queue was deleted here, so that its timers and waits end (queue-housekeeping.ts). */
    private readonly onDeleted: (name: string) => void,
  ) {}

  /** The queue's record, from the cache or the store; queue_not_found if there is none. */
  async queue(name: string): Promise<QueueRecord> {
    const cached = this.records.get(name);
    if (cached) return cached;
    const stored = await this.context.store.queueGet({ name });
    if (!stored) throw queueNotFound(name);
    this.records.set(name, stored);
    return stored;
  }

  /** The queue, or the catalog error that says why there is none. */
  async queueOrError(name: string): Promise<QueueRecord | HopperError> {
    try {
      return await this.queue(name);
    } catch (error) {
      if (error instanceof HopperError) return error;
      throw error;
    }
  }

  /** Keeps a record just read from the store. */
  remember(queue: QueueRecord): void {
    this.records.set(queue.name, queue);
  }

  /** Drops the cached record of one queue (it changed), or of every queue (changes may have been missed). */
  drop(name?: string): void {
    if (name === undefined) this.records.clear();
    else this.records.delete(name);
  }

  async putQueue(name: string, input: QueueAttributesInput): Promise<{ created: boolean; queue: QueueInfo }> {
    checkName(name);
    if (input.deadLetter)
      checkName("queue" in input.deadLetter ? input.deadLetter.queue : input.deadLetter.exchange);
    if (input.deadLetter && "routingKey" in input.deadLetter && input.deadLetter.routingKey !== undefined) {
      checkRoutingKey(input.deadLetter.routingKey);
    }
    const { store, clock, scheduler } = this.context;
    const existing = await store.queueGet({ name });
    const kind = input.kind ?? existing?.kind ?? "standard";
    if (existing && existing.kind !== kind) {
      throw queueKindMismatch(name, existing.kind);
    }
    const attributes = resolveAttributes(name, existing?.attributes ?? initialAttributes(kind), input);
    const { created, queue } = await store.queueUpsert({ name, kind, attributes, now: clock.now() });
    this.records.set(name, queue);
    scheduler.offer(name, clock.now());
    return { created, queue: await this.describe(queue) };
  }

  async getQueue(name: string): Promise<QueueInfo> {
    const queue = await this.context.store.queueGet({ name });
    if (!queue) throw queueNotFound(name);
    return this.describe(queue);
  }

  /** Every queue in name order, read a page at a time (queuePages). */
  async listQueues(): Promise<QueueInfo[]> {
    const queues: QueueInfo[] = [];
    for await (const page of this.queuePages()) queues.push(...page);
    return queues;
  }

  /**
   * The queues in name order, `limits.listQueuesPerTurn` at a time (one listing statement each),
   * with a turn of the event loop between pages: listing 10,000 queues lets other requests run every
   * few milliseconds. Each queue's figures come from one snapshot; pages are read moments apart.
   */
  async *queuePages(): AsyncGenerator<QueueInfo[]> {
    const limit = limits.listQueuesPerTurn;
    let after: string | undefined;
    // Bounded as every loop is: no server holds more than queuesMax queues.
    for (let pages = 0; pages <= limits.queuesMax / limit; pages++) {
      const page = await this.listPage(after === undefined ? { limit } : { after, limit });
      yield page;
      const last = page.at(-1);
      if (page.length < limit || last === undefined) return;
      after = last.name;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private async listPage(page: QueueListPage): Promise<QueueInfo[]> {
    const now = this.context.clock.now();
    const listed = await this.context.store.queueListWithDepth({ ...page, now });
    return listed.map(({ queue, depth }) => this.info(queue, depth, now));
  }

  async deleteQueue(name: string): Promise<{ removed: number }> {
    const result = await this.context.store.queueDelete({ name });
    // The bindings to the queue went with it.
    this.context.router.invalidate();
    this.removedWithDeletedQueues += result.removed;
    this.records.delete(name);
    this.onDeleted(name);
    return result;
  }

  async stats(name: string): Promise<QueueStats> {
    return (await this.getQueue(name)).stats;
  }

  async peek(name: string, state: MessageState, limit: number): Promise<StoredMessage[]> {
    await this.queue(name);
    return this.context.store.queuePeek({ queue: name, state, limit, now: this.context.clock.now() });
  }

  async purge(name: string): Promise<{ purged: number }> {
    await this.queue(name);
    return this.context.store.queuePurge({ queue: name });
  }

  /**
   * Counts a consumer of the queue for stats: a receive call in progress, or a push consumer while it
   * lives. Every consumerOpened is matched by one consumerClosed.
   */
  consumerOpened(name: string): void {
    this.consumers.set(name, (this.consumers.get(name) ?? 0) + 1);
  }

  consumerClosed(name: string): void {
    const left = (this.consumers.get(name) ?? 1) - 1;
    if (left > 0) this.consumers.set(name, left);
    else this.consumers.delete(name);
  }

  /** The queues a queue's dead letters go to now: its dead-letter queue, or where its exchange routes. */
  async deadLetterRoute(queue: QueueRecord): Promise<DeadLetterRoute | null> {
    const target = queue.attributes.deadLetter;
    if (!target) return null;
    if ("queue" in target) return { queues: [target.queue], maxDeliveries: target.maxDeliveries };
    // A dead-letter exchange that routes back to the source queue would put the message back with a
    // fresh delivery count, for ever: the source is never one of its own dead-letter queues.
    const queues = (await this.context.router.route(target.exchange, target.routingKey)).filter(
      (name) => name !== queue.name,
    );
    return { queues, maxDeliveries: target.maxDeliveries };
  }

  /** What a send into the queue applies: its deduplication and overflow policy. */
  async sendPolicy(queue: QueueRecord): Promise<SendPolicy> {
    const needsRoute =
      queue.attributes.maxDepth !== null && queue.attributes.overflow === "dead-letter-oldest";
    return sendPolicyOf(queue.attributes, needsRoute ? await this.deadLetterRoute(queue) : null);
  }

  private async describe(queue: QueueRecord): Promise<QueueInfo> {
    const now = this.context.clock.now();
    return this.info(queue, await this.context.store.queueDepth({ name: queue.name, now }), now);
  }

  private info(queue: QueueRecord, depth: QueueDepth, now: number): QueueInfo {
    return {
      name: queue.name,
      kind: queue.kind,
      attributes: queue.attributes,
      stats: {
        available: depth.available,
        delayed: depth.delayed,
        inFlight: depth.inFlight,
        corrupt: depth.corrupt,
        oldestMessageAgeMs: depth.oldestPublishedAt === null ? 0 : Math.max(0, now - depth.oldestPublishedAt),
        consumers: this.consumers.get(queue.name) ?? 0,
        ...queue.counters,
      },
    };
  }
}
