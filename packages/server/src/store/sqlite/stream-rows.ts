/**
 * The SQLite store's stream rows (embedded/stream-rows.ts): named statements over the stream tables
 * (stream-statements.ts). What the rows mean is in the engine (embedded/streams.ts).
 */
import { HopperError } from "../../errors.js";
import { bodyBytes } from "../../model/message.js";
import {
  type NewStreamRecord,
  type StoredStreamRecord,
  type StreamAttributes,
  type StreamCounters,
  type StreamRecord,
  zeroStreamCounters,
} from "../../model/stream.js";
import type { GroupState } from "../../model/stream-group.js";
import type { ShareState } from "../../model/stream-share.js";
import type { PartitionHead, RecordSize, StreamRows } from "../embedded/stream-rows.js";
import { bodyCrc } from "./integrity.js";
import type { Statements } from "./queue-rows.js";
import * as sql from "./stream-statements.js";

interface StreamRow {
  stream_id: number;
  name: string;
  attributes: string;
  partitions: number;
  created_at: number;
  appended: number;
  appended_bytes: number;
  duplicates: number;
  expired: number;
}

/** A stream as the engine reads it: its attributes parsed. */
export interface SqliteStream {
  readonly streamId: number;
  readonly name: string;
  readonly attributes: StreamAttributes;
  readonly partitionCount: number;
  readonly row: StreamRow;
}

function toStream(row: StreamRow): SqliteStream {
  return {
    streamId: row.stream_id,
    name: row.name,
    attributes: JSON.parse(row.attributes) as StreamAttributes,
    partitionCount: row.partitions,
    row,
  };
}

interface HeadRow {
  oldest: number;
  next: number;
  bytes: number;
  last_timestamp: number;
}

interface RecordRow {
  record_offset: number;
  timestamp: number;
  key: string | null;
  content_type: string;
  headers: string | null;
  body: Buffer;
  body_crc: number;
  bytes: number;
}

export class SqliteStreamRows implements StreamRows<SqliteStream> {
  constructor(private readonly stmt: Statements) {}

  stream(name: string): SqliteStream | undefined {
    const row = this.stmt.get(sql.streamSelectByName).get({ name }) as StreamRow | undefined;
    return row && toStream(row);
  }

  streamRecord(stream: SqliteStream): StreamRecord {
    const { row } = stream;
    const heads = this.stmt.get(sql.partitionSelectAll).all({ streamId: stream.streamId }) as (HeadRow & {
      partition: number;
    })[];
    return {
      name: stream.name,
      attributes: stream.attributes,
      createdAt: row.created_at,
      counters: {
        appended: row.appended,
        appendedBytes: row.appended_bytes,
        duplicates: row.duplicates,
        expired: row.expired,
      },
      partitions: heads.map((head) => ({
        partition: head.partition,
        oldest: head.oldest,
        next: head.next,
        records: head.next - head.oldest,
        bytes: head.bytes,
      })),
    };
  }

  streamRecords(): StreamRecord[] {
    return (this.stmt.get(sql.streamSelectAll).all() as StreamRow[]).map((row) =>
      this.streamRecord(toStream(row)),
    );
  }

  streamCount(): number {
    return (this.stmt.get(sql.streamCount).get() as { n: number }).n;
  }

  streamInsert(name: string, attributes: StreamAttributes, partitions: number, now: number): void {
    const streamId = this.stmt
      .get(sql.streamInsert)
      .run({ name, attributes: JSON.stringify(attributes), partitions, createdAt: now }).lastInsertRowid;
    this.stmt.get(sql.partitionsInsert).run({ streamId, from: 0, to: partitions });
  }

  streamUpdate(stream: SqliteStream, attributes: StreamAttributes, partitions: number): void {
    this.stmt
      .get(sql.streamUpdate)
      .run({ streamId: stream.streamId, attributes: JSON.stringify(attributes), partitions });
    if (partitions > stream.partitionCount)
      this.stmt
        .get(sql.partitionsInsert)
        .run({ streamId: stream.streamId, from: stream.partitionCount, to: partitions });
  }

  streamRemove(stream: SqliteStream): number {
    const { records } = this.stmt.get(sql.streamRecordsHeld).get({ streamId: stream.streamId }) as {
      records: number;
    };
    this.stmt.get(sql.streamDelete).run({ streamId: stream.streamId });
    return records;
  }

  countersAdd(stream: SqliteStream, deltas: Partial<StreamCounters>): void {
    this.stmt.get(sql.streamAddCounters).run({ streamId: stream.streamId, ...zeroStreamCounters, ...deltas });
  }

  head(stream: SqliteStream, partition: number): PartitionHead {
    const row = this.stmt.get(sql.partitionSelect).get({ streamId: stream.streamId, partition }) as HeadRow;
    return { oldest: row.oldest, next: row.next, bytes: row.bytes, lastTimestamp: row.last_timestamp };
  }

  headPut(stream: SqliteStream, partition: number, head: PartitionHead): void {
    this.stmt.get(sql.partitionUpdate).run({ streamId: stream.streamId, partition, ...head });
  }

