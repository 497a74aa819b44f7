/**
 * What a queue means on the embedded stores, written once over the row interface (rows.ts):
 * deduplication, overflow policies, hand-off, dead-lettering, the in-flight ceiling, lease selection,
 * corrupt bodies, retention, redrive moves. Every method runs synchronously inside one write of the
 * store (embedded-store.ts runs it), so a method that throws leaves nothing of itself.
 */
import {
  deadLetterExchangeNotFound,
  deadLetterQueueNotFound,
  HopperError,
  invariant,
  queueFull,
  queueInUse,
  queueKindMismatch,
  queueNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import {
  type LeasedMessage,
  noTargetUnlessRefused,
  type ReceiptResult,
  type StoredMessage,
} from "../../model/message.js";
import {
  type DeadLetterReason,
  deadLetterHeaders,
  type Handoff,
  handoffRanks,
  type SendPolicy,
} from "../../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type QueueAttributes,
  type QueueKind,
  type QueueRecord,
} from "../../model/queue.js";
import { decodeReceipt, encodeReceipt } from "../../model/receipts.js";
import type { Random } from "../../random.js";
import type { QueueStore } from "../queue-store.js";
import { byTarget, notHeldBack, planMoves } from "../redrive-order.js";
import type { QueueSend, SendOutcome } from "../store.js";
import type { MessageSlot, QueueRows, QueueSlot } from "./rows.js";

