/**
 * The stream calls of the native API (docs/api.md "Streams"): request schemas and the answers, each
 * with a type of the same name. Record fields are a message's (requests.ts messageFields), with an
 * explicit partition and no delay or priority.
 */
import Type, { type Static } from "typebox";
import { wireLimits as limits } from "./limits.js";
import { Ms, messageFields, Name, Receipts, strict } from "./requests.js";

const Count = Type.Integer({ minimum: 0 });
const Timestamp = Type.String({ description: "ISO-8601" });
const Partition = Type.Integer({ minimum: 0, maximum: limits.streamPartitionsMax - 1 });

export const StreamParams = Type.Object({ stream: Name }, strict);
export const PartitionParams = Type.Object({ stream: Name, partition: Type.Integer({ minimum: 0 }) }, strict);

const RetentionBytes = Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]);

export const PutStreamBody = Type.Object(
  {
    /** Partitions: 1 by default; may grow, never shrink (409 partitions_shrink). */
    partitions: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.streamPartitionsMax })),
    /** Records appended this long ago or longer go; null: no age limit. */
    retentionMs: Type.Optional(Type.Union([Ms(limits.streamRetentionMsMax), Type.Null()])),
    /** Each partition keeps about this many bytes of bodies at most; null: no byte limit. */
    retentionBytes: Type.Optional(RetentionBytes),
    /** Each partition keeps at most this many records; null: no count limit. */
    retentionRecords: Type.Optional(RetentionBytes),
    /** How long a dedupId is remembered (0: off). */
    dedupWindowMs: Type.Optional(Ms(limits.dedupWindowMsMax)),
    /** A consumer-group member that has not fetched this long loses its partitions. */
    memberTimeoutMs: Type.Optional(Ms(limits.streamMemberTimeoutMsMax)),
    /** A consumer group with no member and no commit this long is deleted. */
    groupIdleExpiryMs: Type.Optional(Ms(limits.streamGroupIdleExpiryMsMax)),
  },
  strict,
);

/** One record of an append. */
export const AppendRecord = Type.Object(
  {
    body: messageFields.body,
    bodyBase64: messageFields.bodyBase64,
    contentType: messageFields.contentType,
    headers: messageFields.headers,
    /** Picks the partition by a stable hash (CRC-32 of the key, modulo the partitions). */
    key: messageFields.key,
    /** Overrides the key's partition. */
    partition: Type.Optional(Partition),
    dedupId: messageFields.dedupId,
  },
  strict,
);

export const AppendRecordsBody = Type.Object(
  { records: Type.Array(AppendRecord, { minItems: 1, maxItems: limits.batchSizeMax }) },
  strict,
);

/** A read from `from` (an offset) or `fromTime` (ISO-8601 or milliseconds since the epoch). */
export const StreamRecordsQuery = Type.Object(
  {
    from: Type.Optional(Type.Integer({ minimum: 0 })),
    fromTime: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.streamReadLimitMax })),
  },
  strict,
);

// Consumer groups.

export const GroupParams = Type.Object({ stream: Name, group: Name }, strict);

const Member = Type.String({ pattern: limits.namePattern, maxLength: limits.streamMemberLengthMax });
const Offset = Type.Integer({ minimum: 0 });

export const FetchBody = Type.Object(
  {
    /** The member's id, chosen by the consumer: one per process (or per worker). */
    member: Member,
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.streamReadLimitMax })),
    /** With nothing to read, wait up to this long for an append. */
    waitMs: Type.Optional(Ms(limits.waitMsMax)),
    /** Where a partition with no committed offset starts: its oldest record (default) or its next. */
    start: Type.Optional(Type.Union([Type.Literal("earliest"), Type.Literal("latest")])),
  },
  strict,
);

export const CommitBody = Type.Object(
  {
    member: Member,
    /** The generation the member's fetch answered. */
    generation: Type.Integer({ minimum: 0 }),
    /** `offset`: the next offset to read (the one after the last record handled). */
    offsets: Type.Array(Type.Object({ partition: Partition, offset: Offset }, strict), {
      minItems: 1,
      maxItems: limits.streamPartitionsMax,
    }),
  },
  strict,
);

export const LeaveBody = Type.Object({ member: Member }, strict);

/** A time as ISO-8601 or milliseconds since the epoch. */
const Time = Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Offset]);

export const ResetBody = Type.Object(
  {
    to: Type.Union([
      Type.Literal("earliest"),
      Type.Literal("latest"),
      Type.Object({ offset: Offset, partition: Type.Optional(Partition) }, strict),
      Type.Object({ time: Time }, strict),
    ]),
    /** Reset even while members hold partitions: their leases end, and their commits are refused. */
    force: Type.Optional(Type.Boolean()),
  },
  strict,
);

// Share groups.

