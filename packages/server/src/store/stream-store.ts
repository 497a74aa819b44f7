/**
 * Streams and their partitions' logs, as the broker stores them: one atomic transaction per method,
 * named stream-first then verb, one params object each (model/stream.ts has the model). The broker
 * validates names, sizes and limits and chooses each record's partition (partitionOfKey, round robin);
 * the store keeps the logs, assigns offsets, remembers dedupIds, and applies retention.
 */
import type {
  NewStreamRecord,
  ReadPosition,
  StoredStreamRecord,
  StreamAppendResult,
  StreamAttributes,
  StreamRecord,
} from "../model/stream.js";

export interface StreamStore {
  /**
   * Creates the stream with `partitions` partitions, or updates its attributes and grows it to
   * `partitions` (new partitions start empty at offset 0). Throws partitions_shrink (fewer than it has;
   * nothing changes), too_many_streams.
   */
  streamUpsert(params: {
    name: string;
    attributes: StreamAttributes;
    partitions: number;
    now: number;
  }): Promise<{ created: boolean; stream: StreamRecord }>;
  streamGet(params: { name: string }): Promise<StreamRecord | undefined>;
  /** Every stream, in name order. */
  streamList(): Promise<StreamRecord[]>;
  /** Deletes the stream with every record and remembered dedupId; answers the records removed. Throws
   * stream_not_found. */
  streamDelete(params: { name: string }): Promise<{ removed: number }>;

  /**
   * Appends the records, all or nothing, each to its partition at that partition's next offset, in the
   * order given (so offsets of one partition follow the call's order). A record whose dedupId was
   * appended within the stream's dedupWindowMs (or earlier in this call) writes nothing and answers
   * the first append's position with `duplicate: true`. Every record of one call gets the same
   * timestamp, `now`, or its partition's last timestamp if that is later (timestamps never go back
   * within a partition). Throws stream_not_found, partition_not_found.
   */
  streamAppend(params: {
    name: string;
    records: readonly NewStreamRecord[];
    now: number;
  }): Promise<{ results: StreamAppendResult[] }>;

  /**
   * The partition's records from `position` in offset order, at most `limit` and at most `bytesMax`
   * bytes of bodies (but always the first, if any), and where the partition stands. A time position
   * starts at the first retained record appended at or after it (none: `next`). Throws
   * stream_not_found, partition_not_found, offset_out_of_range (an offset below oldest or beyond next).
   */
  streamRead(params: {
    name: string;
    partition: number;
    position: ReadPosition;
    limit: number;
    bytesMax: number;
  }): Promise<{ records: StoredStreamRecord[]; oldest: number; next: number }>;

  /**
   * Retention for one stream, up to `max` records and remembered dedupIds: removes each partition's
   * oldest records that are past any one limit (retentionMs, retentionBytes, retentionRecords; counted
   * as expired), and forgets dedupIds past their window. Throws stream_not_found.
   */
  streamSweep(params: { name: string; now: number; max: number }): Promise<{ expired: number }>;
}
