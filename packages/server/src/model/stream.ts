/**
 * A stream as the domain knows it (DESIGN.md §5, docs/streams.md): a set of partitions, each an
 * append-only log of records with offsets 0, 1, 2, …, kept by retention (age, bytes, count), not by
 * consumption.
 *
 * Positions: a partition's `next` is the offset its next record gets; `oldest` the lowest offset still
 * retained (`next` when none is). Its retained records are the contiguous range [oldest, next): offsets
 * are given as next, next + 1, … under the partition's one writer, and retention removes a prefix.
 * A read from an offset below `oldest` or above `next` is refused with `offset_out_of_range`, never
 * answered from elsewhere (a silent skip).
 */
import * as zlib from "node:zlib";

/** A stream's attributes with every default applied. */
export interface StreamAttributes {
  /** Records appended this long ago or longer go (counted as expired); null: no age limit. */
  retentionMs: number | null;
  /** A partition keeps at most about this many bytes of bodies: its oldest records go first; null: none. */
  retentionBytes: number | null;
  /** A partition keeps at most this many records; null: no count limit. */
  retentionRecords: number | null;
  /** How long an append's dedupId is remembered: a repeat within it answers the first append's
   * position and writes nothing (as JetStream's Nats-Msg-Id). 0: off. */
  dedupWindowMs: number;
  /** A consumer-group member that has not fetched for this long loses its partitions. */
  memberTimeoutMs: number;
  /** A consumer group with no member and no commit for this long is deleted. */
  groupIdleExpiryMs: number;
}

/** What a stream counts since it was created. */
export interface StreamCounters {
  /** Records appended. */
  appended: number;
  /** Bytes of the bodies appended. */
  appendedBytes: number;
  /** Appends whose dedupId was remembered: nothing written. */
  duplicates: number;
  /** Records removed by retention. */
  expired: number;
}

export const zeroStreamCounters: StreamCounters = {
  appended: 0,
  appendedBytes: 0,
  duplicates: 0,
  expired: 0,
};

/** Where one partition stands. */
export interface PartitionStats {
  partition: number;
  oldest: number;
  next: number;
  /** next - oldest. */
  records: number;
  /** Bytes of the retained records' bodies. */
  bytes: number;
}

export interface StreamRecord {
  name: string;
  attributes: StreamAttributes;
  createdAt: number;
  counters: StreamCounters;
  /** One per partition, in partition order. */
  partitions: PartitionStats[];
}

/** A record to append, its partition already chosen (partitionOf). */
export interface NewStreamRecord {
  partition: number;
  /** Bytes, or a JSON body's text (read back as text). */
  body: Buffer | string;
  contentType: string;
  headers: Record<string, string>;
  key: string | null;
  dedupId: string | null;
}

/** A record as read back. `timestamp`: when it was appended (never lower than its predecessor's). */
export interface StoredStreamRecord {
  partition: number;
  offset: number;
  timestamp: number;
  key: string | null;
  contentType: string;
  headers: Record<string, string>;
  body: Buffer | string;
}

/** What an append answered for one record: where it is, or where its first append put it. */
export interface StreamAppendResult {
  partition: number;
  offset: number;
  duplicate: boolean;
}

/** Where a read starts: an offset, or the first record appended at or after a time. */
export type ReadPosition = { offset: number } | { time: number };

/**
 * The partition of a record with this key among `partitions`: the CRC-32 of its UTF-8 bytes, modulo
 * the count. Stable across processes and versions; when the count grows, keys move (docs/streams.md).
 */
export function partitionOfKey(key: string, partitions: number): number {
  return zlib.crc32(key) % partitions;
}

/**
 * Which of a partition's oldest records retention removes: walks them oldest first and answers the
 * offset of the first one that passes no limit (the new `oldest`). A record goes when it is past any
 * one limit: more than retentionRecords newer ones, more than retentionBytes of bodies from it to the
 * head, or appended at or before now - retentionMs.
 */
export function retentionCut(
  attributes: StreamAttributes,
  partition: { oldest: number; next: number; bytes: number },
  oldestRecords: readonly { offset: number; timestamp: number; bytes: number }[],
  now: number,
): number {
  let bytes = partition.bytes;
  let cut = partition.oldest;
  for (const record of oldestRecords) {
    const overCount =
      attributes.retentionRecords !== null && partition.next - record.offset > attributes.retentionRecords;
    const overBytes = attributes.retentionBytes !== null && bytes > attributes.retentionBytes;
    const overAge = attributes.retentionMs !== null && record.timestamp <= now - attributes.retentionMs;
    if (!overCount && !overBytes && !overAge) break;
    bytes -= record.bytes;
    cut = record.offset + 1;
  }
  return cut;
}
