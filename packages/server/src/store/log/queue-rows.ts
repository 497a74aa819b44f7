/**
 * The log store's queue rows (embedded/rows.ts): the state in memory (log-state.ts), changed only
 * through its primitives, each of which records its inverse and its log record, and read through a
 * queue's indexes (queue-state.ts). What the rows mean is in the engine (embedded/queues.ts).
 */
import { HopperError, invariant } from "../../errors.js";
import type { MessageState, StoredMessage } from "../../model/message.js";
import type * as model from "../../model/queue.js";
import type { LeaseWrite, MessageInsert, MessageSlot, QueueRows } from "../embedded/rows.js";
import { removeBindingsTo } from "./exchange-rows.js";
import type { LogState } from "./log-state.js";
import {
  byVisibility,
  compareText,
  leaseCandidates,
  leaseOf,
  type Message,
  oldest,
  type QueueState,
  scanDepth,
  select,
  toQueueRecord,
  toStored,
} from "./queue-state.js";

export class LogQueueRows implements QueueRows<QueueState, Message> {
  constructor(
    private readonly state: LogState,
    /** The most bytes of messages the store holds (limits.logStoreBytesMax). */
    private readonly bytesMax: number,
  ) {}

  queue(name: string): QueueState | undefined {
    return this.state.queues.get(name);
  }

  queueRecord(queue: QueueState): model.QueueRecord {
    return toQueueRecord(queue);
  }

  private page(page: { after: string; limit: number | undefined }): QueueState[] {
    const queues = [...this.state.queues.values()]
      .filter((queue) => queue.name > page.after)
      .sort((a, b) => compareText(a.name, b.name));
    return queues.slice(0, page.limit ?? queues.length);
  }

  queueRecords(page: { after: string; limit: number | undefined }): model.QueueRecord[] {
    return this.page(page).map(toQueueRecord);
  }

  queuesWithDepth(
    page: { after: string; limit: number | undefined },
    now: number,
  ): { queue: model.QueueRecord; depth: model.QueueDepth }[] {
    return this.page(page).map((queue) => ({ queue: toQueueRecord(queue), depth: scanDepth(queue, now) }));
  }

  queueCounters(queue: QueueState): model.QueueCounters {
    return queue.counters;
  }

  queueCount(): number {
    return this.state.queues.size;
  }

  queueInsert(name: string, kind: model.QueueKind, attributes: model.QueueAttributes, now: number): void {
    this.state.createQueue(name, kind, attributes, now);
  }

  queueSetAttributes(queue: QueueState, attributes: model.QueueAttributes): void {
    this.state.setAttributes(queue, attributes);
  }

  queueRemove(queue: QueueState): number {
    const rest = [...queue.messages.values()];
    for (const message of rest) this.state.deleteMessage(message);
    this.state.dropQueue(queue);
    removeBindingsTo(this.state, { kind: "queue", name: queue.name });
    return rest.length;
  }

  deadLetterSources(name: string): string[] {
    return this.page({ after: "", limit: undefined })
      .filter((queue) => {
        const target = queue.attributes.deadLetter;
        return queue.name !== name && target !== null && "queue" in target && target.queue === name;
      })
      .map((queue) => queue.name);
  }

  exchangeExists(name: string): boolean {
    return this.state.exchanges.has(name);
  }

  countersAdd(queue: QueueState, deltas: Partial<model.QueueCounters>): void {
    this.state.addCounters(queue, deltas);
  }

  lastSeq(): number {
    return this.state.lastSeq;
  }

  dedupLookup(queue: QueueState, dedupId: string, now: number): string | undefined {
    const remembered = queue.dedup.get(dedupId);
    return remembered && remembered.expiresAt > now ? remembered.messageId : undefined;
  }

  dedupRemember(queue: QueueState, dedupId: string, messageId: string, expiresAt: number): void {
    this.state.setDedup(queue, dedupId, messageId, expiresAt);
  }

  dedupForgetExpired(queue: QueueState, now: number): void {
    // A Map may lose entries while it is walked.
    for (const [dedupId, entry] of queue.dedup) {
      if (entry.expiresAt <= now) this.state.forgetDedup(queue, dedupId);
    }
  }

  /** Every record is checked by its CRC as the log recovers, so a body here is never corrupt. */
  insert(queue: QueueState, inserts: readonly MessageInsert<Message>[]): number[] {
    return inserts.map(({ message, lease }) => this.state.insertMessage(queue, message, lease).seq);
  }

  delete(_queue: QueueState, messages: readonly Message[]): void {
    for (const message of messages) this.state.deleteMessage(message);
  }

  deleteStep(queue: QueueState, lastSeq: number, limit: number): number {
    const step: Message[] = [];
    for (const message of queue.messages.values()) {
      if (step.length >= limit) break;
      if (message.seq <= lastSeq) step.push(message);
    }
    for (const message of step) this.state.deleteMessage(message);
    return step.length;
  }

