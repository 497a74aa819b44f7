/**
 * Sending: a queue send and the write of an exchange publish (sendCopies) check each message against
 * each of its queues, hand messages off to waiting receives (handoffs.ts), write every copy in one
 * store call, wake the long polls for what the hand-offs left, and set the timers the messages need.
 */
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { bodyByteLength } from "../model/message.js";
import { dedupIdFor, type SendPolicy } from "../model/policies.js";
import { depthOf, type QueueRecord } from "../model/queue.js";
import { pushbackRefusal } from "../model/queue-attributes.js";
import type { QueueSend, SendOutcome, StreamAppendCopy } from "../store/store.js";
import type { Handoffs, HandoffTicket } from "./handoffs.js";
import type { QueueAdmin } from "./queue-admin.js";
import { checkBatchSize, deadLettered, type QueueContext, wakeQueue } from "./queue-context.js";

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

/** One item of sendCopies answered: its id and how many of its queues stored it anew. */
export type CopiesResult = { id: string; routed: number; duplicate: boolean } | { error: HopperError };

/** One queue's part of a send as the broker plans it (sendCopies). */
interface PlannedSend extends QueueSend {
  record: QueueRecord;
  /** The earliest visibility time of its messages, and how many are visible at the send's now. */
  firstVisibleAt: number;
  visibleNow: number;
}

/** Where each item's copies are: its send and its index there; or why it is refused. */
type PlacedItem = { id: string; copies: { send: QueueSend; index: number }[] } | { error: HopperError };

export class QueueSender {
  constructor(
    private readonly context: QueueContext,
    private readonly admin: QueueAdmin,
    private readonly handoffs: Handoffs,
    private readonly newId: () => string,
  ) {}

