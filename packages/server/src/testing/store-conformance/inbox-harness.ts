/**
 * What the inbox sections of the conformance suite share: a fresh store per test seen as an InboxStore,
 * the guard that skips a store which does not implement InboxStore yet, namespace attributes, messages
 * and the calls most tests make. Test code: production code never imports it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { InboxAttributes, InboxMessage, InboxRecord } from "../../model/inbox.js";
import type { Store } from "../../store/store.js";
import { t0 } from "../conformance-fixtures.js";
import { policySuite, type StoreFactory } from "./harness.js";

/** Short windows, so that tests move the clock past them by minutes, never by days. */
export const inboxAttributes: InboxAttributes = {
  maxAgeMs: 60 * 60_000,
  maxDepth: 100,
  forgetDeviceAfterMs: 30 * 60_000,
  stopFanoutAfterMs: null,
  dedupWindowMs: 10 * 60_000,
};

let nextId = 0;
/** A message with a fresh id, a text body unless given, and one header. */
export function inboxMessage(overrides: Partial<InboxMessage> = {}): InboxMessage {
  nextId++;
  return {
    id: `m-${nextId}`,
    body: Buffer.from(`body-${nextId}`),
    contentType: "text/plain",
    headers: { "x-test": `h-${nextId}` },
    ...overrides,
  };
}

/**
 * The harness of the inbox sections: an empty store per test (as the queue-policy sections'), typed as
 * an InboxStore too, and `inboxTest`, which skips a store that has no inboxes yet with the reason.
 * Must be called inside a describe.
 */
export function inboxSuite(factory: StoreFactory) {
  const store: Store = policySuite(factory).store;

  /** A test of the InboxStore contract. */
  const inboxTest = (name: string, body: () => Promise<void>) => test(name, body);

  const create = async (name = "chat", extra: Partial<InboxAttributes> = {}, epoch = "epoch-1") =>
    (await store.inboxUpsert({ name, attributes: { ...inboxAttributes, ...extra }, epoch, now: t0 })).inbox;

  /** Appends `message` (a fresh one unless given) and answers the results, in the order named. */
  const append = async (
    recipients: string[],
    options: { message?: InboxMessage; now?: number; name?: string } = {},
  ) =>
    (
      await store.inboxAppend({
        name: options.name ?? "chat",
        recipients,
        message: options.message ?? inboxMessage(),
        now: options.now ?? t0,
      })
    ).results;

  const read = (recipient: string, after = 0, limit = 1000, name = "chat") =>
    store.inboxRead({ name, recipient, after, limit });

  const seqs = async (recipient: string, after = 0) =>
    (await read(recipient, after)).entries.map((e) => e.seq);

  const ack = (recipient: string, device: string, seq: number, now = t0) =>
    store.inboxAck({ name: "chat", recipient, device, seq, now });

  const seen = (recipient: string, device: string, now = t0, cursor = 0) =>
    store.inboxDeviceSeen({ name: "chat", recipient, device, cursor, now });

  const record = async (name = "chat"): Promise<InboxRecord> => {
    const found = await store.inboxGet({ name });
    assert.ok(found, `${name} exists`);
    return found;
  };

  /** The recipient's depth, oldest and head, read from inboxRecipientGet. */
  const position = async (recipient: string) => {
    const state = await store.inboxRecipientGet({ name: "chat", recipient });
    return { depth: state.depth, oldest: state.oldest, head: state.head };
  };

  return { store, inboxTest, create, append, read, seqs, ack, seen, record, position };
}
export type InboxSuite = ReturnType<typeof inboxSuite>;