  deleteByReceipt(queue: QueueState, receipt: { seq: number; leaseToken: number }): boolean {
    const message = this.byReceipt(queue, receipt);
    if (message) this.state.deleteMessage(message);
    return message !== undefined;
  }

  deleteExpired(queue: QueueState, expiredBefore: number, max: number): number {
    const expired = oldest(queue, (message) => message.publishedAt <= expiredBefore, max);
    for (const message of expired) this.state.deleteMessage(message);
    return expired.length;
  }

  byReceipt(queue: QueueState, receipt: { seq: number; leaseToken: number }): Message | undefined {
    const message = this.state.bySeq.get(receipt.seq);
    return message && message.queue === queue && message.leaseToken === receipt.leaseToken
      ? message
      : undefined;
  }

  oldest(queue: QueueState, limit: number): Message[] {
    return oldest(queue, () => true, limit);
  }

  candidates(queue: QueueState, now: number, expiredBefore: number, limit: number): Message[] {
    return leaseCandidates(queue, now, expiredBefore, limit);
  }

  countInFlight(queue: QueueState, now: number): number {
    let count = 0;
    for (const message of queue.leased) if (message.visibleAt > now) count++;
    return count;
  }

  lease(_queue: QueueState, messages: readonly Message[], lease: LeaseWrite): void {
    for (const message of messages) {
      this.state.setLease(message, {
        visibleAt: lease.leaseExpiresAt,
        leaseToken: lease.tokenBase + message.seq,
        deliveryCount: message.deliveryCount + 1,
        firstDeliveredAt: message.firstDeliveredAt ?? lease.now,
      });
    }
  }

  release(_queue: QueueState, message: Message, visibleAt: number): void {
    this.state.setLease(message, {
      visibleAt,
      leaseToken: null,
      deliveryCount: message.deliveryCount,
      firstDeliveredAt: message.firstDeliveredAt,
    });
  }

  extendLease(_queue: QueueState, message: Message, leaseExpiresAt: number): void {
    this.state.setLease(message, { ...leaseOf(message), visibleAt: leaseExpiresAt });
  }

  markCorrupt(): void {
    invariant(false, "the log store checks every record as it recovers: no body is corrupt");
  }

  bodyIntact(): boolean {
    return true;
  }

  markedCorrupt(): boolean {
    return false;
  }

  stored(message: Message): StoredMessage {
    return toStored(message);
  }

  peek(queue: QueueState, state: MessageState, now: number, limit: number): Message[] {
    const filter = {
      available: (message: Message) => message.visibleAt <= now,
      delayed: (message: Message) => message.visibleAt > now && message.leaseToken === null,
      "in-flight": (message: Message) => message.visibleAt > now && message.leaseToken !== null,
    }[state];
    return select(queue, filter, byVisibility, limit);
  }

  movable(queue: QueueState, now: number, limit: number): Message[] {
    return oldest(queue, (message) => message.visibleAt <= now || message.leaseToken === null, limit);
  }

  inFlight(queue: QueueState, now: number): MessageSlot[] {
    return [...queue.leased].filter((message) => message.visibleAt > now);
  }

  exhausted(
    queue: QueueState,
    window: { visibleFrom: number; now: number; maxDeliveries: number; limit: number },
  ): Message[] {
    const exhausted: Message[] = [];
    for (const message of queue.leased) {
      if (exhausted.length >= window.limit) break;
      if (
        message.visibleAt >= window.visibleFrom &&
        message.visibleAt <= window.now &&
        message.deliveryCount >= window.maxDeliveries
      )
        exhausted.push(message);
    }
    return exhausted;
  }

  depth(queue: QueueState, now: number): model.QueueDepth {
    return scanDepth(queue, now);
  }

  /** A scan of the queue's messages (docs/log-store.md "Costs"). */
  nextEvents(
    queue: QueueState,
    now: number,
  ): { nextVisibleAt: number | null; oldestPublishedAt: number | null } {
    let next: number | null = null;
    let oldestPublishedAt: number | null = null;
    for (const message of queue.messages.values()) {
      if (message.visibleAt > now && (next === null || message.visibleAt < next)) next = message.visibleAt;
      if (oldestPublishedAt === null || message.publishedAt < oldestPublishedAt)
        oldestPublishedAt = message.publishedAt;
    }
    return { nextVisibleAt: next, oldestPublishedAt };
  }

  capacityMark(): number {
    return this.state.liveBytes;
  }

  /**
   * The state lives in memory, so its size is bounded (bytesMax): a send whose messages, once stored
   * (each counted as it is linked), take what is held past it is refused, and the call undone whole.
   * Dead letters and redrives move what is held already and are not refused.
   */
  capacityCheck(held: number): void {
    if (this.state.liveBytes <= this.bytesMax) return;
    throw new HopperError(
      "store_full",
      `The log store holds ${held} of at most ${this.bytesMax} bytes of messages.`,
      {
        bytes: held,
        bytesMax: this.bytesMax,
      },
    );
  }
}
