/**
 * The row interface under the embedded stores' stream engine (streams.ts): how SQLite and the log
 * store keep streams, their partitions' heads, the records and remembered dedupIds. What they mean —
 * offsets, duplicates, timestamps, retention — is the engine's. Calls run inside one write (or read) of
 * the store, as rows.ts's do.
 */
import type {
  NewStreamRecord,
  StoredStreamRecord,
  StreamAttributes,
  StreamCounters,
  StreamRecord,
} from "../../model/stream.js";
import type { GroupState } from "../../model/stream-group.js";
import type { ShareState } from "../../model/stream-share.js";

export interface StreamSlot {
  readonly name: string;
  readonly attributes: StreamAttributes;
  readonly partitionCount: number;
}

/** A partition's head as kept: its range [oldest, next), the bytes it holds, its last timestamp. */
export interface PartitionHead {
  oldest: number;
  next: number;
  bytes: number;
  lastTimestamp: number;
}

/** One record's place and size, for retention. */
export interface RecordSize {
  offset: number;
  timestamp: number;
  bytes: number;
}

export interface StreamRows<S extends StreamSlot> {
  stream(name: string): S | undefined;
  streamRecord(stream: S): StreamRecord;
  /** Every stream, in name order. */
  streamRecords(): StreamRecord[];
  streamCount(): number;
  streamInsert(name: string, attributes: StreamAttributes, partitions: number, now: number): void;
  /** Replaces the attributes and grows the partitions to `partitions` (new ones empty). */
  streamUpdate(stream: S, attributes: StreamAttributes, partitions: number): void;
  /** Removes the stream with everything in it; answers the records removed. */
  streamRemove(stream: S): number;
  countersAdd(stream: S, deltas: Partial<StreamCounters>): void;

  head(stream: S, partition: number): PartitionHead;
  headPut(stream: S, partition: number, head: PartitionHead): void;

  /** Stores records of one partition at offsets first, first + 1, …, all with `timestamp`. */
  recordsInsert(
    stream: S,
    partition: number,
    first: number,
    timestamp: number,
    records: readonly NewStreamRecord[],
  ): void;
  /** Retained records from `from` in offset order, at most `limit`, stopping once `bytesMax` bytes of
   * bodies are reached (the first record is always answered). */
  recordsRead(
    stream: S,
    partition: number,
    from: number,
    limit: number,
    bytesMax: number,
  ): StoredStreamRecord[];
  /** The first retained offset whose timestamp is at or after `time`, or undefined when none is. */
  offsetAtTime(stream: S, partition: number, time: number): number | undefined;
  /** The partition's oldest retained records, at most `limit`, oldest first. */
  oldestSizes(stream: S, partition: number, limit: number): RecordSize[];
  /** Deletes the partition's records below `offset`; answers how many went. */
  recordsTrimBefore(stream: S, partition: number, offset: number): number;

  /** Where `dedupId` was appended, while remembered (expiresAt > now). */
  dedupLookup(stream: S, dedupId: string, now: number): { partition: number; offset: number } | undefined;
  dedupRemember(stream: S, dedupId: string, partition: number, offset: number, expiresAt: number): void;
  /** Forgets up to `max` dedupIds whose window ended at or before `now`; answers how many. */
  dedupForget(stream: S, now: number, max: number): number;

  /** The stream's consumer group `group`, as one state (model/stream-group.ts). */
  groupGet(stream: S, group: string): GroupState | undefined;
  groupPut(stream: S, group: string, state: GroupState): void;
  groupRemove(stream: S, group: string): void;
  /** The stream's groups, by name. */
  groupNames(stream: S): string[];

  /** The stream's share group `group`, as one state (model/stream-share.ts). */
  shareGet(stream: S, group: string): ShareState | undefined;
  sharePut(stream: S, group: string, state: ShareState): void;

  /** As QueueRows' capacityMark / capacityCheck: an append past the store's bound is refused whole. */
  capacityMark(): number;
  capacityCheck(mark: number): void;
}
