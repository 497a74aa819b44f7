/**
 * Differential test: one seeded, random sequence of Store calls runs against the SQLite store (the
 * reference) and the log store on disk, and every answer must be the same. Every `reopenEvery` calls
 * the log store is closed and reopened from its directory: its whole state must survive that and equal
 * the SQLite store's. Every few calls both stores' states are compared too, and each is checked alone
 * (a queue's depth by state is what its peeks find). A divergence names the seed, the call's index and
 * the call with its params;
 * HOPPER_DIFF_SEED=<seed> runs that seed alone, HOPPER_DIFF_TRACE=1 prints every call, and
 * HOPPER_DIFF_SEEDS=<n> runs seeds 1 to n (20 by default) for a longer search.
 *
 * What may legitimately differ, and how the test deals with it:
 * - A JSON body comes back as bytes or as text (StoredMessage.body allows both): bodies are compared
 *   as bytes.
 * - Receipts differ as strings: a receipt holds the message's seq, and the SQLite store gives a new
 *   message max(seq) + 1 of the rows left (a rowid, reused once the newest row is gone) while the log
 *   store never gives a seq twice. (The token differs too once the log store, which draws a token base
 *   for every lease pass, has drawn one for a pass that only dead-lettered: the SQLite store does not.)
 *   The contract only asks that a receipt name one lease, so receipts are compared by position, and
 *   each store is given back its own receipt for the same lease.
 * - Ties of visibility order are unspecified ("in order of visibility"). The SQLite store breaks them
 *   by its index (queue, visible_at, lease_token), so by lease token, and the log store by seq. The
 *   generator keeps ties to where both agree: every time `now` and every delay is whole seconds, so
 *   a message without a lease becomes visible on a whole second; each call that takes or moves leases
 *   ends them at a time whose last three digits no other call uses (leaseEnd). Messages that tie are
 *   then all unleased (both order by seq) or leased together, by one lease pass (tokens base + seq) or
 *   one send's hand-off (tokens base + rank in lease order, so its messages get one priority). A lease
 *   that dead-letters takes more passes, each with its own base: it leases one message at most.
 * - Which messages a call with a `max` below the number eligible takes is unspecified for queueExpire
 *   and queueDeadLetterExhausted (neither says an order): those calls get a max above the queue's size.
 *   In which order a sweep dead-letters is unspecified too, and would show as the order of the copies
 *   in the dead-letter queue: a sweep's dead letters are dropped (a route to no queue).
 * - Reads called in the same turn as writes: the SQLite store runs writes at its group commit, after
 *   the turn, and reads at once; the log store runs both at once. Calls issued together are writes.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { HopperError } from "../../errors.js";
import type { MessageState, NewMessage } from "../../model/message.js";
import { noSendPolicy, type SendPolicy, sendPolicyOf } from "../../model/policies.js";
import type { DeadLetterRoute, QueueAttributes, QueueKind } from "../../model/queue.js";
import { type Random, seededRandom } from "../../random.js";
import { attributes as defaultAttributes, t0 } from "../../testing/conformance-fixtures.js";
import { dumpStore, type StoreDump } from "../../testing/store-dump.js";
import { SqliteStore } from "../sqlite/sqlite-store.js";
import type { QueueSend, Store } from "../store.js";
import { LogStore } from "./log-store.js";

const seedCount = Number(process.env.HOPPER_DIFF_SEEDS ?? 20);
const callsPerSeed = 300;
/** The states are compared every few calls, which finds a divergence that answers do not show yet. */
const compareEvery = 5;
const reopenEvery = 50;
const onlySeed =
  process.env.HOPPER_DIFF_SEED === undefined ? undefined : Number(process.env.HOPPER_DIFF_SEED);
const trace = process.env.HOPPER_DIFF_TRACE === "1";

const queueNames = ["dlq", "std", "pri", "fifo", "grp"];
const kindOf: Record<string, QueueKind> = {
  dlq: "standard",
  std: "standard",
  pri: "standard",
  fifo: "fifo",
  grp: "fifo",
};
const exchangeTypes = { ex: "topic", dx: "direct", fan: "fanout" } as const;
const exchangeNames = Object.keys(exchangeTypes) as (keyof typeof exchangeTypes)[];
const invalidReceipts = ["", "not-a-receipt", "zz.zz", "1.1"];
const states: MessageState[] = ["available", "delayed", "in-flight"];
/** Above any queue's size here: see the header on `max`. */
const maxAll = 10_000;