type LeaseParams = Parameters<QueueStore["queueLease"]>[0];
type NackParams = Parameters<QueueStore["queueNack"]>[0];
type MoveParams = Parameters<QueueStore["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<QueueStore["queueMove"]>>;
type DeadLetterExhaustedParams = Parameters<QueueStore["queueDeadLetterExhausted"]>[0];

export interface LeaseOutcome {
  messages: LeasedMessage[];
  deadLettered: number;
  corrupt: number;
  /** The highest seq handed out: the log store answers once that message is durable. */
  newestSeq: number;
}

/** 40 random bits: with a seq (or a rank) added, a lease token stays below 2^53, exact as a number. */
function tokenBaseFrom(random: Random): number {
  return Math.floor(random.uint48() / 2 ** 8);
}

export class EmbeddedQueues<Q extends QueueSlot, M extends MessageSlot> {
  /**
   * Per queue, at least the messages in flight (see inFlightAtMost). Counting them reads every
   * in-flight message, so a lease counts only when the ceiling could bind.
   */
  private readonly inFlightBounds = new Map<string, number>();

  constructor(
    private readonly rows: QueueRows<Q, M>,
    private readonly random: Random,
  ) {}

  require(name: string): Q {
    const queue = this.rows.queue(name);
    if (!queue) throw queueNotFound(name);
    return queue;
  }

  upsert(params: { name: string; kind: QueueKind; attributes: QueueAttributes; now: number }): {
    created: boolean;
    queue: QueueRecord;
  } {
    this.checkDeadLetterTarget(params.name, params.attributes);
    const existing = this.rows.queue(params.name);
    if (existing) {
      if (existing.kind !== params.kind) throw queueKindMismatch(params.name, existing.kind);
      this.rows.queueSetAttributes(existing, { ...params.attributes });
      return { created: false, queue: this.rows.queueRecord(this.require(params.name)) };
    }
    if (this.rows.queueCount() >= limits.queuesMax) throw new HopperError("too_many_queues");
    this.rows.queueInsert(params.name, params.kind, { ...params.attributes }, params.now);
    return { created: true, queue: this.rows.queueRecord(this.require(params.name)) };
  }

  /** A queue's dead-letter target must exist when it is set: a queue, or an exchange. */
  private checkDeadLetterTarget(queueName: string, attributes: QueueAttributes): void {
    const target = attributes.deadLetter;
    if (!target) return;
    if ("queue" in target) {
      if (target.queue !== queueName && !this.rows.queue(target.queue))
        throw deadLetterQueueNotFound(target.queue);
    } else if (!this.rows.exchangeExists(target.exchange)) {
      throw deadLetterExchangeNotFound(target.exchange);
    }
  }

  /**
   * One step of a queue delete (rule 20a): the messages stored before the delete began go in steps of
   * limits.purgeStepMax, each its own write and counted as purged, so the counters stay exact if the
   * delete is refused midway; the last step takes the rest and the queue, its dedupIds and the
   * bindings to it. Refused, changing nothing, while another queue dead-letters into it.
   */
  deleteStep(queue: Q, lastSeq: number): { removed: number; done: boolean } {
    const sources = this.rows.deadLetterSources(queue.name);
    if (sources.length > 0) throw queueInUse(queue.name, sources);
    const deleted = this.rows.deleteStep(queue, lastSeq, limits.purgeStepMax);
    if (deleted === limits.purgeStepMax) {
      this.rows.countersAdd(queue, { purged: deleted });
      return { removed: deleted, done: false };
    }
    this.inFlightBounds.delete(queue.name);
    return { removed: deleted + this.rows.queueRemove(queue), done: true };
  }

  /** One step of a purge: the messages stored before it began, counted as purged. */
  purgeStep(queue: Q, lastSeq: number): { removed: number; done: boolean } {
    const deleted = this.rows.deleteStep(queue, lastSeq, limits.purgeStepMax);
    if (deleted > 0) this.rows.countersAdd(queue, { purged: deleted });
    return { removed: deleted, done: deleted < limits.purgeStepMax };
  }

  send(sends: readonly QueueSend[], now: number): SendOutcome[] {
    return sends.map((send) => this.sendOne(send, now));
  }

  /** One queue's part of a send: deduplication, then the overflow check, the inserts, the trim. */
  private sendOne(send: QueueSend, now: number): SendOutcome {
    const queue = this.require(send.queue);
    const ranks = queue.kind === "standard" ? handoffRanks(send, now) : undefined;
    if (ranks && send.handoff) return this.sendHandingOff(queue, send, ranks, send.handoff, now);
    const { dedupWindowMs, overflow } = send.policy;
    // Duplicates are decided before anything is written, so that a refused send writes nothing.
    const seen = new Map<string, string>();
    const ids = send.messages.map((message) => {
      if (message.dedupId === null || dedupWindowMs === 0) return message.id;
      const earlier = seen.get(message.dedupId) ?? this.rows.dedupLookup(queue, message.dedupId, now);
      if (earlier !== undefined) return earlier;
      seen.set(message.dedupId, message.id);
      return message.id;
    });
    const stored = send.messages.filter((message, i) => ids[i] === message.id);
    if (overflow?.policy === "reject" && stored.length > 0) {
      const depth = depthOf(this.rows.queueCounters(queue));
      if (depth + stored.length > overflow.maxDepth) throw queueFull(send.queue, overflow.maxDepth, depth);
    }
    const mark = this.rows.capacityMark();
    this.rows.insert(
      queue,
      stored.map((message) => ({ message })),
    );
    this.rows.capacityCheck(mark);
    for (const message of stored) {
      if (message.dedupId !== null && dedupWindowMs > 0)
        this.rows.dedupRemember(queue, message.dedupId, message.id, now + dedupWindowMs);
    }
    if (stored.length > 0) this.rows.countersAdd(queue, { published: stored.length });
    this.trimOverflow(queue, send.policy, now);
    return { ids, leased: [] };
  }

  /**
   * A send into a standard queue with neither deduplication nor overflow, whose hand-off takes the
   * messages ranked 1 to its in-flight room, stored already leased.
   */
  private sendHandingOff(
    queue: Q,
    send: QueueSend,
    ranks: number[],
    handoff: Handoff,
    now: number,
  ): SendOutcome {
    const mark = this.rows.capacityMark();
    const inFlight = this.inFlightAtMost(queue, now, handoff.max, handoff.inFlightMax);
    const room = Math.max(0, Math.min(handoff.max, handoff.inFlightMax - inFlight));
    // As a lease's, with the rank added, so the tokens of one call differ.
    const tokenBase = tokenBaseFrom(this.random);
    const inserts = send.messages.map((message, index) => {
      const rank = ranks[index] ?? 0;
      if (rank === 0 || rank > room) return { message };
      return {
        message,
        lease: { visibleAt: handoff.leaseExpiresAt, firstDeliveredAt: now, token: tokenBase + rank },
      };
    });
    const seqs = this.rows.insert(queue, inserts);
    const leased: LeasedMessage[] = [];
    inserts.forEach(({ message, lease }, index) => {
      if (!lease) return;
      leased[lease.token - tokenBase - 1] = {
        ...message,
        visibleAt: lease.visibleAt,
        deliveryCount: 1,
        firstDeliveredAt: now,
        receipt: encodeReceipt(seqs[index] ?? 0, lease.token),
      };
    });
    this.rows.capacityCheck(mark);
    this.rows.countersAdd(queue, { published: send.messages.length, delivered: leased.length });
    this.inFlightBounds.set(queue.name, inFlight + leased.length);
    return { ids: send.messages.map((message) => message.id), leased };
  }

  /**
   * Applies drop-oldest or dead-letter-oldest: removes the oldest messages (by arrival, in any state)
   * until the queue holds at most maxDepth, at most limits.overflowTrimMax of them: a maxDepth lowered
   * far below the depth is reached over several sends.
   */
  private trimOverflow(queue: Q, policy: SendPolicy, now: number): void {
    const overflow = policy.overflow;
    if (!overflow || overflow.policy === "reject") return;
    const excess = depthOf(this.rows.queueCounters(queue)) - overflow.maxDepth;
    if (excess <= 0) return;
    const oldest = this.rows.oldest(queue, Math.min(excess, limits.overflowTrimMax));
    if (overflow.policy === "dead-letter-oldest" && overflow.deadLetter) {
      for (const message of oldest) this.deadLetter(message, queue, overflow.deadLetter, now, "max_depth");
      return;
    }
    this.rows.delete(queue, oldest);
    this.rows.countersAdd(queue, { dropped: oldest.length });
  }

  /**
   * Moves one message to its dead-letter queues, a new message in each, with the headers that say
   * why. A target deleted since the route was resolved is skipped; with no target left the message is
   * dropped, and counted as dead-lettered either way. Dead letters are never refused by a full target.
   * A body that failed its check arrives marked, so it is not delivered from there either.
   */
  private deadLetter(
    message: M,
    source: Q,
    route: DeadLetterRoute,
    now: number,
    reason: DeadLetterReason = "max_deliveries",
  ): void {
    const stored = this.rows.stored(message);
    const headers = deadLetterHeaders(stored, source.name, reason);
    const copy = { ...stored, headers, publishedAt: now, visibleAt: now };
    const corrupt =
      reason === "corrupt" || this.rows.markedCorrupt(message) || !this.rows.bodyIntact(message);
    for (const name of route.queues) {
      const target = this.rows.queue(name);
      if (!target) continue;
      this.rows.insert(target, [{ message: copy, copyOf: message, corrupt }]);
      this.rows.countersAdd(target, { published: 1 });
    }
    this.rows.delete(source, [message]);
    this.rows.countersAdd(source, { deadLettered: 1 });
  }

  /**
   * Leases up to `max` messages (QueueStore.queueLease). Each pass either leases or dead-letters every
   * candidate it reads, so the loop ends; the bound keeps a queue full of exhausted messages from
   * holding one write for long. A lease that ends at once (a visibility timeout of 0) leaves its
   * messages available: a second pass would hand them out again, so it gets one pass.
   */
  lease(params: LeaseParams): LeaseOutcome {
    const queue = this.require(params.queue);
    const inFlight = this.inFlightAtMost(queue, params.now, params.max, params.inFlightMax);
    const wanted = Math.min(params.max, params.inFlightMax - inFlight);
    const outcome: LeaseOutcome = { messages: [], deadLettered: 0, corrupt: 0, newestSeq: 0 };
    const taken: M[] = [];
    let redelivered = 0;
    const passes = params.leaseExpiresAt > params.now ? limits.leasePassesMax : 1;
    for (let pass = 0; pass < passes && outcome.messages.length < wanted; pass++) {
      const candidates = this.rows.candidates(
        queue,
        params.now,
        params.expiredBefore,
        wanted - outcome.messages.length,
      );
      if (candidates.length === 0) break;
      const toLease: M[] = [];
      for (const message of candidates) {
        if (!this.rows.bodyIntact(message)) {
          outcome.corrupt++;
          if (this.withholdCorrupt(message, queue, params.deadLetter, params.now)) outcome.deadLettered++;
        } else if (params.deadLetter && message.deliveryCount >= params.deadLetter.maxDeliveries) {
          this.deadLetter(message, queue, params.deadLetter, params.now);
          outcome.deadLettered++;
        } else {
          toLease.push(message);
        }
      }
      if (toLease.length === 0) continue;
      const tokenBase = tokenBaseFrom(this.random);
      // Read before the write: a store may change the message in place.
      for (const message of toLease) {
        const deliveryCount = message.deliveryCount + 1;
        if (deliveryCount > 1) redelivered++;
        const stored = this.rows.stored(message);
        // One literal, not a spread: every leased message takes the same shape (the render is hot).
        outcome.messages.push({
          id: stored.id,
          body: stored.body,
          contentType: stored.contentType,
          headers: stored.headers,
          key: stored.key,
          priority: stored.priority,
          dedupId: stored.dedupId,
          publishedAt: stored.publishedAt,
          visibleAt: params.leaseExpiresAt,
          deliveryCount,
          firstDeliveredAt: message.firstDeliveredAt ?? params.now,
          receipt: encodeReceipt(message.seq, tokenBase + message.seq),
        });
        outcome.newestSeq = Math.max(outcome.newestSeq, message.seq);
      }
      this.rows.lease(queue, toLease, { leaseExpiresAt: params.leaseExpiresAt, tokenBase, now: params.now });
      taken.push(...toLease);
    }
    const count = outcome.messages.length;
    if (count > 0) this.rows.countersAdd(queue, { delivered: count, redelivered });
    if (!params.autoAck) this.inFlightBounds.set(queue.name, inFlight + count);
    if (params.autoAck && count > 0) {
      this.rows.delete(queue, taken);
      this.rows.countersAdd(queue, { acked: count });
    }
    return outcome;
  }

  /**
   * Keeps a message whose body failed its check from being delivered: to its dead-letter target with
   * reason corrupt (answers true), or, with none, marked corrupt where it is, never leased again.
   */
  private withholdCorrupt(message: M, queue: Q, deadLetter: DeadLetterRoute | null, now: number): boolean {
    if (deadLetter) {
      this.deadLetter(message, queue, deadLetter, now, "corrupt");
      return true;
    }
    this.rows.markCorrupt(queue, message, now);
    return false;
  }

  /**
   * The queue's messages in flight, or more: the last count plus what was leased since. Only leases and
   * hand-offs put messages in flight, and acks, nacks and ended leases only take them out, so the sum
   * never falls below the true count; while it leaves room for `max` more, the exact count would allow
   * `max` too. An extend can take an ended lease back in flight, so it drops the queue's sum and the
   * next lease counts. (A clock stepping back could do the same to ended leases; the ceiling is a guard
   * against runaway consumers, and would then let through at most the leases that ended within the step.)
   */
  private inFlightAtMost(queue: Q, now: number, max: number, inFlightMax: number): number {
    const bound = this.inFlightBounds.get(queue.name);
    if (bound !== undefined && bound + max <= inFlightMax) return bound;
    return this.rows.countInFlight(queue, now);
  }

  /** Deletes each message whose latest lease the receipt names. A receipt given twice in one batch
   * finds its message gone the second time: stale, as in a later call. */
  ack(name: string, receipts: readonly string[]): ReceiptResult[] {
    const queue = this.require(name);
    let acked = 0;
    const results = receipts.map((receipt): ReceiptResult => {
      const decoded = decodeReceipt(receipt);
      if (!decoded) return { error: "invalid_receipt" };
      if (!this.rows.deleteByReceipt(queue, decoded)) return { error: "stale_receipt" };
      acked++;
      return { ok: true };
    });
    if (acked > 0) this.rows.countersAdd(queue, { acked });
    return results;
  }

  nack(params: NackParams): { results: ReceiptResult[]; deadLettered: number } {
    const queue = this.require(params.queue);
    const { deadLetter, deadLetterNow } = params;
    if (deadLetterNow && !deadLetter) {
      // Nowhere to move them: each lease found answers so, and nothing changes.
      const results = this.forEachReceipt(queue, params.receipts, () => {});
      return { results: results.map(noTargetUnlessRefused), deadLettered: 0 };
    }
    let nacked = 0;
    let deadLettered = 0;
    const results = this.forEachReceipt(queue, params.receipts, (message) => {
      nacked++;
      if (deadLetter && (deadLetterNow || message.deliveryCount >= deadLetter.maxDeliveries)) {
        this.deadLetter(message, queue, deadLetter, params.now, deadLetterNow?.reason);
        deadLettered++;
        return;
      }
      this.rows.release(queue, message, params.now + params.retryDelayMs(message.deliveryCount));
    });
    if (nacked > 0) this.rows.countersAdd(queue, { nacked });
    return { results, deadLettered };
  }

  extend(name: string, receipts: readonly string[], leaseExpiresAt: number): ReceiptResult[] {
    const queue = this.require(name);
    this.inFlightBounds.delete(queue.name);
    return this.forEachReceipt(queue, receipts, (message) =>
      this.rows.extendLease(queue, message, leaseExpiresAt),
    );
  }

  /** Runs `apply` for each receipt that names the latest lease of a message of the queue. */
  private forEachReceipt(
    queue: Q,
    receipts: readonly string[],
    apply: (message: M) => void,
  ): ReceiptResult[] {
    // A receipt that appears twice in one batch counts once; its repeat is stale, as in a later call.
    const seen = new Set<number>();
    return receipts.map((receipt): ReceiptResult => {
      const decoded = decodeReceipt(receipt);
      if (!decoded) return { error: "invalid_receipt" };
      const message = this.rows.byReceipt(queue, decoded);
      if (!message || seen.has(message.seq)) return { error: "stale_receipt" };
      seen.add(message.seq);
      apply(message);
      return { ok: true };
    });
  }

  /** A peek reads and writes nothing: a damaged body it finds is shown as such, and marked by the lease
   * that next reaches it. */
  peekShown(message: M): StoredMessage {
    const stored = this.rows.stored(message);
    return this.rows.markedCorrupt(message) || !this.rows.bodyIntact(message)
      ? { ...stored, corrupt: true }
      : stored;
  }

  expire(params: { queue: string; expiredBefore: number; max: number; now: number }): { expired: number } {
    const queue = this.require(params.queue);
    const expired = this.rows.deleteExpired(queue, params.expiredBefore, params.max);
    if (expired > 0) this.rows.countersAdd(queue, { expired });
    this.rows.dedupForgetExpired(queue, params.now);
    return { expired };
  }

  /** A redrive step (QueueStore.queueMove). A damaged body is not moved: it stays in the source,
   * marked, where a purge removes it. */
  move(params: MoveParams): MoveResult {
    const source = this.require(params.queue);
    const { now } = params;
    const candidates: Array<{ message: M; stored: StoredMessage }> = [];
    for (const message of this.rows.movable(source, now, limits.redriveScanMax)) {
      if (this.rows.bodyIntact(message)) candidates.push({ message, stored: this.rows.stored(message) });
      else this.rows.markCorrupt(source, message, now);
    }
    const { rows: chosen, held } = notHeldBack(
      candidates.map((candidate) => ({ ...orderRow(candidate.message), candidate })),
      this.rows.inFlight(source, now).map(orderRow),
      params.max,
    );
    const { moves, stoppedBy } = planMoves(
      chosen.map(({ candidate }) => ({
        ...candidate,
        id: candidate.stored.id,
        headers: candidate.stored.headers,
      })),
      { ...params, source: source.name },
      (name) => {
        const target = this.rows.queue(name);
        return target && depthOf(this.rows.queueCounters(target));
      },
    );
    // Every planned message leaves the source before any reaches a target (planMoves).
    this.rows.delete(
      source,
      moves.map(({ item }) => item.message),
    );
    if (moves.length > 0) this.rows.countersAdd(source, { redriven: moves.length });
    const targets = byTarget(moves);
    for (const [name, { policy, items }] of targets) {
      const target = this.require(name);
      this.rows.insert(
        target,
        items.map(({ stored }) => ({
          message: { ...stored, publishedAt: now, visibleAt: now },
        })),
      );
      this.rows.countersAdd(target, { published: items.length });
      this.trimOverflow(target, policy, now);
    }
    return { moved: moves.length, held, targets: [...targets.keys()], stoppedBy };
  }

  deadLetterExhausted(params: DeadLetterExhaustedParams): { deadLettered: number } {
    const queue = this.require(params.queue);
    const exhausted = this.rows.exhausted(queue, {
      visibleFrom: params.visibleFrom,
      now: params.now,
      maxDeliveries: params.deadLetter.maxDeliveries,
      limit: params.max,
    });
    for (const message of exhausted) this.deadLetter(message, queue, params.deadLetter, params.now);
    invariant(exhausted.length <= params.max, "a dead-letter sweep stays within its max");
    return { deadLettered: exhausted.length };
  }
}

/** What orders a message among its queue's messages for a redrive (redrive-order.ts). */
function orderRow(message: MessageSlot): { seq: number; key: string | null; group_key: string | null } {
  return { seq: message.seq, key: message.key, group_key: message.groupKey };
}
