/**
 * The queues and their messages, as the broker stores them: one atomic transaction per method, named
 * queue-first then verb, one params object each. The broker decides policy (lease lengths, retry
 * delays, dead-letter targets) and passes it in; the store applies it atomically.
 */
import type { HopperError } from "../errors.js";
import type { LeasedMessage, MessageState, ReceiptResult, StoredMessage } from "../model/message.js";
import type { SendPolicy } from "../model/policies.js";
import type { DeadLetterRoute, QueueAttributes, QueueDepth, QueueKind, QueueRecord } from "../model/queue.js";
import type { Applied, QueueListPage, QueueSend, SendOutcome } from "./store.js";

export interface QueueStore {
  /** Creates the queue, or updates its attributes. Throws queue_kind_mismatch, too_many_queues,
   * dead_letter_queue_not_found and (for a dead-letter exchange) exchange_not_found. */
  queueUpsert(params: {
    name: string;
    kind: QueueKind;
    attributes: QueueAttributes;
    now: number;
  }): Promise<{ created: boolean; queue: QueueRecord }>;
  queueGet(params: { name: string }): Promise<QueueRecord | undefined>;
  queueList(): Promise<QueueRecord[]>;
  /** Deletes the queue, its messages and the bindings to it; returns how many messages went with it.
   * Throws queue_in_use when another queue dead-letters into it, queue_not_found when absent. */
  queueDelete(params: { name: string }): Promise<{ removed: number }>;
  queueDepth(params: { name: string; now: number }): Promise<QueueDepth>;
  /**
   * The queues in name order, each with its depth at `now` as queueDepth reports it, read together in
   * one statement (the queue listing and every /metrics scrape: thousands of queues in one call). A
   * page: only names after `after`, at most `limit` of them (all when absent).
   */
  queueListWithDepth(
    params: QueueListPage & { now: number },
  ): Promise<{ queue: QueueRecord; depth: QueueDepth }[]>;

  /**
   * Stores each send's messages in its queue, applying its policy (SendPolicy), all of them or none
   * (one exchange publish writes several queues). In a FIFO queue each message joins the group of
   * its key (a message without a key is in the queue's keyless group). Answers, per send and per
   * message, the id that stands for it: its own, or for a duplicate the original's; and the messages
   * leased to the send's hand-off (Handoff), in the order leased. Throws queue_not_found and
   * queue_full.
   */
  queueSendMany(params: { sends: QueueSend[]; now: number }): Promise<SendOutcome[]>;

  /**
   * Leases up to `max` available messages, each until `leaseExpiresAt`, and increments their delivery
   * counts. In a standard queue: higher priority first, then in order of visibility. In a FIFO queue
   * only the oldest message of each group (its head) can be leased, so a group has at most one
   * message in flight and is delivered in order; groups are taken in order of their heads' visibility.
   * A candidate already delivered `deadLetter.maxDeliveries` times is moved to the dead-letter queue
   * instead (and in a FIFO queue the next message of its group becomes its head). Messages published
   * at or before `expiredBefore` are past retention and are neither leased nor counted here. With
   * `autoAck` the leased messages are deleted in the same transaction and counted as acked: the
   * caller gets them once, at most.
   *
   * The answer may come before the lease itself is durable, once the messages it hands out are (the log
   * store; docs/log-store.md): a crash then takes the lease back, the message is available again with
   * its delivery count as before, and the receipt is stale. With `autoAck` the deletes are durable first.
   *
   * A candidate whose body fails its checksum (SQLite only, docs/reliability.md) is never leased: it
   * goes to the dead-letter target with reason `corrupt`, or, without one, stays in the queue marked
   * corrupt (QueueDepth.corrupt). `corrupt` counts the messages found so.
   */
  queueLease(params: {
    queue: string;
    max: number;
    now: number;
    leaseExpiresAt: number;
    expiredBefore: number;
    inFlightMax: number;
    deadLetter: DeadLetterRoute | null;
    autoAck?: boolean;
  }): Promise<{ messages: LeasedMessage[]; deadLettered: number; corrupt?: number }>;

  /**
   * Deletes each message whose latest lease the receipt names. (Whenever a FIFO group's head leaves
   * the queue, by any path, the next message of the group becomes its head in the same transaction.)
   * The answer means durable; see `Applied` for the moment before.
   */
  queueAck(params: { queue: string; receipts: string[]; applied?: Applied }): Promise<ReceiptResult[]>;

  /**
   * Ends each named lease: the message becomes visible after `retryDelayMs(deliveryCount)`, or goes to
   * the dead-letter queue when it has been delivered `deadLetter.maxDeliveries` times. With
   * `deadLetterNow` every named message goes to the dead-letter queue at once, with that reason,
   * whatever its delivery count; when `deadLetter` is null each such receipt that names a lease answers
   * `no_dead_letter_target` and its message is left as it was. `applied` as in queueAck.
   */
  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
    deadLetterNow?: { reason: string };
    applied?: Applied;
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }>;

  /** Moves each named lease's expiry to `leaseExpiresAt` (a heartbeat). */
  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]>;

  /** Reads messages in one state without leasing them, oldest visibility first. */
  queuePeek(params: {
    queue: string;
    state: MessageState;
    limit: number;
    now: number;
  }): Promise<StoredMessage[]>;

  /** Deletes every message of the queue, leased or not, and counts them as purged. A store may do it
   * in steps, each its own commit (SQLite: invariants rule 20a); then it deletes the messages stored
   * before the call, and one sent meanwhile may stay. */
  queuePurge(params: { queue: string }): Promise<{ purged: number }>;

  /** Deletes up to `max` messages published at or before `expiredBefore`, counted as expired, and
   * forgets the queue's dedupIds whose window ended at or before `now`. */
  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }>;

  /**
   * Moves up to `max` of the queue's messages that are not in flight, oldest first (by arrival), to
   * `to`, or each to the queue its `x-original-queue` header names: a redrive step. A message in
   * flight holds back the later messages of its key (in a FIFO queue, of its group): they are passed
   * over, counted in `held`, so that order per key holds (redrive-order.ts). A moved message
   * keeps its id, body, headers and key; it arrives as new (delivery count 0, visible at `now`) and is
   * counted as published there and as redriven here. Messages are moved in order, so order per key
   * holds; the step stops before the first message it cannot move, with the reason: no target
   * (`invalid_request`), a target that does not exist or has no entry in `policies`
   * (`queue_not_found`), or a full target whose overflow policy is reject (`queue_full`). Targets'
   * send policies apply, except deduplication. Everything moved in one call is one transaction.
   */
  queueMove(params: {
    queue: string;
    to: string | null;
    max: number;
    now: number;
    policies: ReadonlyMap<string, SendPolicy>;
  }): Promise<{ moved: number; held: number; targets: string[]; stoppedBy: HopperError | null }>;

  /**
   * Moves up to `max` messages whose lease ended in [visibleFrom, now] and that have been delivered
   * `deadLetter.maxDeliveries` times to the dead-letter queue. The window is closed at both ends so
   * that consecutive sweeps overlap at their boundary and no lease ending on it is missed.
   */
  queueDeadLetterExhausted(params: {
    queue: string;
    visibleFrom: number;
    now: number;
    max: number;
    deadLetter: DeadLetterRoute;
  }): Promise<{ deadLettered: number }>;

  /**
   * What the scheduler needs to know when to look at the queue next: the earliest time after `now` at
   * which a message becomes visible, and the oldest publish time (retention counts from it).
   */
  queueNextEvents(params: {
    queue: string;
    now: number;
  }): Promise<{ nextVisibleAt: number | null; oldestPublishedAt: number | null }>;
}
