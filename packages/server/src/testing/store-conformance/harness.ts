/**
 * What the conformance suite's sections share: the factory each store's test file gives, a fresh store
 * for every test, and the calls most tests make on it. Test code: production code never imports it.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach } from "node:test";
import type { MessageState, NewMessage } from "../../model/message.js";
import { noSendPolicy, type SendPolicy } from "../../model/policies.js";
import { type DeadLetterRoute, depthOf, type QueueAttributes, type QueueKind } from "../../model/queue.js";
import type { Store } from "../../store/store.js";
import { attributes, t0 } from "../conformance-fixtures.js";

export interface StoreFactory {
  name: string;
  /** A fresh, empty store. */
  create(): Promise<Store>;
}

/**
 * Opens a fresh store before each test of the enclosing describe (then runs `prepare` on it) and closes
 * it after. Answers a stand-in that forwards every call to the running test's store, so that a section
 * names `store` once and its tests read as if each had opened it.
 */
function storeForEachTest(factory: StoreFactory, prepare: (store: Store) => Promise<void>): Store {
  let current: Store | undefined;
  beforeEach(async () => {
    current = await factory.create();
    await prepare(current);
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  return new Proxy({} as Store, {
    get(_, property) {
      assert.ok(current, "the store is used only inside a test");
      const value: unknown = Reflect.get(current, property, current);
      return typeof value === "function" ? value.bind(current) : value;
    },
  });
}

/**
 * The harness of the plain-queue sections: each test starts with the standard queue "q".
 * Must be called inside a describe, whose tests it opens a store for.
 */
export function queueSuite(factory: StoreFactory) {
  const store = storeForEachTest(factory, async (opened) => {
    await opened.queueUpsert({ name: "q", kind: "standard", attributes, now: t0 });
  });
  /** One queue's send, with no policy unless given; answers the ids that stand for the messages. */
  const send = async (params: {
    queue: string;
    messages: NewMessage[];
    policy?: SendPolicy;
    now?: number;
  }) => {
    const [result] = await store.queueSendMany({
      sends: [{ queue: params.queue, messages: params.messages, policy: params.policy ?? noSendPolicy }],
      now: params.now ?? t0,
    });
    return result?.ids ?? [];
  };
  const lease = (
    queue: string,
    now: number,
    max = 10,
    extra: { deadLetterQueue?: string; maxDeliveries?: number } = {},
  ) =>
    store.queueLease({
      queue,
      max,
      now,
      leaseExpiresAt: now + 30_000,
      expiredBefore: now - attributes.retentionMs,
      inFlightMax: 1000,
      deadLetter: extra.deadLetterQueue
        ? { queues: [extra.deadLetterQueue], maxDeliveries: extra.maxDeliveries ?? 1 }
        : null,
    });
  return { store, send, lease };
}
export type QueueSuite = ReturnType<typeof queueSuite>;

/**
 * The harness of the queue-policy sections (FIFO groups, priorities, dedup, overflow, autoAck, redrive):
 * each test starts with an empty store and creates its queues. Must be called inside a describe.
 */
export function policySuite(factory: StoreFactory) {
  const store = storeForEachTest(factory, async () => {});
  const create = (name: string, kind: QueueKind = "standard", extra: Partial<QueueAttributes> = {}) =>
    store.queueUpsert({ name, kind, attributes: { ...attributes, ...extra }, now: t0 });
  const send = async (queue: string, messages: NewMessage[], policy: SendPolicy = noSendPolicy, now = t0) => {
    const [result] = await store.queueSendMany({ sends: [{ queue, messages, policy }], now });
    return result?.ids ?? [];
  };
  const lease = (
    queue: string,
    now: number,
    max = 10,
    extra: { deadLetter?: DeadLetterRoute; autoAck?: boolean } = {},
  ) =>
    store.queueLease({
      queue,
      max,
      now,
      leaseExpiresAt: now + 30_000,
      expiredBefore: now - attributes.retentionMs,
      inFlightMax: 1000,
      deadLetter: extra.deadLetter ?? null,
      ...(extra.autoAck !== undefined && { autoAck: extra.autoAck }),
    });
  const bodies = (messages: { body: Buffer | string }[]) => messages.map((m) => m.body.toString());
  const ack = (queue: string, receipts: (string | undefined)[]) =>
    store.queueAck({ queue, receipts: receipts.map((r) => r ?? "missing") });
  const nack = (
    queue: string,
    receipts: (string | undefined)[],
    now: number,
    deadLetter: DeadLetterRoute | null = null,
  ) =>
    store.queueNack({
      queue,
      receipts: receipts.map((r) => r ?? "missing"),
      now,
      retryDelayMs: () => 0,
      deadLetter,
    });
  /**
   * Every message of the queue is accounted for by its counters (DESIGN.md §1: counted removal): the
   * rows read back in each state add up to the counters' depth, and queueDepth and the listing with
   * depths report those rows.
   */
  const assertDepthCounted = async (queue: string, now = t0) => {
    const record = await store.queueGet({ name: queue });
    assert.ok(record);
    const peeked = async (state: MessageState) => await store.queuePeek({ queue, state, limit: 10_000, now });
    // A message marked corrupt is visible and unleased, so peek lists it as available, flagged.
    const visible = await peeked("available");
    const rows = {
      available: visible.filter((message) => !message.corrupt).length,
      delayed: (await peeked("delayed")).length,
      inFlight: (await peeked("in-flight")).length,
      corrupt: visible.filter((message) => message.corrupt).length,
    };
    assert.equal(
      depthOf(record.counters),
      rows.available + rows.delayed + rows.inFlight + rows.corrupt,
      `${queue} counted`,
    );
    const { oldestPublishedAt: _, ...depth } = await store.queueDepth({ name: queue, now });
    assert.deepEqual(depth, rows, `${queue}: its depth by state is its rows by state`);
    const listed = (await store.queueListWithDepth({ now })).find((entry) => entry.queue.name === queue);
    const { oldestPublishedAt: __, ...listedDepth } = listed?.depth ?? { oldestPublishedAt: null };
    assert.deepEqual(listedDepth, rows, `${queue}: the listing's depth by state is its rows by state`);
  };
  return { store, create, send, lease, bodies, ack, nack, assertDepthCounted };
}
export type PolicySuite = ReturnType<typeof policySuite>;
