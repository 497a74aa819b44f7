/**
 * The Store of the two embedded stores, written once: every queue and exchange method runs the
 * engine (queues.ts, exchanges.ts) over the store's rows, inside the store's own write or read
 * (`EmbeddedRunner`: SQLite's group commit, the log store's commits). One process owns an embedded
 * store, so its cluster link is trivial: no events, always the leader, no one to tell.
 */

import { limits } from "../../limits.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type { InboxRecord, RecipientState } from "../../model/inbox.js";
import type { LeasedMessage, MessageState, ReceiptResult, StoredMessage } from "../../model/message.js";
import { noSendPolicy } from "../../model/policies.js";
import type { QueueAttributes, QueueDepth, QueueKind, QueueRecord } from "../../model/queue.js";
import type { Random } from "../../random.js";
import type { InboxStore } from "../inbox-store.js";
import type { QueueStore } from "../queue-store.js";
import type {
  Applied,
  QueueListPage,
  QueueSend,
  SendOutcome,
  Store,
  StoreEvent,
  StreamAppendCopy,
} from "../store.js";
import type { StreamStore } from "../stream-store.js";
import { EmbeddedExchanges } from "./exchanges.js";
import type { InboxRows, InboxSlot } from "./inbox-rows.js";
import { EmbeddedInboxes } from "./inboxes.js";
import { EmbeddedQueues, type LeaseOutcome } from "./queues.js";
import type { ExchangeRows, ExchangeSlot, MessageSlot, QueueRows, QueueSlot } from "./rows.js";
import { EmbeddedStreamGroups } from "./stream-groups.js";
import type { StreamRows, StreamSlot } from "./stream-rows.js";
import { EmbeddedStreamShares } from "./stream-shares.js";
import { EmbeddedStreams } from "./streams.js";

/** How a store runs the engine's work: each call one atomic write, or a read of committed state. */
export interface EmbeddedRunner {
  /** Runs `apply` as one write; answers once it is durable. `weight`: how many messages it writes
   * (SQLite bounds a group commit by it). `applied`: called once the store's state holds the result,
   * before it is durable (the log store; Store's `Applied`). */
  write<T>(apply: () => T, options?: { weight?: number; applied?: (result: T) => void }): Promise<T>;
  /** A lease: the log store answers once the messages it hands out are durable, before its own record
   * is (docs/log-store.md, rule 4); with autoAck it waits for the deletes. */
  lease(apply: () => LeaseOutcome, options: { weight: number; autoAck: boolean }): Promise<LeaseOutcome>;
  /** A read of the state as committed. */
  read<T>(compute: () => T): Promise<T>;
}