type Side = "sqlite" | "log";
type Method = {
  [Name in keyof Store]: Store[Name] extends (...args: never[]) => Promise<unknown> ? Name : never;
}[keyof Store];

/** A receipt handed out by both stores for the same lease: each store is given back its own. */
interface Handle {
  sqlite: string;
  log: string;
  queue: string;
  /** The lease that handed it out: a call, and for a hand-off the send's place in it. */
  lease: string;
}

/** A receipt in a call's params: the index of a Handle, or a literal (invalid) receipt. */
type ReceiptRef = number | string;

interface Call {
  method: Method;
  params: Record<string, unknown> | undefined;
  /** Reads are never issued in the same turn as other calls (see the header). */
  writes: boolean;
}

type Outcome = { value: unknown } | { rejected: string };

/** The generator's draws: a Random of its own, apart from the stores'. */
class Draw {
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
function routeOf(attributes: QueueAttributes | undefined): DeadLetterRoute | null {
  const target = attributes?.deadLetter;
  if (!target) return null;
  return { queues: "queue" in target ? [target.queue] : [], maxDeliveries: target.maxDeliveries };
}

function policyOf(attributes: QueueAttributes | undefined): SendPolicy {
  return attributes ? sendPolicyOf(attributes, routeOf(attributes)) : noSendPolicy;
}

/** Draws the calls, and keeps what it needs to draw sensible ones: the queues there are, the receipts. */
class Calls {
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

function write(method: Method, params: Record<string, unknown>): Call {
  return { method, params, writes: true };
}

function read(method: Method, params: Record<string, unknown> | undefined): Call {
  return { method, params, writes: false };
}

/** A deep copy, so that neither store can hold what the other was given. */
function copy(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return Buffer.from(value);
  if (value instanceof Map) return new Map([...value].map(([key, item]) => [key, copy(item)]));
  if (Array.isArray(value)) return value.map(copy);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, copy(item)]));
  }
  return value;
}

/** The call's params for one store: a copy, with each receipt handle replaced by that store's receipt. */
function paramsFor(call: Call, side: Side, handles: readonly Handle[]): unknown {
  const params = copy(call.params) as Record<string, unknown> | undefined;
  if (params && Array.isArray(params.receipts)) {
    params.receipts = (params.receipts as ReceiptRef[]).map((ref) =>
      typeof ref === "number" ? (handles[ref] as Handle)[side] : ref,
    );
  }
  return params;
}

async function settle(answer: Promise<unknown>): Promise<Outcome> {
  try {
    return { value: await answer };
  } catch (error) {
    return { rejected: error instanceof HopperError ? error.code : `not a HopperError: ${String(error)}` };
  }
}

function invoke(store: Store, call: Call, side: Side, handles: readonly Handle[]): Promise<Outcome> {
  const method = store[call.method] as (params: unknown) => Promise<unknown>;
  return settle(method.call(store, paramsFor(call, side, handles)));
}

/** An answer as compared: bodies as bytes, receipts by position, errors by code, message and details. */
function comparable(value: unknown, key = ""): unknown {
  if (key === "body" && typeof value === "string") return Buffer.from(value, "utf8");
  if (key === "receipt" && typeof value === "string") return "<receipt>";
  if (value instanceof HopperError)
    return { code: value.code, message: value.message, details: value.details };
  if (Buffer.isBuffer(value)) return value;
  if (Array.isArray(value)) return value.map((item) => comparable(item));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, comparable(item, name)]));
  }
  return value;
}

/** A call as JSON for a divergence's message: bodies abbreviated, receipt handles with both receipts. */
function describe(call: Call, handles: readonly Handle[]): string {
  return `${call.method}(${JSON.stringify(call.params, function (this: Record<string, unknown>, key, value) {
    const original = this[key];
    if (Buffer.isBuffer(original)) return `<${original.length} bytes: ${original.toString("utf8", 0, 24)}>`;
    if (original instanceof Map) return Object.fromEntries(original);
    if (key === "receipts" && Array.isArray(original)) {
      return original.map((ref: ReceiptRef) => {
        const handle = typeof ref === "number" ? handles[ref] : undefined;
        return handle ? `#${ref} (sqlite ${handle.sqlite}, log ${handle.log})` : ref;
      });
    }
    return value;
  })})`;
}

function same(actual: unknown, expected: unknown, context: () => string): void {
  try {
    assert.deepEqual(actual, expected);
  } catch (error) {
    assert.fail(`${context()}\n${(error as Error).message}`);
  }
}

/**
 * What the contract asks of one store's dump alone: each queue's depth by state (the available part
 * from its counters, depthOf) is what its peeks find. Both stores could agree and still break it.
 */
function depthsAgree(state: StoreDump, store: string, context: (what: string) => () => string): void {
  for (const { queue, depth } of state.queues) {
    const held = (messageState: MessageState) => state.messages[`${queue.name}/${messageState}`]?.length;
    same(
      { available: held("available"), delayed: held("delayed"), inFlight: held("in-flight") },
      { available: depth.available, delayed: depth.delayed, inFlight: depth.inFlight },
      context(`the ${store}'s queue ${queue.name} holds other messages (+) than its depth says (-)`),
    );
  }
}

