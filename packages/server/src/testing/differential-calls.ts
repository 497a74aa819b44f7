/**
 * The calls of the log store's differential test (store/log/differential.test.ts): a seeded generator
 * of Store calls that keeps what it needs to draw sensible ones (the queues there are, the receipts
 * held), and draws them so that both stores must answer alike; that file's header says how.
 */
import assert from "node:assert/strict";
import type { MessageState, NewMessage } from "../model/message.js";
import { noSendPolicy, type SendPolicy, sendPolicyOf } from "../model/policies.js";
import type { DeadLetterRoute, QueueAttributes, QueueKind } from "../model/queue.js";
import type { Random } from "../random.js";
import type { QueueSend, Store } from "../store/store.js";
import { attributes as defaultAttributes, t0 } from "./conformance-fixtures.js";

export const queueNames = ["dlq", "std", "pri", "fifo", "grp"];
export const kindOf: Record<string, QueueKind> = {
  dlq: "standard",
  std: "standard",
  pri: "standard",
  fifo: "fifo",
  grp: "fifo",
};
export const exchangeTypes = { ex: "topic", dx: "direct", fan: "fanout" } as const;
export const exchangeNames = Object.keys(exchangeTypes) as (keyof typeof exchangeTypes)[];
export const invalidReceipts = ["", "not-a-receipt", "zz.zz", "1.1"];
export const states: MessageState[] = ["available", "delayed", "in-flight"];
/** Above any queue's size here: see the header on `max`. */
export const maxAll = 10_000;

export type Side = "sqlite" | "log";
export type Method = {
  [Name in keyof Store]: Store[Name] extends (...args: never[]) => Promise<unknown> ? Name : never;
}[keyof Store];

/** A receipt handed out by both stores for the same lease: each store is given back its own. */
export interface Handle {
  sqlite: string;
  log: string;
  queue: string;
  /** The lease that handed it out: a call, and for a hand-off the send's place in it. */
  lease: string;
}

/** A receipt in a call's params: the index of a Handle, or a literal (invalid) receipt. */
export type ReceiptRef = number | string;

export interface Call {
  method: Method;
  params: Record<string, unknown> | undefined;
  /** Reads are never issued in the same turn as other calls (see the header). */
  writes: boolean;
}

export type Outcome = { value: unknown } | { rejected: string };

/** The generator's draws: a Random of its own, apart from the stores'. */
export class Draw {
  constructor(private readonly random: Random) {}

  float(): number {
    return this.random.float();
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.random.float() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.random.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)] as T;
  }
}

/** Where a queue's dead letters go, as the broker resolves it (an exchange here routes nowhere). */
export function routeOf(attributes: QueueAttributes | undefined): DeadLetterRoute | null {
  const target = attributes?.deadLetter;
  if (!target) return null;
  return { queues: "queue" in target ? [target.queue] : [], maxDeliveries: target.maxDeliveries };
}

export function policyOf(attributes: QueueAttributes | undefined): SendPolicy {
  return attributes ? sendPolicyOf(attributes, routeOf(attributes)) : noSendPolicy;
}

/** Draws the calls, and keeps what it needs to draw sensible ones: the queues there are, the receipts. */
export class Calls {
  now = t0;
  readonly queues = new Map<string, QueueAttributes>();
  readonly handles: Handle[] = [];
  private index = 0;
  private leaseEnds = 0;
  private messages = 0;

  constructor(
    private readonly draw: Draw,
    private readonly seed: number,
  ) {}

  /** The next call, or 2-3 writes to issue together; the first calls create every queue. */
  next(): Call[] {
    const { draw } = this;
    if (this.index < queueNames.length) return [this.queueUpsert(queueNames[this.index++] as string)];
    this.index++;
    if (draw.chance(0.5)) this.now += draw.int(0, 40) * 1000;
    if (!draw.chance(0.08)) return [this.one()];
    const group: Call[] = [];
    const size = draw.int(2, 3);
    while (group.length < size) {
      const call = this.one();
      if (call.writes) group.push(call);
    }
    return group;
  }