type MoveParams = Parameters<QueueStore["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<QueueStore["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<QueueStore["queueDeadLetterExhausted"]>[0];

export abstract class EmbeddedStore<
  Q extends QueueSlot,
  M extends MessageSlot,
  X extends ExchangeSlot,
  N extends InboxSlot,
  S extends StreamSlot,
> implements Store
{
  /** One writer: writes commit in the order they are called. */
  readonly commitsInCallOrder = true;
  private readonly queues: EmbeddedQueues<Q, M>;
  private readonly exchanges: EmbeddedExchanges<X>;
  private readonly inboxes: EmbeddedInboxes<N>;
  private readonly streams: EmbeddedStreams<S>;
  private readonly groups: EmbeddedStreamGroups<S>;
  private readonly shares: EmbeddedStreamShares<S>;

  protected constructor(
    rows: {
      queues: QueueRows<Q, M>;
      exchanges: ExchangeRows<X>;
      inboxes: InboxRows<N>;
      streams: StreamRows<S>;
    },
    private readonly runner: EmbeddedRunner,
    random: Random,
  ) {
    this.queueRows = rows.queues;
    this.exchangeRows = rows.exchanges;
    this.queues = new EmbeddedQueues(rows.queues, random);
    this.exchanges = new EmbeddedExchanges(rows.exchanges, (name) => rows.streams.stream(name) !== undefined);
    this.inboxes = new EmbeddedInboxes(rows.inboxes);
    this.streams = new EmbeddedStreams(rows.streams);
    this.groups = new EmbeddedStreamGroups(rows.streams, this.streams);
    this.shares = new EmbeddedStreamShares(
      rows.streams,
      this.streams,
      {
        exists: (queue) => rows.queues.queue(queue) !== undefined,
        send: (queue, message, now) => {
          this.queues.send([{ queue, messages: [message], policy: noSendPolicy }], now);
        },
      },
      () => random.uint48(),
    );
  }

  private readonly queueRows: QueueRows<Q, M>;
  private readonly exchangeRows: ExchangeRows<X>;

  abstract ping(): Promise<void>;
  abstract close(): Promise<void>;

  // ---- the cluster link of a store one process owns

  watch(_listener: (event: StoreEvent) => void): void {}

  async housekeepingLeader(): Promise<boolean> {
    return true;
  }

  /** One process owns the store: its own subscribers already have the signal. */
  async signalBroadcast(_params: { channel: string; dataJson: string }): Promise<void> {}

  // ---- queues

  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }> {
    return this.runner.write(() => this.queues.upsert(params));
  }

  queueGet(params: { name: string }): Promise<QueueRecord | undefined> {
    return this.runner.read(() => {
      const queue = this.queueRows.queue(params.name);
      return queue && this.queueRows.queueRecord(queue);
    });
  }

  queueList(): Promise<QueueRecord[]> {
    return this.runner.read(() => this.queueRows.queueRecords({ after: "", limit: undefined }));
  }

  async queueDelete(params: { name: string }): Promise<{ removed: number }> {
    return {
      removed: await this.inSteps(params.name, (queue, lastSeq) => this.queues.deleteStep(queue, lastSeq)),
    };
  }

  /** Deletes the messages stored before the purge began, in steps (inSteps). */
  async queuePurge(params: { queue: string }): Promise<{ purged: number }> {
    return {
      purged: await this.inSteps(params.queue, (queue, lastSeq) => this.queues.purgeStep(queue, lastSeq)),
    };
  }

  /**
   * Runs `step` in writes of its own, one after another, until it says it is done, and answers the
   * messages the steps removed: a purge or a queue delete (rule 20a), so other calls run between them.
   * The first step finds the queue or throws queue_not_found and fixes the bound every step deletes up
   * to; a send made meanwhile may land on either side of it. A later step that finds the queue gone (a
   * concurrent delete took it) ends the run with what was removed until then.
   */
  private async inSteps(
    name: string,
    step: (queue: Q, lastSeq: number) => { removed: number; done: boolean },
  ): Promise<number> {
    let lastSeq: number | undefined;
    let removed = 0;
    for (;;) {
      const outcome = await this.runner.write(() => {
        const queue = lastSeq === undefined ? this.queues.require(name) : this.queueRows.queue(name);
        if (!queue) return { removed: 0, done: true };
        lastSeq ??= this.queueRows.lastSeq();
        return step(queue, lastSeq);
      });
      removed += outcome.removed;
      if (outcome.done) return removed;
    }
  }

  queueDepth(params: { name: string; now: number }): Promise<QueueDepth> {
    return this.runner.read(() => this.queueRows.depth(this.queues.require(params.name), params.now));
  }

  queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]> {
    return this.runner.read(() =>
      this.queueRows.queuesWithDepth({ after: params.after ?? "", limit: params.limit }, params.now),
    );
  }

  queueSendMany(params: {
    sends: QueueSend[];
    now: number;
    appends?: StreamAppendCopy[];
  }): Promise<SendOutcome[]> {
    const weight = params.sends.reduce((total, send) => total + send.messages.length, 0);
    const { appends = [], now } = params;
    return this.runner.write(
      () => {
        const outcomes = this.queues.send(params.sends, now);
        for (const { stream, records } of appends) this.streams.append({ name: stream, records, now });
        return outcomes;
      },
      { weight },
    );
  }

  async queueLease(params: Parameters<QueueStore["queueLease"]>[0]): Promise<{
    messages: LeasedMessage[];
    deadLettered: number;
    corrupt: number;
  }> {
    const { messages, deadLettered, corrupt } = await this.runner.lease(() => this.queues.lease(params), {
      weight: params.max,
      autoAck: params.autoAck ?? false,
    });
    return { messages, deadLettered, corrupt };
  }

  queueAck(params: { queue: string; receipts: string[]; applied?: Applied }): Promise<ReceiptResult[]> {
    return this.runner.write(() => this.queues.ack(params.queue, params.receipts), {
      weight: params.receipts.length,
      ...(params.applied && { applied: params.applied }),
    });
  }

  queueNack(params: Parameters<QueueStore["queueNack"]>[0]): Promise<{
    results: ReceiptResult[];
    deadLettered: number;
  }> {
    const { applied } = params;
    return this.runner.write(() => this.queues.nack(params), {
      weight: params.receipts.length,
      ...(applied && { applied: (outcome: { results: ReceiptResult[] }) => applied(outcome.results) }),
    });
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.runner.write(() => this.queues.extend(params.queue, params.receipts, params.leaseExpiresAt), {
      weight: params.receipts.length,
    });
  }

  queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]> {
    return this.runner.read(() =>
      this.queueRows
        .peek(this.queues.require(params.queue), params.state, params.now, params.limit)
        .map((message) => this.queues.peekShown(message)),
    );
  }

  queueExpire(params: { queue: string; expiredBefore: number; max: number; now: number }): Promise<{
    expired: number;
  }> {
    return this.runner.write(() => this.queues.expire(params));
  }

  queueMove(params: MoveParams): Promise<MoveResult> {
    return this.runner.write(() => this.queues.move(params));
  }

  queueDeadLetterExhausted(params: DeadLetterExhaustedParams): Promise<{ deadLettered: number }> {
    return this.runner.write(() => this.queues.deadLetterExhausted(params));
  }

  queueNextEvents(params: { queue: string; now: number }): Promise<{
    nextVisibleAt: number | null;
    oldestPublishedAt: number | null;
  }> {
    return this.runner.read(() => {
      const queue = this.queueRows.queue(params.queue);
      return queue
        ? this.queueRows.nextEvents(queue, params.now)
        : { nextVisibleAt: null, oldestPublishedAt: null };
    });
  }

  // ---- exchanges

  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    return this.runner.write(() => this.exchanges.upsert(params));
  }

  exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    return this.runner.read(() => this.exchanges.get(params.name));
  }

  exchangeList(): Promise<ExchangeRecord[]> {
    return this.runner.read(() => this.exchanges.list());
  }

  exchangeDelete(params: { name: string }): Promise<void> {
    return this.runner.write(() => this.exchanges.delete(params.name));
  }

  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }> {
    return this.runner.write(() => this.exchanges.bind(params));
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.runner.write(() => this.exchanges.unbind(params));
  }

  // ---- inboxes

  inboxUpsert(params: Parameters<InboxStore["inboxUpsert"]>[0]): ReturnType<InboxStore["inboxUpsert"]> {
    return this.runner.write(() => this.inboxes.upsert(params));
  }

  inboxGet(params: { name: string }): Promise<InboxRecord | undefined> {
    return this.runner.read(() => this.inboxes.get(params.name));
  }

  inboxList(): Promise<InboxRecord[]> {
    return this.runner.read(() => this.inboxes.list());
  }

  inboxDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.runner.write(() => this.inboxes.delete(params.name));
  }

  inboxAppend(params: Parameters<InboxStore["inboxAppend"]>[0]): ReturnType<InboxStore["inboxAppend"]> {
    // An entry weighs less than a queue message in a commit's bound (limits.ts says why).
    const weight = Math.ceil(params.recipients.length / limits.inboxEntriesPerMessageWeight);
    return this.runner.write(() => this.inboxes.append(params), { weight });
  }

  inboxRead(params: Parameters<InboxStore["inboxRead"]>[0]): ReturnType<InboxStore["inboxRead"]> {
    return this.runner.read(() => this.inboxes.read(params));
  }

  inboxAck(params: Parameters<InboxStore["inboxAck"]>[0]): ReturnType<InboxStore["inboxAck"]> {
    return this.runner.write(() => this.inboxes.ack(params));
  }

  async inboxDeviceSeen(params: Parameters<InboxStore["inboxDeviceSeen"]>[0]): Promise<void> {
    await this.runner.write(() => this.inboxes.deviceSeen(params));
  }

  inboxDeviceDelete(
    params: Parameters<InboxStore["inboxDeviceDelete"]>[0],
  ): ReturnType<InboxStore["inboxDeviceDelete"]> {
    return this.runner.write(() => this.inboxes.deviceDelete(params));
  }

  inboxRecipientGet(params: { name: string; recipient: string }): Promise<RecipientState> {
    return this.runner.read(() => this.inboxes.recipientState(params.name, params.recipient));
  }

  inboxSweep(params: Parameters<InboxStore["inboxSweep"]>[0]): ReturnType<InboxStore["inboxSweep"]> {
    return this.runner.write(() => this.inboxes.sweep(params), { weight: params.max });
  }

  // ---- streams

  streamUpsert(params: Parameters<StreamStore["streamUpsert"]>[0]): ReturnType<StreamStore["streamUpsert"]> {
    return this.runner.write(() => this.streams.upsert(params));
  }

  streamGet(params: { name: string }): ReturnType<StreamStore["streamGet"]> {
    return this.runner.read(() => this.streams.get(params.name));
  }

  streamList(): ReturnType<StreamStore["streamList"]> {
    return this.runner.read(() => this.streams.list());
  }

  /** Deletes the stream and the bindings to it. */
  streamDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.runner.write(() => {
      const removed = this.streams.delete(params.name);
      this.exchangeRows.bindingsRemoveTo({ kind: "stream", name: params.name });
      return removed;
    });
  }

  streamAppend(params: Parameters<StreamStore["streamAppend"]>[0]): ReturnType<StreamStore["streamAppend"]> {
    return this.runner.write(() => this.streams.append(params), { weight: params.records.length });
  }

  streamRead(params: Parameters<StreamStore["streamRead"]>[0]): ReturnType<StreamStore["streamRead"]> {
    return this.runner.read(() => this.streams.read(params));
  }

  streamSweep(params: Parameters<StreamStore["streamSweep"]>[0]): ReturnType<StreamStore["streamSweep"]> {
    return this.runner.write(() => this.streams.sweep(params), { weight: params.max });
  }

  // ---- stream consumer groups

  streamGroupFetch(
    params: Parameters<StreamStore["streamGroupFetch"]>[0],
  ): ReturnType<StreamStore["streamGroupFetch"]> {
    return this.runner.write(() => this.groups.fetch(params), { weight: params.max });
  }

  streamGroupCommit(
    params: Parameters<StreamStore["streamGroupCommit"]>[0],
  ): ReturnType<StreamStore["streamGroupCommit"]> {
    return this.runner.write(() => this.groups.commit(params));
  }

  streamGroupLeave(
    params: Parameters<StreamStore["streamGroupLeave"]>[0],
  ): ReturnType<StreamStore["streamGroupLeave"]> {
    return this.runner.write(() => this.groups.leave(params));
  }

  streamGroupReset(
    params: Parameters<StreamStore["streamGroupReset"]>[0],
  ): ReturnType<StreamStore["streamGroupReset"]> {
    return this.runner.write(() => this.groups.reset(params));
  }

  streamGroupDelete(params: Parameters<StreamStore["streamGroupDelete"]>[0]): Promise<void> {
    return this.runner.write(() => this.groups.delete(params));
  }

  streamGroupList(
    params: Parameters<StreamStore["streamGroupList"]>[0],
  ): ReturnType<StreamStore["streamGroupList"]> {
    return this.runner.read(() => this.groups.list(params));
  }

  streamGroupExpire(
    params: Parameters<StreamStore["streamGroupExpire"]>[0],
  ): ReturnType<StreamStore["streamGroupExpire"]> {
    return this.runner.write(() => this.groups.expire(params));
  }

  // ---- stream share groups

  streamShareUpsert(
    params: Parameters<StreamStore["streamShareUpsert"]>[0],
  ): ReturnType<StreamStore["streamShareUpsert"]> {
    return this.runner.write(() => this.shares.upsert(params));
  }

  streamShareReceive(
    params: Parameters<StreamStore["streamShareReceive"]>[0],
  ): ReturnType<StreamStore["streamShareReceive"]> {
    return this.runner.write(() => this.shares.receive(params), { weight: params.max });
  }

  streamShareAck(
    params: Parameters<StreamStore["streamShareAck"]>[0],
  ): ReturnType<StreamStore["streamShareAck"]> {
    return this.runner.write(() => this.shares.ack(params), { weight: params.receipts.length });
  }

  streamShareNack(
    params: Parameters<StreamStore["streamShareNack"]>[0],
  ): ReturnType<StreamStore["streamShareNack"]> {
    return this.runner.write(() => this.shares.nack(params), { weight: params.receipts.length });
  }

  streamShareExtend(
    params: Parameters<StreamStore["streamShareExtend"]>[0],
  ): ReturnType<StreamStore["streamShareExtend"]> {
    return this.runner.write(() => this.shares.extend(params), { weight: params.receipts.length });
  }

  streamSharePending(
    params: Parameters<StreamStore["streamSharePending"]>[0],
  ): ReturnType<StreamStore["streamSharePending"]> {
    return this.runner.read(() => this.shares.pending(params));
  }
}
