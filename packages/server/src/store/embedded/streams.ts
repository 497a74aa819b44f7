/**
 * What a stream means on the embedded stores, written once over the row interface (stream-rows.ts):
 * partitions that grow and never shrink, contiguous offsets per partition, dedupIds within a window,
 * timestamps that never go back within a partition, reads from an offset or a time that refuse what is
 * not retained, and retention by age, bytes and count. Every method runs inside one write or read of
 * the store, so an append is all or nothing.
 *
 * Invariant: a partition's retained records are the contiguous range [oldest, next): an append gives
 * next, next + 1, … under the store's one writer, and retention removes a prefix.
 */
import {
  HopperError,
  offsetOutOfRange,
  partitionNotFound,
  partitionsShrink,
  streamNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import { bodyByteLength } from "../../model/message.js";
import {
  type NewStreamRecord,
  type ReadPosition,
  retentionCut,
  type StoredStreamRecord,
  type StreamAppendResult,
  type StreamAttributes,
  type StreamRecord,
} from "../../model/stream.js";
import type { StreamRows, StreamSlot } from "./stream-rows.js";

export class EmbeddedStreams<S extends StreamSlot> {
  constructor(private readonly rows: StreamRows<S>) {}

  require(name: string): S {
    const stream = this.rows.stream(name);
    if (!stream) throw streamNotFound(name);
    return stream;
  }

  upsert(params: { name: string; attributes: StreamAttributes; partitions: number; now: number }): {
    created: boolean;
    stream: StreamRecord;
  } {
    const existing = this.rows.stream(params.name);
    if (existing) {
      if (params.partitions < existing.partitionCount)
        throw partitionsShrink(params.name, existing.partitionCount);
      this.rows.streamUpdate(existing, { ...params.attributes }, params.partitions);
      return { created: false, stream: this.rows.streamRecord(this.require(params.name)) };
    }
    if (this.rows.streamCount() >= limits.streamsMax) throw new HopperError("too_many_streams");
    this.rows.streamInsert(params.name, { ...params.attributes }, params.partitions, params.now);
    return { created: true, stream: this.rows.streamRecord(this.require(params.name)) };
  }

  get(name: string): StreamRecord | undefined {
    const stream = this.rows.stream(name);
    return stream && this.rows.streamRecord(stream);
  }

  list(): StreamRecord[] {
    return this.rows.streamRecords();
  }

  delete(name: string): { removed: number } {
    return { removed: this.rows.streamRemove(this.require(name)) };
  }

  /** StreamStore.streamAppend: duplicates first, then each partition's new records in one insert. */
  append(params: { name: string; records: readonly NewStreamRecord[]; now: number }): {
    results: StreamAppendResult[];
  } {
    const stream = this.require(params.name);
    for (const record of params.records) this.checkPartition(stream, record.partition);
    const { dedupWindowMs } = stream.attributes;
    const mark = this.rows.capacityMark();
    const heads = new Map<number, ReturnType<StreamRows<S>["head"]> & { records: NewStreamRecord[] }>();
    const inCall = new Map<string, { partition: number; offset: number }>();
    let duplicates = 0;
    const results = params.records.map((record): StreamAppendResult => {
      if (record.dedupId !== null && dedupWindowMs > 0) {
        const earlier =
          inCall.get(record.dedupId) ?? this.rows.dedupLookup(stream, record.dedupId, params.now);
        if (earlier) {
          duplicates++;
          return { ...earlier, duplicate: true };
        }
      }
      let head = heads.get(record.partition);
      if (!head) {
        head = { ...this.rows.head(stream, record.partition), records: [] };
        heads.set(record.partition, head);
      }
      const offset = head.next + head.records.length;
      head.records.push(record);
      if (record.dedupId !== null && dedupWindowMs > 0)
        inCall.set(record.dedupId, { partition: record.partition, offset });
      return { partition: record.partition, offset, duplicate: false };
    });
    let appended = 0;
    let appendedBytes = 0;
    for (const [partition, head] of heads) {
      const timestamp = Math.max(params.now, head.lastTimestamp);
      const bytes = head.records.reduce((sum, record) => sum + bodyByteLength(record.body), 0);
      this.rows.recordsInsert(stream, partition, head.next, timestamp, head.records);
      this.rows.headPut(stream, partition, {
        oldest: head.oldest,
        next: head.next + head.records.length,
        bytes: head.bytes + bytes,
        lastTimestamp: timestamp,
      });
      appended += head.records.length;
      appendedBytes += bytes;
    }
    for (const [dedupId, { partition, offset }] of inCall)
      this.rows.dedupRemember(stream, dedupId, partition, offset, params.now + dedupWindowMs);
    this.rows.capacityCheck(mark);
    this.rows.countersAdd(stream, { appended, appendedBytes, duplicates });
    return { results };
  }

  /** StreamStore.streamRead: a position outside [oldest, next] is refused, never moved. */
  read(params: {
    name: string;
    partition: number;
    position: ReadPosition;
    limit: number;
    bytesMax: number;
  }): { records: StoredStreamRecord[]; oldest: number; next: number } {
    const stream = this.require(params.name);
    this.checkPartition(stream, params.partition);
    const head = this.rows.head(stream, params.partition);
    const from =
      "offset" in params.position
        ? params.position.offset
        : (this.rows.offsetAtTime(stream, params.partition, params.position.time) ?? head.next);
    if (from < head.oldest || from > head.next) throw offsetOutOfRange(from, head);
    const records =
      from === head.next
        ? []
        : this.rows.recordsRead(stream, params.partition, from, params.limit, params.bytesMax);
    return { records, oldest: head.oldest, next: head.next };
  }

  /** StreamStore.streamSweep: each partition's prefix past any limit, then expired dedupIds. */
  sweep(params: { name: string; now: number; max: number }): { expired: number } {
    const stream = this.require(params.name);
    let expired = 0;
    for (let partition = 0; partition < stream.partitionCount && expired < params.max; partition++) {
      const head = this.rows.head(stream, partition);
      if (head.oldest === head.next) continue;
      const oldest = this.rows.oldestSizes(stream, partition, params.max - expired);
      const cut = retentionCut(stream.attributes, head, oldest, params.now);
      if (cut === head.oldest) continue;
      const gone = oldest.filter((record) => record.offset < cut);
      const trimmed = this.rows.recordsTrimBefore(stream, partition, cut);
      this.rows.headPut(stream, partition, {
        ...head,
        oldest: cut,
        bytes: head.bytes - gone.reduce((sum, record) => sum + record.bytes, 0),
      });
      expired += trimmed;
    }
    this.rows.dedupForget(stream, params.now, params.max);
    if (expired > 0) this.rows.countersAdd(stream, { expired });
    return { expired };
  }

  private checkPartition(stream: S, partition: number): void {
    if (!Number.isSafeInteger(partition) || partition < 0 || partition >= stream.partitionCount)
      throw partitionNotFound(stream.name, partition, stream.partitionCount);
  }
}