  /** When leases taken by this call end: its last three digits are this call's alone (see ties). */
  private leaseEnd(leaseMs: number): number {
    this.leaseEnds++;
    assert.ok(this.leaseEnds < 1000, "more calls than lease-end residues");
    return this.now + leaseMs + this.leaseEnds;
  }

  private one(): Call {
    const { draw } = this;
    const queue = draw.chance(0.04) ? "nope" : draw.pick(queueNames);
    const choices: [number, () => Call][] = [
      [3, () => this.queueUpsert(draw.pick(queueNames))],
      [10, () => this.queueSendMany()],
      [9, () => this.queueLease(queue)],
      [5, () => this.receiptCall("queueAck", queue)],
      [3, () => this.receiptCall("queueNack", queue)],
      [2, () => this.receiptCall("queueExtend", queue)],
      [
        3,
        () => read("queuePeek", { queue, state: draw.pick(states), limit: draw.int(1, 10), now: this.now }),
      ],
      [1, () => read("queueDepth", { name: queue, now: this.now })],
      [1, () => this.queueListWithDepth()],
      [1, () => read("queueNextEvents", { queue, now: this.now })],
      [0.5, () => read("queueGet", { name: queue })],
      [0.5, () => read("queueList", undefined)],
      [0.5, () => read("exchangeList", undefined)],
      [1, () => this.queueExpire(queue)],
      [1, () => this.queueDeadLetterExhausted(queue)],
      [2, () => this.queueMove()],
      [0.5, () => write("queuePurge", { queue })],
      [0.25, () => write("queueDelete", { name: queue })],
      [1, () => this.exchangeUpsert()],
      [1, () => this.binding("bindingUpsert")],
      [0.7, () => this.binding("bindingDelete")],
      [0.2, () => write("exchangeDelete", { name: draw.pick(exchangeNames) })],
    ];
    let weight = draw.float() * choices.reduce((total, [w]) => total + w, 0);
    for (const [w, make] of choices) {
      weight -= w;
      if (weight < 0) return make();
    }
    return this.queueSendMany();
  }

  private queueUpsert(name: string): Call {
    const { draw } = this;
    const kind = draw.chance(0.05) ? (kindOf[name] === "fifo" ? "standard" : "fifo") : kindOf[name];
    const deadLetters = [
      null,
      { queue: "dlq", maxDeliveries: 2 },
      { queue: "dlq", maxDeliveries: 3 },
      { exchange: "dx", routingKey: "dead", maxDeliveries: 2 },
    ];
    const attributes: QueueAttributes = {
      ...defaultAttributes,
      deadLetter: name === "dlq" ? null : draw.pick(deadLetters),
      dedupWindowMs: draw.pick([0, 0, 60_000]),
      maxDepth: draw.pick([null, null, 4, 8]),
      overflow: draw.pick(["reject", "drop-oldest", "dead-letter-oldest"] as const),
      contentBasedDedup: false,
    };
    return write("queueUpsert", { name, kind, attributes, now: this.now });
  }

  private queueSendMany(): Call {
    const sends = Array.from({ length: this.draw.int(1, 3) }, () => this.send());
    return write("queueSendMany", { sends, now: this.now });
  }

  private send(): QueueSend {
    const { draw } = this;
    const queue = draw.chance(0.04) ? "nope" : draw.pick(queueNames);
    const policy = policyOf(this.queues.get(queue));
    const handoff = draw.chance(0.25)
      ? {
          max: draw.int(1, 3),
          leaseExpiresAt: this.leaseEnd(draw.int(1, 6) * 10_000),
          inFlightMax: draw.pick([2, 100]),
        }
      : undefined;
    // A hand-off's tokens follow its lease order, priority first: one priority per send (see ties).
    const priority = handoff ? draw.int(0, 3) : undefined;
    const messages = Array.from({ length: draw.int(1, 5) }, () => this.message(policy, priority));
    return handoff ? { queue, messages, policy, handoff } : { queue, messages, policy };
  }