export const PutShareBody = Type.Object(
  {
    /** How long a received record is leased (default 30 s). */
    visibilityTimeoutMs: Type.Optional(Ms(limits.visibilityTimeoutMsMax)),
    /** Past maxDeliveries deliveries a record's copy goes to `queue`; null: none. */
    deadLetter: Type.Optional(
      Type.Union([
        Type.Object(
          { queue: Name, maxDeliveries: Type.Integer({ minimum: 1, maximum: limits.maxDeliveriesMax }) },
          strict,
        ),
        Type.Null(),
      ]),
    ),
    /** Where a partition starts the first time the group reads it. */
    start: Type.Optional(Type.Union([Type.Literal("earliest"), Type.Literal("latest")])),
  },
  strict,
);

export const ShareReceiveBody = Type.Object(
  {
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.receiveMax })),
    waitMs: Type.Optional(Ms(limits.waitMsMax)),
    visibilityTimeoutMs: Type.Optional(Ms(limits.visibilityTimeoutMsMax)),
  },
  strict,
);

export const ShareNackBody = Type.Object(
  { receipts: Receipts, delayMs: Type.Optional(Ms(limits.retryDelayMsMax)) },
  strict,
);

export const SharePendingQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.streamReadLimitMax })) },
  strict,
);

// Answers.

export const StreamAttributes = Type.Object({
  retentionMs: Type.Union([Count, Type.Null()]),
  retentionBytes: Type.Union([Count, Type.Null()]),
  retentionRecords: Type.Union([Count, Type.Null()]),
  dedupWindowMs: Count,
  memberTimeoutMs: Count,
  groupIdleExpiryMs: Count,
});

export const PartitionStats = Type.Object({
  partition: Count,
  /** The lowest offset retained (`next` when none is). */
  oldest: Count,
  /** The offset the next record gets. */
  next: Count,
  records: Count,
  bytes: Count,
});

export const StreamStats = Type.Object({
  partitions: Type.Array(PartitionStats),
  appended: Count,
  appendedBytes: Count,
  duplicates: Count,
  expired: Count,
});

/** The answer of `PUT`/`GET /v1/streams/{stream}`, and each item of `GET /v1/streams`. */
export const StreamInfo = Type.Object({
  name: Type.String(),
  attributes: StreamAttributes,
  stats: StreamStats,
  createdAt: Timestamp,
});

export const StreamAppendResult = Type.Object({ partition: Count, offset: Count, duplicate: Type.Boolean() });

export const StreamRecordOut = Type.Object({
  partition: Count,
  offset: Count,
  timestamp: Timestamp,
  key: Type.Union([Type.String(), Type.Null()]),
  headers: Type.Record(Type.String(), Type.String()),
  contentType: Type.String(),
  body: Type.Optional(Type.Unknown()),
  bodyBase64: Type.Optional(Type.String()),
});

/** The answer of a read: the records, and `next` (the offset to read from to go on). */
export const StreamRecords = Type.Object({
  records: Type.Array(StreamRecordOut),
  oldest: Count,
  next: Count,
});

export const GroupInfo = Type.Object({
  name: Type.String(),
  generation: Count,
  createdAt: Timestamp,
  lastActiveAt: Timestamp,
  members: Type.Array(
    Type.Object({ member: Type.String(), lastSeenAt: Timestamp, partitions: Type.Array(Count) }),
  ),
  partitions: Type.Array(
    Type.Object({
      partition: Count,
      holder: Type.Union([Type.String(), Type.Null()]),
      generation: Count,
      committed: Type.Union([Count, Type.Null()]),
      lag: Count,
    }),
  ),
});

/** The answer of a group fetch. */
export const FetchAnswer = Type.Object({ generation: Count, records: Type.Array(StreamRecordOut) });

export type StreamParams = Static<typeof StreamParams>;
export type GroupParams = Static<typeof GroupParams>;
export type FetchBody = Static<typeof FetchBody>;
export type CommitBody = Static<typeof CommitBody>;
export type LeaveBody = Static<typeof LeaveBody>;
export type ResetBody = Static<typeof ResetBody>;
export type GroupInfo = Static<typeof GroupInfo>;
export type FetchAnswer = Static<typeof FetchAnswer>;
export type PutShareBody = Static<typeof PutShareBody>;
export type ShareReceiveBody = Static<typeof ShareReceiveBody>;
export type ShareNackBody = Static<typeof ShareNackBody>;
export type SharePendingQuery = Static<typeof SharePendingQuery>;
export type PartitionParams = Static<typeof PartitionParams>;
export type PutStreamBody = Static<typeof PutStreamBody>;
export type AppendRecord = Static<typeof AppendRecord>;
export type AppendRecordsBody = Static<typeof AppendRecordsBody>;
export type StreamRecordsQuery = Static<typeof StreamRecordsQuery>;
export type StreamAttributes = Static<typeof StreamAttributes>;
export type PartitionStats = Static<typeof PartitionStats>;
export type StreamStats = Static<typeof StreamStats>;
export type StreamInfo = Static<typeof StreamInfo>;
export type StreamAppendResult = Static<typeof StreamAppendResult>;
export type StreamRecordOut = Static<typeof StreamRecordOut>;
export type StreamRecords = Static<typeof StreamRecords>;
