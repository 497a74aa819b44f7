/**
 * What the stream sections of the conformance suite share: a fresh store per test, stream attributes,
 * records and the calls most tests make. Test code: production code never imports it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { NewStreamRecord, StreamAttributes, StreamRecord } from "../../model/stream.js";
import type { Store } from "../../store/store.js";
import { t0 } from "../conformance-fixtures.js";
import { policySuite, type StoreFactory } from "./harness.js";

/** No retention unless a test asks; a dedup window of ten minutes. */
export const streamAttributes: StreamAttributes = {
  retentionMs: null,
  retentionBytes: null,
  retentionRecords: null,
  dedupWindowMs: 10 * 60_000,
  memberTimeoutMs: 30_000,
  groupIdleExpiryMs: 60 * 60_000,
};

let nextRecord = 0;
/** A record for `partition` with a fresh text body and one header. */
export function streamRecord(partition: number, overrides: Partial<NewStreamRecord> = {}): NewStreamRecord {
  nextRecord++;
  return {
    partition,
    body: Buffer.from(`record-${nextRecord}`),
    contentType: "text/plain",
    headers: { "x-test": `h-${nextRecord}` },
    key: null,
    dedupId: null,
    ...overrides,
  };
}

/** A body's text, whichever form the store answers it in. */
export function bodyText(body: Buffer | string): string {
  return typeof body === "string" ? body : body.toString("utf8");
}

/**
 * The harness of the stream sections: an empty store per test (as the queue-policy sections'), with
 * the calls most tests make. Must be called inside a describe.
 */
export function streamSuite(factory: StoreFactory) {
  const store: Store = policySuite(factory).store;

  const streamTest = (name: string, body: () => Promise<void>) => test(name, body);

  const create = async (name = "s", partitions = 1, extra: Partial<StreamAttributes> = {}) =>
    (await store.streamUpsert({ name, attributes: { ...streamAttributes, ...extra }, partitions, now: t0 }))
      .stream;

  const append = async (records: NewStreamRecord[], options: { now?: number; name?: string } = {}) =>
    (await store.streamAppend({ name: options.name ?? "s", records, now: options.now ?? t0 })).results;

  const read = (partition: number, from = 0, limit = 1000, name = "s") =>
    store.streamRead({ name, partition, position: { offset: from }, limit, bytesMax: 1024 * 1024 });

  /** The offsets and body texts of a partition from `from`. */
  const contents = async (partition: number, from = 0) =>
    (await read(partition, from)).records.map((record) => [record.offset, bodyText(record.body)]);

  const record = async (name = "s"): Promise<StreamRecord> => {
    const found = await store.streamGet({ name });
    assert.ok(found, `${name} exists`);
    return found;
  };

  return { store, streamTest, create, append, read, contents, record };
}