  private message(policy: SendPolicy, priority: number | undefined): NewMessage {
    const { draw } = this;
    const n = ++this.messages;
    const kind = draw.pick(["text", "json", "bytes"] as const);
    const body = {
      text: () => Buffer.from(`body ${n}`),
      json: () => Buffer.from(JSON.stringify({ n, text: "é" })),
      bytes: () => Buffer.from([n & 255, 0, 255, 128]),
    }[kind]();
    const contentType = { text: "text/plain", json: "application/json", bytes: "application/octet-stream" }[
      kind
    ];
    return {
      id: `m${this.seed}-${n}`,
      body,
      contentType,
      headers: draw.chance(0.5) ? {} : { "x-n": String(n) },
      key: draw.chance(0.5) ? null : draw.pick(["a", "b", "c"]),
      priority: priority ?? draw.int(0, 3),
      // The broker sets a dedupId only where the queue deduplicates.
      dedupId: policy.dedupWindowMs > 0 && draw.chance(0.6) ? draw.pick(["d1", "d2", "d3", "d4"]) : null,
      publishedAt: this.now,
      visibleAt: draw.chance(0.2) ? this.now + draw.int(1, 30) * 1000 : this.now,
    };
  }

  private queueLease(queue: string): Call {
    const { draw } = this;
    const deadLetter = this.deadLetterRoute(queue);
    const autoAck = draw.chance(0.15);
    // A lease that dead-letters a candidate takes another pass, with another token base: the leases
    // of its passes tie in visibility but not in token order (see ties). One message at most, then,
    // unless autoAck deletes them at once.
    const max = deadLetter && !autoAck ? 1 : draw.int(1, 5);
    return write("queueLease", {
      queue,
      max,
      now: this.now,
      leaseExpiresAt: this.leaseEnd(draw.pick([5, 10, 30, 60]) * 1000),
      expiredBefore: this.now - draw.pick([3_600_000, 3_600_000, 120_000]),
      inFlightMax: draw.pick([3, 1000]),
      deadLetter,
      autoAck,
    });
  }

  /**
   * The queue's own dead-letter route, or sometimes one to the dlq, with maxDeliveries 2 (from the dlq
   * too: its dead letters then name the dlq, and a redrive moves them back into it).
   */
  private deadLetterRoute(queue: string): DeadLetterRoute | null {
    if (this.draw.chance(0.3)) return { queues: ["dlq"], maxDeliveries: 2 };
    return routeOf(this.queues.get(queue));
  }

  /** An ack, nack or extend with 1-4 receipts: current, stale, of another queue, invalid, repeated. */
  private receiptCall(method: "queueAck" | "queueNack" | "queueExtend", queue: string): Call {
    const { draw } = this;
    let own = this.handles.flatMap((handle, i) => (handle.queue === queue ? [i] : [])).slice(-8);
    if (method === "queueExtend" && own.length > 0) {
      // The receipts an extend can renew come from one lease: its new lease end ties them (see ties).
      const lease = (this.handles[draw.pick(own)] as Handle).lease;
      own = own.filter((i) => (this.handles[i] as Handle).lease === lease);
    }
    const receipts: ReceiptRef[] = [];
    for (let count = draw.int(1, 4); receipts.length < count; ) {
      const roll = draw.int(0, 9);
      if (roll === 0 || own.length === 0) receipts.push(draw.pick(invalidReceipts));
      else if (roll === 1 && receipts.length > 0) receipts.push(draw.pick(receipts));
      else if (roll === 2 && method !== "queueExtend") receipts.push(draw.int(0, this.handles.length - 1));
      else receipts.push(draw.pick(own));
    }
    if (method === "queueAck") return write(method, { queue, receipts });
    if (method === "queueExtend") {
      return write(method, { queue, receipts, leaseExpiresAt: this.leaseEnd(draw.int(1, 6) * 10_000) });
    }
    const stepMs = draw.pick([0, 1000, 5000]);
    // Shown in a divergence's params as what it computes.
    const retryDelayMs = Object.assign((count: number) => count * stepMs, {
      toJSON: () => `count => count * ${stepMs}`,
    });
    const deadLetter = this.deadLetterRoute(queue);
    return write(method, { queue, receipts, now: this.now, retryDelayMs, deadLetter });
  }

  private queueListWithDepth(): Call {
    const { draw } = this;
    const page = draw.chance(0.3) ? { after: draw.pick(queueNames), limit: draw.int(1, 3) } : {};
    return read("queueListWithDepth", { ...page, now: this.now });
  }