  recordsInsert(
    stream: SqliteStream,
    partition: number,
    first: number,
    timestamp: number,
    records: readonly NewStreamRecord[],
  ): void {
    const insert = this.stmt.get(sql.recordInsert);
    records.forEach((record, index) => {
      const body = bodyBytes(record.body);
      insert.run({
        streamId: stream.streamId,
        partition,
        offset: first + index,
        timestamp,
        key: record.key,
        contentType: record.contentType,
        headers: Object.keys(record.headers).length > 0 ? JSON.stringify(record.headers) : null,
        body,
        bodyCrc: bodyCrc(body),
        bytes: body.length,
      });
    });
  }

  /** A body whose checksum fails is never served: the read is refused, naming the record. */
  recordsRead(
    stream: SqliteStream,
    partition: number,
    from: number,
    limit: number,
    bytesMax: number,
  ): StoredStreamRecord[] {
    const rows = this.stmt
      .get(sql.recordSelectFrom)
      .all({ streamId: stream.streamId, partition, from, limit }) as RecordRow[];
    const records: StoredStreamRecord[] = [];
    let bytes = 0;
    for (const row of rows) {
      if (records.length > 0 && bytes + row.bytes > bytesMax) break;
      bytes += row.bytes;
      if (bodyCrc(row.body) !== row.body_crc)
        throw new HopperError(
          "store_damaged",
          `Stream ${stream.name}, partition ${partition}, offset ${row.record_offset}: its body fails its checksum.`,
          { stream: stream.name, partition, offset: row.record_offset },
        );
      records.push({
        partition,
        offset: row.record_offset,
        timestamp: row.timestamp,
        key: row.key,
        contentType: row.content_type,
        headers: row.headers === null ? {} : (JSON.parse(row.headers) as Record<string, string>),
        body: row.body,
      });
    }
    return records;
  }

  offsetAtTime(stream: SqliteStream, partition: number, time: number): number | undefined {
    const { found } = this.stmt
      .get(sql.recordOffsetAtTime)
      .get({ streamId: stream.streamId, partition, time }) as { found: number | null };
    return found ?? undefined;
  }

  oldestSizes(stream: SqliteStream, partition: number, limit: number): RecordSize[] {
    const rows = this.stmt
      .get(sql.recordSelectOldestSizes)
      .all({ streamId: stream.streamId, partition, limit }) as {
      record_offset: number;
      timestamp: number;
      bytes: number;
    }[];
    return rows.map((row) => ({ offset: row.record_offset, timestamp: row.timestamp, bytes: row.bytes }));
  }

  recordsTrimBefore(stream: SqliteStream, partition: number, offset: number): number {
    return this.stmt.get(sql.recordDeleteBefore).run({ streamId: stream.streamId, partition, offset })
      .changes;
  }

  dedupLookup(
    stream: SqliteStream,
    dedupId: string,
    now: number,
  ): { partition: number; offset: number } | undefined {
    const row = this.stmt.get(sql.dedupSelect).get({ streamId: stream.streamId, dedupId, now }) as
      | { partition: number; record_offset: number }
      | undefined;
    return row && { partition: row.partition, offset: row.record_offset };
  }

  dedupRemember(
    stream: SqliteStream,
    dedupId: string,
    partition: number,
    offset: number,
    expiresAt: number,
  ): void {
    this.stmt.get(sql.dedupUpsert).run({ streamId: stream.streamId, dedupId, partition, offset, expiresAt });
  }

  dedupForget(stream: SqliteStream, now: number, max: number): number {
    return this.stmt.get(sql.dedupDeleteExpired).run({ streamId: stream.streamId, now, limit: max }).changes;
  }

  groupGet(stream: SqliteStream, group: string): GroupState | undefined {
    const row = this.stmt.get(sql.groupSelect).get({ streamId: stream.streamId, name: group }) as
      | { state: string }
      | undefined;
    return row && (JSON.parse(row.state) as GroupState);
  }

  groupPut(stream: SqliteStream, group: string, state: GroupState): void {
    this.stmt
      .get(sql.groupUpsert)
      .run({ streamId: stream.streamId, name: group, state: JSON.stringify(state) });
  }

  groupRemove(stream: SqliteStream, group: string): void {
    this.stmt.get(sql.groupDelete).run({ streamId: stream.streamId, name: group });
  }

  groupNames(stream: SqliteStream): string[] {
    return (this.stmt.get(sql.groupSelectNames).all({ streamId: stream.streamId }) as { name: string }[]).map(
      (row) => row.name,
    );
  }

  shareGet(stream: SqliteStream, group: string): ShareState | undefined {
    const row = this.stmt.get(sql.shareSelect).get({ streamId: stream.streamId, name: group }) as
      | { state: string }
      | undefined;
    return row && (JSON.parse(row.state) as ShareState);
  }

  sharePut(stream: SqliteStream, group: string, state: ShareState): void {
    this.stmt
      .get(sql.shareUpsert)
      .run({ streamId: stream.streamId, name: group, state: JSON.stringify(state) });
  }

  /** A SQLite file has no bound of its own on what it holds. */
  capacityMark(): number {
    return 0;
  }

  capacityCheck(_mark: number): void {}
}
