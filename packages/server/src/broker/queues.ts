/**
 * What queues do: the semantics of DESIGN.md §3 on top of the Store. This is the only place that
 * decides lease lengths, retry delays, dead-lettering and when long polls wake. It knows no protocol.
 */
import type { Clock } from "../clock.js";
import { HopperError, queueKindMismatch, queueNotFound } from "../errors.js";
import { uuidv7Generator } from "../ids.js";
import { limits } from "../limits.js";
import {
  bodyByteLength,
  type LeasedMessage,
  type MessageState,
  type ReceiptResult,
  type StoredMessage,
} from "../model/message.js";
import { dedupIdFor, type SendPolicy, sendPolicyOf } from "../model/policies.js";
import {
  type DeadLetterRoute,
  depthOf,
  type QueueAttributes,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
} from "../model/queue.js";
import {
  initialAttributes,
  pushbackRefusal,
  type QueueAttributesInput,
  resolveAttributes,
  retryDelayMs,
} from "../model/queue-attributes.js";
import type { Random } from "../random.js";
import type { Applied, QueueListPage, QueueSend, SendOutcome, Store, StoreEvent } from "../store/store.js";
import { type HandoffSink, Handoffs, type HandoffTicket } from "./handoffs.js";
import { RedriveTasks, type TaskInfo } from "./redrive.js";
import { Router } from "./router.js";
import { Scheduler } from "./scheduler.js";
import { type HandoffTerms, type WaitEnd, Waiters } from "./waiters.js";

/** A message as a protocol adapter hands it over: the body decoded (bytes, or a JSON body's text; NewMessage.body). */
export interface OutgoingMessage {
  body: Buffer | string;
  contentType: string;
  headers?: Record<string, string>;
  key?: string;
  delayMs?: number;
  /** 0–9 in a standard queue; a FIFO queue refuses any but 0. */
  priority?: number;
  dedupId?: string;
}

/** `duplicate`: the message was not stored again; `id` is the one stored first under its dedupId. */
export type SendResult = { id: string; duplicate: boolean } | { error: HopperError };
export type ItemResult = { ok: true } | { error: HopperError };

export interface QueueStats {
  available: number;
  delayed: number;
  inFlight: number;
  /** Messages whose body failed its checksum, kept without a dead-letter target (QueueDepth.corrupt). */
  corrupt: number;
  oldestMessageAgeMs: number;
  consumers: number;
  published: number;
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
  purged: number;
  dropped: number;
  redriven: number;
}

export interface QueueInfo {
  name: string;
  kind: QueueKind;
  attributes: QueueAttributes;
  stats: QueueStats;
}

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** One queue's part of a send as the broker plans it (sendCopies). */
interface PlannedSend extends QueueSend {
  record: QueueRecord;
  /** The earliest visibility time of its messages, and how many are visible at the send's now. */
  firstVisibleAt: number;
  visibleNow: number;
}

/** Whether a send can hand messages off (store.ts Handoff): the store would lease some of them. */
function handsOff(send: PlannedSend): boolean {
  return (
    send.record.kind === "standard" &&
    send.policy.overflow === null &&
    send.visibleNow > 0 &&
    send.messages.every((message) => message.dedupId === null)
  );
}

/** Bounds on one housekeeping pass, so one queue's backlog never holds a commit for long. */
const expireBatchMax = 10_000;
const deadLetterBatchMax = 1_000;
const housekeepingRetryMs = 1_000;
/** How often a node that does not lead housekeeping tries to take the lead. */
const leadershipCheckMs = 5_000;
/** How soon the leader looks at a queue after another node wrote messages to it. */
const leaderCatchUpMs = 1_000;

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
   * The queue's version read before the look of an earlier receive that took fewer than it asked
   * for, so found the queue drained (receiveLooking answers it). If no notification came since, a
   * long poll skips its first look, which could only find nothing, and waits at once.
   */
  drainedAtVersion?: number;
  /** Called each time a look of this long poll finds nothing and it waits on: the queue is drained. */
  onDrained?: () => void;
}