  private queueExpire(queue: string): Call {
    const expiredBefore = this.now - this.draw.pick([30_000, 120_000, 600_000]);
    return write("queueExpire", { queue, expiredBefore, max: maxAll, now: this.now });
  }

  /**
   * A dead-letter sweep whose dead letters are dropped: the order in which a sweep moves its messages
   * is unspecified (the SQLite store's in its index's, the log store's in the order they were first
   * leased), and would show as the order of their copies in the dead-letter queue.
   */
  private queueDeadLetterExhausted(queue: string): Call {
    const { draw } = this;
    return write("queueDeadLetterExhausted", {
      queue,
      visibleFrom: this.now - draw.pick([60_000, 600_000]),
      now: this.now,
      max: maxAll,
      deadLetter: { queues: [], maxDeliveries: draw.pick([1, 2]) },
    });
  }

  /** A redrive step, mostly from the dlq, with the policies of the queues there are (one may lack). */
  private queueMove(): Call {
    const { draw } = this;
    const policies = new Map<string, SendPolicy>();
    const skipped = draw.chance(0.1) ? draw.pick(queueNames) : undefined;
    for (const [name, attributes] of this.queues) {
      if (name !== skipped) policies.set(name, policyOf(attributes));
    }
    const queue = draw.chance(0.8) ? "dlq" : draw.pick(queueNames);
    // Into itself too (`to` naming the source, or messages whose x-original-queue is the source).
    const to = draw.chance(0.5) ? null : draw.pick([...queueNames, "nope"]);
    return write("queueMove", {
      queue,
      to,
      max: draw.int(1, 5),
      now: this.now,
      policies,
    });
  }

  private exchangeUpsert(): Call {
    const { draw } = this;
    const name = draw.pick(exchangeNames);
    const type = draw.chance(0.05) ? draw.pick(Object.values(exchangeTypes)) : exchangeTypes[name];
    const alternate = draw.chance(0.3) ? draw.pick(queueNames) : null;
    return write("exchangeUpsert", { name, type, alternate, now: this.now });
  }

  private binding(method: "bindingUpsert" | "bindingDelete"): Call {
    const { draw } = this;
    const destination = draw.chance(0.8)
      ? { kind: "queue", name: draw.pick([...queueNames, "nope"]) }
      : { kind: "exchange", name: draw.pick(exchangeNames) };
    const exchange = draw.chance(0.05) ? "nope" : draw.pick(exchangeNames);
    return write(method, { exchange, destination, pattern: draw.pick(["", "a.*", "#", "dead"]) });
  }

  /** Learns from the reference's answer what exists now, and the receipts both stores handed out. */
  learn(index: number, call: Call, sqlite: Outcome, log: Outcome): void {
    if (!("value" in sqlite) || !("value" in log)) return;
    const params = call.params as Record<string, unknown>;
    if (call.method === "queueUpsert") {
      const { queue } = sqlite.value as Awaited<ReturnType<Store["queueUpsert"]>>;
      this.queues.set(queue.name, queue.attributes);
    }
    if (call.method === "queueDelete") this.queues.delete(params.name as string);
    const handedOut = (outcome: { value: unknown }) =>
      call.method === "queueLease"
        ? [
            {
              queue: params.queue as string,
              messages: (outcome.value as { messages: { receipt: string }[] }).messages,
            },
          ]
        : call.method === "queueSendMany"
          ? (outcome.value as { leased: { receipt: string }[] }[]).map((sent, i) => ({
              queue: (params.sends as QueueSend[])[i]?.queue as string,
              messages: sent.leased,
            }))
          : [];
    const logLeases = handedOut(log);
    handedOut(sqlite).forEach(({ queue, messages }, i) => {
      messages.forEach((message, j) => {
        const logReceipt = logLeases[i]?.messages[j]?.receipt as string;
        this.handles.push({ sqlite: message.receipt, log: logReceipt, queue, lease: `${index}/${i}` });
      });
    });
  }
}

export function write(method: Method, params: Record<string, unknown>): Call {
  return { method, params, writes: true };
}

export function read(method: Method, params: Record<string, unknown> | undefined): Call {
  return { method, params, writes: false };
}
