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
import type { MessageState } from "../../model/message.js";
import { type Random, seededRandom } from "../../random.js";
import {
  type Call,
  Calls,
  Draw,
  type Handle,
  type Outcome,
  type ReceiptRef,
  type Side,
} from "../../testing/differential-calls.js";
import { dumpStore, type StoreDump } from "../../testing/store-dump.js";
import { SqliteStore } from "../sqlite/sqlite-store.js";
import type { Store } from "../store.js";
import { LogStore } from "./log-store.js";

const seedCount = Number(process.env.HOPPER_DIFF_SEEDS ?? 20);
const callsPerSeed = 300;
/** The states are compared every few calls, which finds a divergence that answers do not show yet. */
const compareEvery = 5;
const reopenEvery = 50;
const onlySeed =
  process.env.HOPPER_DIFF_SEED === undefined ? undefined : Number(process.env.HOPPER_DIFF_SEED);
const trace = process.env.HOPPER_DIFF_TRACE === "1";

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