  /**
   * Stores the valid messages of the batch in one transaction; an invalid item gets its own error and
   * is not stored. Resolves only after the commit, so an id in the answer is a durable confirm.
   */
  async send(name: string, messages: OutgoingMessage[]): Promise<SendResult[]> {
    checkBatchSize(messages.length);
    await this.admin.queue(name);
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
   * write; `appends`, its copies into streams, are written in the same transaction.
   */
  async sendCopies(
    items: { message: OutgoingMessage; queues: string[] }[],
    appends: StreamAppendCopy[] = [],
  ): Promise<CopiesResult[]> {
    const now = this.context.clock.now();
    // Each queue is looked up once per call: a missing one refuses every item routed to it.
    const records = new Map<string, QueueRecord | HopperError>();
    for (const item of items) {
      for (const name of item.queues)
        if (!records.has(name)) records.set(name, await this.admin.queueOrError(name));
    }
    const sends = new Map<string, PlannedSend>();
    const placed: PlacedItem[] = [];
    for (const { message, queues } of items) {
      const refusal = refusalOf(message, queues, records);
      placed.push(refusal ? { error: refusal } : await this.place(message, queues, records, sends, now));
    }
    if (sends.size === 0) {
      if (appends.length > 0) await this.context.store.queueSendMany({ sends: [], now, appends });
      return placed.map((item) => ("error" in item ? item : { id: item.id, routed: 0, duplicate: false }));
    }
    const all = [...sends.values()];
    for (const send of all) await this.checkPushback(send.record, now);
    const answers = await this.write(all, now, appends);
    const idsOf = new Map(all.map((send, i) => [send as QueueSend, answers[i]?.ids ?? []]));
    for (const send of all) this.sent(send.record, send.policy, send.firstVisibleAt, now);
    return placed.map((item) => answerOf(item, idsOf));
  }

  /** Adds a message's copies to the sends of its queues (planned in `sends`), under one new id. */
  private async place(
    message: OutgoingMessage,
    queues: string[],
    records: Map<string, QueueRecord | HopperError>,
    sends: Map<string, PlannedSend>,
    now: number,
  ): Promise<PlacedItem> {
    const id = this.newId();
    const copies: { send: QueueSend; index: number }[] = [];
    for (const name of queues) {
      const queue = records.get(name) as QueueRecord;
      const visibleAt = now + (message.delayMs ?? queue.attributes.delayMs);
      let send = sends.get(queue.name);
      if (!send) {
        const policy = await this.admin.sendPolicy(queue);
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
    return { id, copies };
  }

  /**
   * Writes the planned sends in one store call, handing messages off to the long polls (and push
   * consumers' credit) waiting on their queues, and wakes the other long polls for what is left.
   */
  private async write(all: PlannedSend[], now: number, appends: StreamAppendCopy[]): Promise<SendOutcome[]> {
    // A long poll waiting on a queue takes the send's messages as they are written (handoffs.ts).
    const tickets = new Map<PlannedSend, HandoffTicket>();
    for (const send of all) {
      const ticket = handsOff(send) ? this.handoffs.take(send.queue, send.visibleNow, now) : undefined;
      if (ticket) tickets.set(send, ticket);
    }
    const sending = this.context.store.queueSendMany({
      sends: all.map((send) => {
        const { queue, messages, policy } = send;
        const handoff = tickets.get(send)?.handoff;
        return handoff ? { queue, messages, policy, handoff } : { queue, messages, policy };
      }),
      now,
      ...(appends.length > 0 && { appends }),
    });
    // The other long polls wake for what the hand-offs leave. Where writes commit in call order, a
    // long poll woken as the send is called leases in its transaction, after it, and shares its commit
    // (a send that fails leaves it an empty look); elsewhere a long poll wakes once the send has
    // committed, and then only if the send left a message available.
    const wakeAsCalled = this.context.store.commitsInCallOrder;
    const mayLeave = (send: PlannedSend) => send.visibleNow > (tickets.get(send)?.handoff.max ?? 0);
    if (wakeAsCalled) for (const send of all) if (mayLeave(send)) wakeQueue(this.context, send.queue);
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
      if (!woken && send.visibleNow > leased.length) wakeQueue(this.context, send.queue);
    });
    return answers;
  }

  /** After messages were written to the queue (sent, or moved by a redrive): set the timers they need. */
  sent(queue: QueueRecord, policy: SendPolicy, firstVisibleAt: number, now: number): void {
    const { scheduler } = this.context;
    const name = queue.name;
    if (firstVisibleAt > now) scheduler.offer(name, firstVisibleAt);
    scheduler.offer(name, now + queue.attributes.retentionMs);
    // The sweep forgets dedupIds whose window ended.
    if (policy.dedupWindowMs > 0) scheduler.offer(name, now + policy.dedupWindowMs);
    if (policy.overflow?.policy === "dead-letter-oldest")
      deadLettered(this.context, policy.overflow.deadLetter, 1);
  }

  /**
   * Refuses a publish, whole, while the queue is over its pushback limits: it holds pushbackDepth
   * messages or more (depthOf its counters, read fresh), or its oldest message is pushbackAgeMs old or
   * older. Unlike maxDepth this is a signal to producers, read before the write: two publishes may
   * both pass at the limit. Dead letters and redrives are not publishes and are not refused.
   */
  private async checkPushback(queue: QueueRecord, now: number): Promise<void> {
    const { store } = this.context;
    const { pushbackDepth, pushbackAgeMs } = queue.attributes;
    if (pushbackDepth === null && pushbackAgeMs === null) return;
    const current = pushbackDepth === null ? undefined : await store.queueGet({ name: queue.name });
    const { oldestPublishedAt } =
      pushbackAgeMs === null
        ? { oldestPublishedAt: null }
        : await store.queueNextEvents({ queue: queue.name, now });
    const depth = current ? depthOf(current.counters) : 0;
    const refusal = pushbackRefusal(queue.name, queue.attributes, { depth, oldestPublishedAt, now });
    if (refusal) throw refusal;
  }
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

/** An item's answer: a copy answered with another id was a duplicate there; an item no queue stored anew is one. */
function answerOf(item: PlacedItem, idsOf: Map<QueueSend, string[]>): CopiesResult {
  if ("error" in item) return item;
  let routed = 0;
  let firstAnswered: string | undefined;
  for (const { send, index } of item.copies) {
    const answered = idsOf.get(send)?.[index] ?? item.id;
    firstAnswered ??= answered;
    if (answered === item.id) routed++;
  }
  const duplicate = routed === 0 && firstAnswered !== undefined;
  return { id: duplicate ? (firstAnswered as string) : item.id, routed, duplicate };
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
    !(Number.isInteger(message.priority) && message.priority >= 0 && message.priority <= limits.priorityMax)
  ) {
    return new HopperError("invalid_request", `priority must be an integer from 0 to ${limits.priorityMax}.`);
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