export class QueueBroker {
  private readonly queues = new Map<string, QueueRecord>();
  private readonly waiters: Waiters;
  private readonly handoffs: Handoffs;
  private readonly scheduler: Scheduler;
  private readonly newId: () => string;
  /** The end of the last dead-letter sweep per queue: rows that became visible after it are looked at. */
  private readonly sweptUntil = new Map<string, number>();
  private readonly housekeeping = new Map<string, { rerun: boolean }>();
  private readonly receiving = new Map<string, number>();
  private stopped = false;
  /** Whether this node led housekeeping at its last check. */
  private leading = false;
  private cancelLeadershipCheck: (() => void) | undefined;
  /** Messages that left with their deleted queue; the queue's own counters went with it. */
  removedWithDeletedQueues = 0;
  /** Messages whose body failed its checksum as a lease read them, since this process started. */
  corruptFound = 0;
  private readonly tasks: RedriveTasks;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly log: Logger,
    /** Resolves dead-letter exchanges; shared with the exchange broker. */
    readonly router: Router = new Router(store),
  ) {
    this.waiters = new Waiters(clock);
    this.handoffs = new Handoffs(this.waiters, (queue, leaseExpiresAt) =>
      this.scheduler.offer(queue, leaseExpiresAt),
    );
    this.scheduler = new Scheduler(clock, (queue) => this.runHousekeeping(queue));
    this.newId = uuidv7Generator(clock);
    this.tasks = new RedriveTasks(
      { movable: (queue) => this.movable(queue), move: (queue, to, max) => this.move(queue, to, max) },
      clock,
      this.newId,
      (error, task) =>
        this.log.error({ err: error, task: task.id, queue: task.queue }, "redrive step failed"),
    );
  }

  /** Loads the queues and looks at each once, so due work left from before a restart is done. */
  async start(): Promise<void> {
    this.store.watch((event) => this.onStoreEvent(event));
    await this.checkLeadership();
    for (const queue of await this.store.queueList()) {
      this.queues.set(queue.name, queue);
      this.scheduler.offer(queue.name, this.clock.now());
    }
  }

  /** Resolves when the store answers; /readyz asks this. */
  ready(): Promise<void> {
    return this.store.ping();
  }

  /** Ends every long poll and timer; the store stays open for the caller to close. */
  stop(): void {
    this.stopped = true;
    this.tasks.stop();
    this.cancelLeadershipCheck?.();
    this.scheduler.stop();
    this.waiters.notifyAll();
  }

  /** Another node changed the store: wake long polls, and drop cached attributes that may be stale. */
  private onStoreEvent(event: StoreEvent): void {
    if (event.kind === "resync") {
      this.queues.clear();
      this.waiters.notifyAll();
      // Messages other nodes committed meanwhile may not have been announced: the leader catches up.
      if (this.leading) {
        this.offerAllQueues(this.clock.now() + leaderCatchUpMs).catch((error: unknown) =>
          this.log.error({ err: error }, "listing the queues to catch up on failed"),
        );
      }
      return;
    }
    if (event.kind === "exchange" || event.kind === "signal") return;
    if (event.kind === "queue") {
      this.queues.delete(event.queue);
      this.scheduler.offer(event.queue, this.clock.now());
    } else if (this.leading) {
      // Messages arrived through another node: the leader must learn their retention and lease ends.
      // Offers within the interval share one housekeeping pass.
      this.scheduler.offer(event.queue, this.clock.now() + leaderCatchUpMs);
    }
    this.waiters.notify(event.queue);
  }

  private async queue(name: string): Promise<QueueRecord> {
    const cached = this.queues.get(name);
    if (cached) return cached;
    const stored = await this.store.queueGet({ name });
    if (!stored) throw queueNotFound(name);
    this.queues.set(name, stored);
    return stored;
  }

  async putQueue(name: string, input: QueueAttributesInput): Promise<{ created: boolean; queue: QueueInfo }> {
    checkName(name);
    if (input.deadLetter)
      checkName("queue" in input.deadLetter ? input.deadLetter.queue : input.deadLetter.exchange);
    if (input.deadLetter && "routingKey" in input.deadLetter && input.deadLetter.routingKey !== undefined) {
      checkRoutingKey(input.deadLetter.routingKey);
    }
    const existing = await this.store.queueGet({ name });
    const kind = input.kind ?? existing?.kind ?? "standard";
    if (existing && existing.kind !== kind) {
      throw queueKindMismatch(name, existing.kind);
    }
    const attributes = resolveAttributes(name, existing?.attributes ?? initialAttributes(kind), input);
    const { created, queue } = await this.store.queueUpsert({
      name,
      kind,
      attributes,
      now: this.clock.now(),
    });
    this.queues.set(name, queue);
    this.scheduler.offer(name, this.clock.now());
    return { created, queue: await this.describe(queue) };
  }

  async getQueue(name: string): Promise<QueueInfo> {
    const queue = await this.store.queueGet({ name });
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
    const now = this.clock.now();
    const listed = await this.store.queueListWithDepth({ ...page, now });
    return listed.map(({ queue, depth }) => this.info(queue, depth, now));
  }

  async deleteQueue(name: string): Promise<{ removed: number }> {
    const result = await this.store.queueDelete({ name });
    // The bindings to the queue went with it.
    this.router.invalidate();
    this.removedWithDeletedQueues += result.removed;
    this.forget(name);
    return result;
  }

  private forget(name: string): void {
    this.queues.delete(name);
    this.sweptUntil.delete(name);
    this.scheduler.forget(name);
    // Long polls on the queue look again and find it gone.
    this.waiters.notify(name);
  }

  private async describe(queue: QueueRecord): Promise<QueueInfo> {
    const now = this.clock.now();
    return this.info(queue, await this.store.queueDepth({ name: queue.name, now }), now);
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
        consumers: this.receiving.get(queue.name) ?? 0,
        ...queue.counters,
      },
    };
  }

  async stats(name: string): Promise<QueueStats> {
    return (await this.getQueue(name)).stats;
  }

  /**
   * Stores the valid messages of the batch in one transaction; an invalid item gets its own error and
   * is not stored. Resolves only after the commit, so an id in the answer is a durable confirm.
   */
  async send(name: string, messages: OutgoingMessage[]): Promise<SendResult[]> {
    checkBatchSize(messages.length);
    await this.queue(name);
    const queues = [name];
    const results = await this.sendCopies(messages.map((message) => ({ message, queues })));
    return results.map((result) =>
      "error" in result ? result : { id: result.id, duplicate: result.duplicate },
    );
  }

  /**
   * Stores a copy of each message in each of its queues, all in one transaction: an item lands in
   * every one of its queues or, if any of them refuses it (too large for that queue, say), in none and
   * gets its own error. Every copy of an item has the same id. Each queue applies its own
   * deduplication and overflow policy; a queue that refuses by overflow (queue_full) fails the whole
   * call, which then stores nothing. `routed` counts the copies stored; an item that every queue
   * already had is a `duplicate`, answered with the id stored first. This is an exchange publish's
   * write.
   */
  async sendCopies(
    items: { message: OutgoingMessage; queues: string[] }[],
  ): Promise<({ id: string; routed: number; duplicate: boolean } | { error: HopperError })[]> {
    const now = this.clock.now();
    // Each queue is looked up once per call: a missing one refuses every item routed to it.
    const records = new Map<string, QueueRecord | HopperError>();
    for (const item of items) {
      for (const name of item.queues)
        if (!records.has(name)) records.set(name, await this.queueOrError(name));
    }
    const sends = new Map<string, PlannedSend>();
    /** Where each item's copies are: its send and its index there. */
    const placed: ({ id: string; copies: { send: QueueSend; index: number }[] } | { error: HopperError })[] =
      [];
    for (const { message, queues } of items) {
      const refusal = refusalOf(message, queues, records);
      if (refusal) {
        placed.push({ error: refusal });
        continue;
      }
      const id = this.newId();
      const copies: { send: QueueSend; index: number }[] = [];
      for (const name of queues) {
        const queue = records.get(name) as QueueRecord;
        const visibleAt = now + (message.delayMs ?? queue.attributes.delayMs);
        let send = sends.get(queue.name);
        if (!send) {
          const policy = await this.sendPolicy(queue);
          send = {
            queue: queue.name,
            record: queue,
            messages: [],
            policy,
            firstVisibleAt: visibleAt,
            visibleNow: 0,
          };
          sends.set(queue.name, send);
        }
        send.firstVisibleAt = Math.min(send.firstVisibleAt, visibleAt);
        if (visibleAt <= now) send.visibleNow++;
        copies.push({ send, index: send.messages.length });
        send.messages.push({
          id,
          body: message.body,
          contentType: message.contentType,
          headers: message.headers ?? {},
          key: message.key ?? null,
          priority: message.priority ?? 0,
          dedupId: dedupIdFor(message, queue.attributes),
          publishedAt: now,
          visibleAt,
        });
      }
      placed.push({ id, copies });
    }
    if (sends.size === 0)
      return placed.map((item) => ("error" in item ? item : { id: item.id, routed: 0, duplicate: false }));
    const all = [...sends.values()];
    for (const send of all) await this.checkPushback(send.record, now);
    // A long poll waiting on a queue takes the send's messages as they are written (handoffs.ts).
    const tickets = new Map<PlannedSend, HandoffTicket>();
    for (const send of all) {
      const ticket = handsOff(send) ? this.handoffs.take(send.queue, send.visibleNow, now) : undefined;
      if (ticket) tickets.set(send, ticket);
    }
    const sending = this.store.queueSendMany({
      sends: all.map((send) => {
        const { queue, messages, policy } = send;
        const handoff = tickets.get(send)?.handoff;
        return handoff ? { queue, messages, policy, handoff } : { queue, messages, policy };
      }),
      now,
    });
    // The other long polls wake for what the hand-offs leave. Where writes commit in call order, a
    // long poll woken as the send is called leases in its transaction, after it, and shares its commit
    // (a send that fails leaves it an empty look); elsewhere a long poll wakes once the send has
    // committed, and then only if the send left a message available.
    const wakeAsCalled = this.store.commitsInCallOrder;
    const mayLeave = (send: PlannedSend) => send.visibleNow > (tickets.get(send)?.handoff.max ?? 0);
    if (wakeAsCalled) for (const send of all) if (mayLeave(send)) this.waiters.notify(send.queue);
    let answers: SendOutcome[];
    try {
      answers = await sending;
    } catch (error) {
      for (const ticket of tickets.values()) this.handoffs.finish(ticket, []);
      throw error;
    }
    all.forEach((send, i) => {
      const leased = answers[i]?.leased ?? [];
      const ticket = tickets.get(send);
      if (ticket) this.handoffs.finish(ticket, leased);
      const woken = wakeAsCalled && mayLeave(send);
      if (!woken && send.visibleNow > leased.length) this.waiters.notify(send.queue);
    });
    const idsOf = new Map(all.map((send, i) => [send as QueueSend, answers[i]?.ids ?? []]));
    for (const send of all) this.sent(send.record, send.policy, send.firstVisibleAt, now);
    return placed.map((item) => {
      if ("error" in item) return item;
      // A copy answered with another id was a duplicate there; an item no queue stored anew is one.
      let routed = 0;
      let firstAnswered: string | undefined;
      for (const { send, index } of item.copies) {
        const answered = idsOf.get(send)?.[index] ?? item.id;
        firstAnswered ??= answered;
        if (answered === item.id) routed++;
      }
      const duplicate = routed === 0 && firstAnswered !== undefined;
      return { id: duplicate ? (firstAnswered as string) : item.id, routed, duplicate };
    });
  }

  /** After messages were written to the queue: set the timers they need. */
  private sent(queue: QueueRecord, policy: SendPolicy, firstVisibleAt: number, now: number): void {
    const name = queue.name;
    if (firstVisibleAt > now) this.scheduler.offer(name, firstVisibleAt);
    this.scheduler.offer(name, now + queue.attributes.retentionMs);
    // The sweep forgets dedupIds whose window ended.
    if (policy.dedupWindowMs > 0) this.scheduler.offer(name, now + policy.dedupWindowMs);
    if (policy.overflow?.policy === "dead-letter-oldest") this.deadLettered(policy.overflow.deadLetter, 1);
  }

  /**
   * Refuses a publish, whole, while the queue is over its pushback limits: it holds pushbackDepth
   * messages or more (depthOf its counters, read fresh), or its oldest message is pushbackAgeMs old or
   * older. Unlike maxDepth this is a signal to producers, read before the write: two publishes may
   * both pass at the limit. Dead letters and redrives are not publishes and are not refused.
   */
  private async checkPushback(queue: QueueRecord, now: number): Promise<void> {
    const { pushbackDepth, pushbackAgeMs } = queue.attributes;
    if (pushbackDepth === null && pushbackAgeMs === null) return;
    const current = pushbackDepth === null ? undefined : await this.store.queueGet({ name: queue.name });
    const { oldestPublishedAt } =
      pushbackAgeMs === null
        ? { oldestPublishedAt: null }
        : await this.store.queueNextEvents({ queue: queue.name, now });
    const depth = current ? depthOf(current.counters) : 0;
    const refusal = pushbackRefusal(queue.name, queue.attributes, { depth, oldestPublishedAt, now });
    if (refusal) throw refusal;
  }

  /** What a send into the queue applies: its deduplication and overflow policy. */
  private async sendPolicy(queue: QueueRecord): Promise<SendPolicy> {
    const needsRoute =
      queue.attributes.maxDepth !== null && queue.attributes.overflow === "dead-letter-oldest";
    return sendPolicyOf(queue.attributes, needsRoute ? await this.deadLetterRoute(queue) : null);
  }

  /** The queue, or the catalog error that says why there is none. */
  private async queueOrError(name: string): Promise<QueueRecord | HopperError> {
    try {
      return await this.queue(name);
    } catch (error) {
      if (error instanceof HopperError) return error;
      throw error;
    }
  }

  /**
   * Leases up to `max` messages. With a wait, it returns as soon as at least one message is leased,
   * or empty once the wait is over (or the caller went away).
   */
  async receive(name: string, options: ReceiveOptions): Promise<LeasedMessage[]> {
    return (await this.receiveLooking(name, options)).messages;
  }

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
    let queue = await this.queue(name);
    const waitMs = options.waitMs ?? queue.attributes.receiveWaitMs;
    const deadlineMs = this.clock.now() + Math.min(waitMs, limits.waitMsMax);
    const counted = options.countAsConsumer !== false;
    if (counted) this.consumerOpened(name);
    // A waiter takes hand-offs (a send leasing to it as it writes), but not to delete them at once.
    const terms: HandoffTerms | undefined = options.autoAck
      ? undefined
      : { max, visibilityTimeoutMs: options.visibilityTimeoutMs ?? queue.attributes.visibilityTimeoutMs };
    try {
      for (let look = 0; ; look++) {
        const version = this.waiters.version(name);
        // Whatever makes messages available notifies (a send, a nack, a move, another node's commit,
        // a delay or lease falling due through the scheduler), so an unchanged version after a drained
        // look means there is nothing to take yet. Only a long poll skips: it then waits below, having
        // offered the scheduler the next time something falls due.
        const skip = look === 0 && waitMs > 0 && options.drainedAtVersion === version;
        const leased = skip ? [] : await this.lease(queue, max, options.visibilityTimeoutMs, options.autoAck);
        const kept = await this.unlessLeft(name, leased, options);
        if (kept.length > 0 || options.signal?.aborted || this.stopped || this.clock.now() >= deadlineMs) {
          return { messages: kept, version };
        }
        options.onDrained?.();
        // Claimed by a send: what it leased is ours once the send is done; nothing means look again.
        const end = await this.waitFor(name, deadlineMs, version, options.signal, terms);
        const handed = end ? await end.handoff : [];
        if (handed.length > 0) return { messages: await this.unlessLeft(name, handed, options), version };
        queue = await this.queue(name);
      }
    } finally {
      if (counted) this.consumerClosed(name);
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
   * A receive's wait (Waiters.wait). Another node may hold leases or delays this node has not seen, so
   * it reads the queue's next visibility time and offers it to the scheduler; the waiter is registered
   * before that read, so that a send committed meanwhile can hand off to it. If the read fails, the
   * wait ends at once, unless a send has claimed it: its hand-off is then the answer.
   */
  private async waitFor(
    name: string,
    deadlineMs: number,
    version: number,
    signal: AbortSignal | undefined,
    terms: HandoffTerms | undefined,
  ): Promise<WaitEnd> {
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) stop.abort();
    try {
      const waiting = this.waiters.wait(name, deadlineMs, version, stop.signal, terms);
      // Awaited below in either case; this only keeps a refusal from counting as unhandled meanwhile.
      waiting.catch(() => {});
      try {
        const { nextVisibleAt } = await this.store.queueNextEvents({ queue: name, now: this.clock.now() });
        if (nextVisibleAt !== null && nextVisibleAt < deadlineMs) this.scheduler.offer(name, nextVisibleAt);
      } catch (error) {
        stop.abort();
        const end = await waiting;
        if (end) return end;
        throw error;
      }
      return await waiting;
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

  /** Counts the notifications that the queue may have messages to take; see receive's drainedAtVersion. */
  queueVersion(name: string): number {
    return this.waiters.version(name);
  }

  /**
   * Counts a consumer of the queue for stats: a receive call in progress, or a push consumer while it
   * lives. Every consumerOpened is matched by one consumerClosed.
   */
  consumerOpened(name: string): void {
    this.receiving.set(name, (this.receiving.get(name) ?? 0) + 1);
  }

  consumerClosed(name: string): void {
    const left = (this.receiving.get(name) ?? 1) - 1;
    if (left > 0) this.receiving.set(name, left);
    else this.receiving.delete(name);
  }

  private async lease(
    queue: QueueRecord,
    max: number,
    visibilityTimeoutMs?: number,
    autoAck = false,
  ): Promise<LeasedMessage[]> {
    const now = this.clock.now();
    const leaseMs = visibilityTimeoutMs ?? queue.attributes.visibilityTimeoutMs;
    const leaseExpiresAt = now + leaseMs;
    const deadLetter = await this.deadLetterRoute(queue);
    const {
      messages,
      deadLettered,
      corrupt = 0,
    } = await this.store.queueLease({
      queue: queue.name,
      max,
      now,
      leaseExpiresAt,
      expiredBefore: now - queue.attributes.retentionMs,
      inFlightMax: limits.inFlightMax,
      deadLetter,
      autoAck,
    });
    if (messages.length > 0 && !autoAck) this.scheduler.offer(queue.name, leaseExpiresAt);
    // Deleted at once, the FIFO heads handed their groups on: other long polls may take the next.
    if (messages.length > 0 && autoAck && queue.kind === "fifo") this.waiters.notify(queue.name);
    this.deadLettered(deadLetter, deadLettered);
    if (corrupt > 0) {
      this.corruptFound += corrupt;
      // Never silent: a body changed on disk is the store's damage, which an operator must hear of.
      this.log.error(
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
    const queue = await this.queue(name);
    const results = await this.store.queueAck({
      queue: name,
      receipts,
      applied: itemResultsTo(applied),
    });
    // In a FIFO queue an ack hands the group to its next message, which a long poll may be waiting for.
    if (queue.kind === "fifo" && results.some((result) => "ok" in result)) this.waiters.notify(name);
    return results.map(toItemResult);
  }

  /**
   * Ends leases early; each message is retried after `delayMs`, or after the queue's retry policy.
   * `applied` as in ack.
   */
  async nack(
    name: string,
    receipts: string[],
    delayMs?: number,
    applied?: (results: ItemResult[]) => void,
  ): Promise<ItemResult[]> {
    checkBatchSize(receipts.length);
    if (delayMs !== undefined) checkDelay(delayMs);
    const queue = await this.queue(name);
    const now = this.clock.now();
    let earliestRetryMs = Number.POSITIVE_INFINITY;
    const deadLetter = await this.deadLetterRoute(queue);
    const { results, deadLettered } = await this.store.queueNack({
      queue: name,
      receipts,
      now,
      retryDelayMs: (deliveryCount) => {
        const ms = delayMs ?? retryDelayMs(queue.attributes.retry, deliveryCount, this.random.float);
        earliestRetryMs = Math.min(earliestRetryMs, ms);
        return ms;
      },
      deadLetter,
      applied: itemResultsTo(applied),
    });
    this.deadLettered(deadLetter, deadLettered);
    const groupMovedOn = queue.kind === "fifo" && deadLettered > 0;
    if (earliestRetryMs === 0 || groupMovedOn) this.waiters.notify(name);
    else if (Number.isFinite(earliestRetryMs)) this.scheduler.offer(name, now + earliestRetryMs);
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
    await this.queue(name);
    const leaseExpiresAt = this.clock.now() + visibilityTimeoutMs;
    const results = await this.store.queueExtend({ queue: name, receipts, leaseExpiresAt });
    // A lease cut short (visibilityTimeoutMs 0 releases the message at once) may wake a waiter.
    this.scheduler.offer(name, leaseExpiresAt);
    return results.map(toItemResult);
  }

  async peek(name: string, state: MessageState, limit: number): Promise<StoredMessage[]> {
    await this.queue(name);
    return this.store.queuePeek({ queue: name, state, limit, now: this.clock.now() });
  }

  async purge(name: string): Promise<{ purged: number }> {
    await this.queue(name);
    return this.store.queuePurge({ queue: name });
  }

  /**
   * Starts moving the queue's messages (a dead-letter queue's, usually) back to the queue each came
   * from (its x-original-queue header), or to `to`: a task, whose progress `task()` reads.
   */
  async redrive(
    name: string,
    options: { to?: string; max?: number; ratePerSecond?: number },
  ): Promise<TaskInfo> {
    await this.queue(name);
    if (options.to !== undefined) await this.queue(options.to);
    if (options.max !== undefined && !(Number.isInteger(options.max) && options.max >= 1)) {
      throw new HopperError("invalid_request", "max must be a positive integer.");
    }
    if (
      options.ratePerSecond !== undefined &&
      !(options.ratePerSecond > 0 && options.ratePerSecond <= limits.redriveRateMax)
    ) {
      throw new HopperError(
        "invalid_request",
        `ratePerSecond must be above 0 and at most ${limits.redriveRateMax}.`,
      );
    }
    return this.tasks.start(name, options);
  }

  task(id: string): TaskInfo {
    return this.tasks.get(id);
  }

  listTasks(): TaskInfo[] {
    return this.tasks.list();
  }

  cancelTask(id: string): TaskInfo {
    return this.tasks.cancel(id);
  }

  /** What a redrive of the queue would move now: its messages not in flight. */
  private async movable(name: string): Promise<number> {
    const depth = await this.store.queueDepth({ name, now: this.clock.now() });
    return depth.available + depth.delayed;
  }

  /** One redrive step; the queues it wrote to wake their long polls. */
  private async move(
    name: string,
    to: string | null,
    max: number,
  ): Promise<{ moved: number; held: number; stoppedBy: HopperError | null }> {
    // With `to`, that queue is the only target; otherwise any queue a header names may be one.
    const candidates = to === null ? await this.store.queueList() : [await this.queueOrError(to)];
    const policies = new Map<string, SendPolicy>();
    for (const queue of candidates) {
      if (!(queue instanceof HopperError)) policies.set(queue.name, await this.sendPolicy(queue));
    }
    const now = this.clock.now();
    const { moved, held, targets, stoppedBy } = await this.store.queueMove({
      queue: name,
      to,
      max,
      now,
      policies,
    });
    // Moving FIFO heads out hands their groups on.
    if (moved > 0) this.waiters.notify(name);
    for (const target of targets) {
      const record = await this.queueOrError(target);
      if (record instanceof HopperError) continue;
      this.waiters.notify(target);
      this.sent(record, policies.get(target) ?? sendPolicyOf(record.attributes, null), now, now);
    }
    return { moved, held, stoppedBy };
  }

  /**
   * Does the work that fell due in one queue: deletes what is past retention, dead-letters what used
   * its last delivery, wakes long polls for what became visible, then sets the next due time.
   */
  private async runHousekeeping(name: string): Promise<void> {
    const running = this.housekeeping.get(name);
    if (running) {
      running.rerun = true;
      return;
    }
    const state = { rerun: true };
    this.housekeeping.set(name, state);
    try {
      while (state.rerun && !this.stopped) {
        state.rerun = false;
        await this.housekeepOnce(name);
      }
    } catch (error) {
      // A pass still running when the broker stopped meets a closed store: nothing to report.
      if (this.stopped) return;
      this.log.error({ err: error, queue: name }, "housekeeping failed; retrying");
      this.scheduler.offer(name, this.clock.now() + housekeepingRetryMs);
    } finally {
      this.housekeeping.delete(name);
    }
  }

  /**
   * Messages arrived in a queue's dead-letter queue: its long polls may take them, and its timer must
   * now cover their retention, so it is looked at at once.
   */
  private deadLettered(route: DeadLetterRoute | null, count: number): void {
    if (count === 0 || !route) return;
    for (const target of route.queues) {
      this.waiters.notify(target);
      this.scheduler.offer(target, this.clock.now());
    }
  }

  /** The queues a queue's dead letters go to now: its dead-letter queue, or where its exchange routes. */
  private async deadLetterRoute(queue: QueueRecord): Promise<DeadLetterRoute | null> {
    const target = queue.attributes.deadLetter;
    if (!target) return null;
    if ("queue" in target) return { queues: [target.queue], maxDeliveries: target.maxDeliveries };
    // A dead-letter exchange that routes back to the source queue would put the message back with a
    // fresh delivery count, for ever: the source is never one of its own dead-letter queues.
    const queues = (await this.router.route(target.exchange, target.routingKey)).filter(
      (name) => name !== queue.name,
    );
    return { queues, maxDeliveries: target.maxDeliveries };
  }

  private async housekeepOnce(name: string): Promise<void> {
    const queue = await this.store.queueGet({ name });
    if (!queue) return this.forget(name);
    this.queues.set(name, queue);
    const now = this.clock.now();
    const leading = await this.checkLeadership();
    if (leading) await this.sweep(queue, now);
    this.waiters.notify(name);
    const next = await this.store.queueNextEvents({ queue: name, now });
    if (next.nextVisibleAt !== null) this.scheduler.offer(name, next.nextVisibleAt);
    // Retention is the leader's work. Another node would only find the due time still due (it does not
    // sweep) and look again at once, without end.
    if (leading && next.oldestPublishedAt !== null) {
      this.scheduler.offer(name, next.oldestPublishedAt + queue.attributes.retentionMs);
    }
  }

  /**
   * Asks the store whether this node leads housekeeping. A node that becomes leader looks at every
   * queue at once, since it may know nothing of their due times (the old leader kept them); a node that
   * does not lead asks again later, so that some node always takes over from a dead leader.
   */
  /** Offers every queue in the store to the housekeeping scheduler at `at`. */
  private async offerAllQueues(at: number): Promise<void> {
    for (const queue of await this.store.queueList()) this.scheduler.offer(queue.name, at);
  }

  private async checkLeadership(): Promise<boolean> {
    const leading = await this.store.housekeepingLeader();
    if (leading && !this.leading) await this.offerAllQueues(this.clock.now());
    this.leading = leading;
    if (!leading && !this.stopped && !this.cancelLeadershipCheck) {
      this.cancelLeadershipCheck = this.clock.setTimer(this.clock.now() + leadershipCheckMs, () => {
        this.cancelLeadershipCheck = undefined;
        return this.checkLeadership().then(
          () => {},
          (error: unknown) => this.log.error({ err: error }, "leadership check failed"),
        );
      });
    }
    return leading;
  }

  /** Deletes what is past retention and dead-letters what used its last delivery, in bounded batches. */
  private async sweep(queue: QueueRecord, now: number): Promise<void> {
    const name = queue.name;
    const expiredBefore = now - queue.attributes.retentionMs;
    let expired: number;
    do {
      ({ expired } = await this.store.queueExpire({ queue: name, expiredBefore, max: expireBatchMax, now }));
    } while (expired === expireBatchMax);
    const deadLetter = await this.deadLetterRoute(queue);
    if (deadLetter) {
      let deadLettered: number;
      do {
        ({ deadLettered } = await this.store.queueDeadLetterExhausted({
          queue: name,
          visibleFrom: this.sweptUntil.get(name) ?? Number.MIN_SAFE_INTEGER,
          now,
          max: deadLetterBatchMax,
          deadLetter,
        }));
        this.deadLettered(deadLetter, deadLettered);
      } while (deadLettered === deadLetterBatchMax);
    }
    this.sweptUntil.set(name, now);
  }
}

const namePattern = new RegExp(limits.namePattern);

function checkName(name: string): void {
  if (!namePattern.test(name)) {
    throw new HopperError("invalid_name", `"${name.slice(0, 200)}" is not a valid name.`, {
      name: name.slice(0, 200),
    });
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

function checkBatchSize(size: number): void {
  if (size < 1 || size > limits.batchSizeMax) {
    throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} items.`, {
      size,
      max: limits.batchSizeMax,
    });
  }
}

function checkDelay(delayMs: number): void {
  if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > limits.retryDelayMsMax) {
    throw new HopperError("invalid_request", `delayMs must be from 0 to ${limits.retryDelayMsMax}.`);
  }
}

/** Why a message cannot go to one of its queues (looked up in `records`), if it cannot. */
function refusalOf(
  message: OutgoingMessage,
  queues: string[],
  records: Map<string, QueueRecord | HopperError>,
): HopperError | undefined {
  for (const name of queues) {
    const target = records.get(name) as QueueRecord | HopperError;
    if (target instanceof HopperError) return target;
    const error = checkMessage(message, target);
    if (error) return error;
  }
  return undefined;
}

function checkMessage(message: OutgoingMessage, queue: QueueRecord): HopperError | undefined {
  const attributes = queue.attributes;
  if (queue.kind === "fifo" && message.priority !== undefined && message.priority !== 0) {
    return new HopperError(
      "invalid_request",
      "A FIFO queue delivers in order per key: it has no priorities.",
      {
        queue: queue.name,
      },
    );
  }
  if (
    message.priority !== undefined &&
    !(Number.isInteger(message.priority) && message.priority >= 0 && message.priority <= 9)
  ) {
    return new HopperError("invalid_request", "priority must be an integer from 0 to 9.");
  }
  const bytes = bodyByteLength(message.body);
  if (bytes > attributes.maxMessageBytes) {
    return new HopperError(
      "message_too_large",
      `The body is ${bytes} bytes; this queue takes at most ${attributes.maxMessageBytes}.`,
      { bytes, max: attributes.maxMessageBytes },
    );
  }
  if (message.delayMs !== undefined && (message.delayMs < 0 || message.delayMs > attributes.retentionMs)) {
    return new HopperError("invalid_request", "delayMs must be from 0 to the queue's retention.", {
      max: attributes.retentionMs,
    });
  }
  return undefined;
}

/** A store's `applied` hook that hands its results on as the broker's (toItemResult). */
function itemResultsTo(applied: ((results: ItemResult[]) => void) | undefined): Applied | undefined {
  return applied && ((results) => applied(results.map(toItemResult)));
}

function toItemResult(result: ReceiptResult): ItemResult {
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
