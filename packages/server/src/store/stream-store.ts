/**
 * Streams and their partitions' logs, as the broker stores them: one atomic transaction per method,
 * named stream-first then verb, one params object each (model/stream.ts has the model). The broker
 * validates names, sizes and limits and chooses each record's partition (partitionOfKey, round robin);
 * the store keeps the logs, assigns offsets, remembers dedupIds, and applies retention.
 */

import type { ReceiptResult } from "../model/message.js";
import type {
  NewStreamRecord,
  ReadPosition,
  StoredStreamRecord,
  StreamAppendResult,
  StreamAttributes,
  StreamRecord,
} from "../model/stream.js";
import type { CommitResult, GroupInfo, GroupResetTarget, GroupStart } from "../model/stream-group.js";
import type { ShareAttributes, ShareInfo, sharePending } from "../model/stream-share.js";

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

  /**
   * A consumer-group member's fetch (model/stream-group.ts groupFetch): creates the group if it is
   * new, renews the member, rebalances its share of the partitions, and answers up to `max` records
   * (about `bytesMax` bytes) from the positions of the partitions it holds, in partition order, which
   * it then advances. Throws stream_not_found.
   */
  streamGroupFetch(params: {
    name: string;
    group: string;
    member: string;
    max: number;
    bytesMax: number;
    start: GroupStart;
    now: number;
  }): Promise<{ generation: number; records: StoredStreamRecord[] }>;

  /** A member's commit (groupCommit): a result per offset. Throws stream_not_found, group_not_found. */
  streamGroupCommit(params: {
    name: string;
    group: string;
    member: string;
    generation: number;
    offsets: readonly { partition: number; offset: number }[];
    now: number;
  }): Promise<CommitResult[]>;

  /** A member leaves (groupLeave): its partitions are free at once. Throws stream_not_found,
   * group_not_found. */
  streamGroupLeave(params: {
    name: string;
    group: string;
    member: string;
    now: number;
  }): Promise<{ left: boolean }>;

  /** Resets the committed offsets (groupReset), creating the group if it is new. Throws
   * stream_not_found, group_in_use, partition_not_found. */
  streamGroupReset(params: {
    name: string;
    group: string;
    to: GroupResetTarget;
    force: boolean;
    now: number;
  }): Promise<GroupInfo>;

  /** Deletes the group. Throws stream_not_found, group_not_found. */
  streamGroupDelete(params: { name: string; group: string }): Promise<void>;

  /** The stream's groups, by name (groupInfo). Throws stream_not_found. */
  streamGroupList(params: { name: string; now: number }): Promise<GroupInfo[]>;

  /** Deletes the groups idle past groupIdleExpiryMs (groupIdle); answers how many. Throws
   * stream_not_found. */
  streamGroupExpire(params: { name: string; now: number }): Promise<{ expired: number }>;

  /** Creates the share group, or replaces its attributes. Throws stream_not_found,
   * dead_letter_queue_not_found. */
  streamShareUpsert(params: {
    name: string;
    group: string;
    attributes: ShareAttributes;
    now: number;
  }): Promise<{ created: boolean; share: ShareInfo }>;

  /**
   * A share receive (model/stream-share.ts): up to `max` records, those whose lease ended first, then
   * new ones while fewer than `inFlightMax` are in flight, each leased until now + leaseMs. A record
   * past maxDeliveries is copied to the dead-letter queue instead (`newId` names the copy; a queue
   * that no longer exists drops it, counted all the same). Throws stream_not_found, group_not_found.
   */
  streamShareReceive(
    params: ShareCall & { max: number; leaseMs: number; inFlightMax: number; newId: () => string },
  ): Promise<{
    records: ShareRecord[];
    deadLettered: number;
    /** When the first lease in flight ends, after the receive (null: none in flight). */
    nextVisibleAt: number | null;
  }>;

  streamShareAck(params: ShareCall & { receipts: readonly string[] }): Promise<ReceiptResult[]>;

  /** Nack: visible again after delayMs, or past maxDeliveries dead-lettered now (as receive). */
  streamShareNack(
    params: ShareCall & { receipts: readonly string[]; delayMs: number; newId: () => string },
  ): Promise<{
    results: ReceiptResult[];
    deadLettered: number;
  }>;

  streamShareExtend(
    params: ShareCall & { receipts: readonly string[]; leaseMs: number },
  ): Promise<ReceiptResult[]>;

  /** The group and its records in flight, at most `limit` (as XPENDING). */
  streamSharePending(params: ShareCall & { limit: number }): Promise<{
    share: ShareInfo;
    pending: ReturnType<typeof sharePending>;
  }>;
}

/** What every share call names. */
export interface ShareCall {
  name: string;
  group: string;
  now: number;
}

/** A record a share receive hands out. */
export type ShareRecord = StoredStreamRecord & { receipt: string; deliveries: number };