/** One seed's run: both stores, the calls drawn so far, and the log store's directory. */
class Run {
  private readonly dir = mkdtempSync(join(tmpdir(), "hopper-differential-"));
  private readonly sqlite: SqliteStore;
  /** The same Random across reopens: the log store's draws stay in step with the SQLite store's. */
  private readonly logRandom: Random;
  private log: LogStore;
  private readonly calls: Calls;
  private readonly history: string[] = [];

  constructor(private readonly seed: number) {
    this.sqlite = new SqliteStore({ path: ":memory:", random: seededRandom(seed) });
    this.logRandom = seededRandom(seed);
    this.log = LogStore.open({ dir: this.dir, random: this.logRandom });
    this.calls = new Calls(new Draw(seededRandom(seed * 7919 + 13)), seed);
  }

  /** Runs the seed's calls, comparing every answer, the states every few calls, and reopening. */
  async all(): Promise<void> {
    try {
      for (let index = 0; index < callsPerSeed; ) {
        const before = index;
        index += await this.nextGroup(index);
        const crossed = (every: number) =>
          Math.floor(index / every) > Math.floor(before / every) || index >= callsPerSeed;
        if (crossed(compareEvery)) await this.compareStates(index - 1, crossed(reopenEvery));
      }
    } finally {
      await this.log.close().catch(() => {});
      await this.sqlite.close();
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  /** Issues the next call or calls to both stores and compares the answers; answers how many. */
  private async nextGroup(index: number): Promise<number> {
    const group = this.calls.next();
    const { handles } = this.calls;
    const sqlite = await Promise.all(group.map((call) => invoke(this.sqlite, call, "sqlite", handles)));
    const log = await Promise.all(group.map((call) => invoke(this.log, call, "log", handles)));
    group.forEach((call, i) => {
      const line = `${index + i}${group.length > 1 ? " (together)" : ""}: ${describe(call, handles)}`;
      this.history.push(line);
      if (trace) console.log(`seed ${this.seed}, call ${line}`);
      const context = this.context(`call ${line}`, 1);
      same(comparable(log[i]), comparable(sqlite[i]), context("answers: + log store, - SQLite store"));
      this.calls.learn(index + i, call, sqlite[i] as Outcome, log[i] as Outcome);
    });
    return group.length;
  }

  /** Compares the stores' dumps, checks each alone, and with `reopen` reopens the log store. */
  private async compareStates(last: number, reopen: boolean): Promise<void> {
    const { now } = this.calls;
    const context = this.context(`after call ${last}`, 0);
    const state = await dumpStore(this.log, now);
    const reference = await dumpStore(this.sqlite, now);
    same(comparable(state), comparable(reference), context("the dumps differ (+ log store, - SQLite store)"));
    depthsAgree(reference, "SQLite store", context);
    depthsAgree(state, "log store", context);
    if (!reopen) return;
    await this.log.close();
    try {
      this.log = LogStore.open({ dir: this.dir, random: this.logRandom });
    } catch (error) {
      assert.fail(`${context("the log store cannot reopen")()}\n${(error as Error).message}`);
    }
    same(await dumpStore(this.log, now), state, context("the reopened log store's dump differs"));
  }

  /** What a divergence's message says first: where it was, the calls before it, how to replay it. */
  private context(where: string, skipped: number): (what: string) => () => string {
    const before = this.history.slice(-8 - skipped, this.history.length - skipped).join("\n");
    return (what) => () =>
      `seed ${this.seed}, ${where}\nthe calls before it:\n${before}\n` +
      `replay: HOPPER_DIFF_SEED=${this.seed} HOPPER_DIFF_TRACE=1\n${what}`;
  }
}

const seeds = onlySeed === undefined ? Array.from({ length: seedCount }, (_, i) => i + 1) : [onlySeed];
for (const seed of seeds) {
  test(`differential: seed ${seed}, the log store answers as the SQLite store`, () => new Run(seed).all());
}
