/**
 * The log store's streams in memory: every stream, partition head, remembered dedupId, and an index of
 * where each partition's records lie, changed only through the primitives below, each of which records
 * its inverse (a call that throws is undone) and its change (records.ts: JSON changes of type `stream`,
 * and a binary `streamRecords` change per partition an append writes to).
 *
 * Records stay in the segment files (DESIGN.md §9): memory holds a sparse index, one chunk per
 * partition per append call (its first offset, its timestamp, its records' sizes and where its change
 * lies), not the records. A chunk holds its records in memory only from its append until its batch is
 * written (and in a store without a log); after that a read finds the chunk by binary search, reads its
 * record's frame back from the segment, checks the frame's CRCs (log-format.ts checkedPayloadAt) and
 * decodes the change. Replay places each chunk where its record lies; a compaction's snapshot writes
 * each chunk again as a record of its own and moves its place there before the older segments go.
 *
 * Invariant: a partition's chunks cover [oldest, next) in order: chunk i + 1 starts where chunk i ends,
 * the first chunk holds `oldest` (it may start below it, when retention took part of it), and a
 * chunk lies wholly below `oldest` never (trimBefore drops it).
 */
import { HopperError, invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import type {
  NewStreamRecord,
  StoredStreamRecord,
  StreamAttributes,
  StreamCounters,
} from "../../model/stream.js";
import { zeroStreamCounters } from "../../model/stream.js";
import type { PartitionHead } from "../embedded/stream-rows.js";
import type { SnapshotRecord } from "./append-log.js";
import type { Commits } from "./commits.js";
import { checkedPayloadAt } from "./log-format.js";
import {
  changeType,
  RecordWriter,
  readStreamRecords,
  type StreamRecordRead,
  type StreamRecordsHead,
} from "./records.js";

/** Where a chunk's change lies: the segment, its record's payload offset, the change's offset in it. */
export interface ChunkPlace {
  seq: number;
  payloadOffset: number;
  changeAt: number;
}

export interface Chunk {
  readonly first: number;
  readonly timestamp: number;
  /** Each record's body bytes, in offset order. */
  readonly sizes: Uint32Array;
  /** The records, until the log has them (then undefined, and `place` says where). */
  held: StreamRecordRead[] | undefined;
  place: ChunkPlace | undefined;
}

export interface PartitionLog extends PartitionHead {
  chunks: Chunk[];
}

export interface StreamState {
  readonly name: string;
  attributes: StreamAttributes;
  readonly createdAt: number;
  readonly counters: StreamCounters;
  /** One log per partition, in partition order. */
  readonly logs: PartitionLog[];
  /** logs.length (the engine's StreamSlot). */
  readonly partitionCount: number;
  readonly dedup: Map<string, { partition: number; offset: number; expiresAt: number }>;
  /** Each consumer group's state (model/stream-group.ts), as JSON text: what the log records too. */
  readonly groups: Map<string, string>;
  /** Each share group's state (model/stream-share.ts), as JSON text. */
  readonly shares: Map<string, string>;
}

/** One change of the stream state, as the log records it (records are streamRecords changes). */
export type StreamChange =
  | { op: "create"; name: string; attributes: StreamAttributes; partitions: number; createdAt: number }
  | { op: "update"; name: string; attributes: StreamAttributes; partitions: number }
  | { op: "drop"; name: string }
  | { op: "counters"; name: string; deltas: Partial<StreamCounters> }
  | ({ op: "head"; name: string; partition: number } & PartitionHead)
  | { op: "trim"; name: string; partition: number; before: number }
  | { op: "dedup"; name: string; dedupId: string; partition: number; offset: number; expiresAt: number }
  | { op: "dedupForget"; name: string; dedupId: string }
  | { op: "group"; name: string; group: string; state: string; share?: true }
  | { op: "groupDrop"; name: string; group: string };

function emptyPartition(): PartitionLog {
  return { oldest: 0, next: 0, bytes: 0, lastTimestamp: 0, chunks: [] };
}

function chunkBytes(chunk: Chunk): number {
  let bytes = 0;
  for (const size of chunk.sizes) bytes += size;
  return bytes;
}

/** What a chunk costs the store's memory: its index entry, and its records while it holds them. */
function heldChunkBytes(chunk: Chunk): number {
  const index = limits.logStreamChunkOverheadBytes + 4 * chunk.sizes.length;
  return index + (chunk.held === undefined ? 0 : chunkBytes(chunk));
}

export class LogStreamState {
  readonly streams = new Map<string, StreamState>();
  /** Bytes of records that lie only in the segment files: what a snapshot copies besides liveBytes. */
  diskBytes = 0;
  /** Reads bytes of a segment back (AppendLog.readAt), once the store has its log. */
  readPlaced: (seq: number, offset: number, length: number) => Buffer = () => {
    invariant(false, "a stream chunk was placed in a log that is not open");
  };

  constructor(
    private readonly commits: Commits,
    /** Adds to (or, negative, takes from) what the store holds: its memory bound and compaction. */
    private readonly hold: (bytes: number) => void,
  ) {}

  private record(change: StreamChange, undo: () => void): void {
    this.commits.changed(undo, (writer) => writer.json({ type: changeType.stream, change }));
  }

  private replayed(name: string): StreamState {
    const stream = this.streams.get(name);
    invariant(stream, `the log names stream "${name}" before creating it`);
    return stream;
  }

  /** Applies one change read from the log, through the same primitives. */
  apply(change: StreamChange): void {
    if (change.op === "create") {
      this.create(change.name, change.attributes, change.partitions, change.createdAt);
      return;
    }
    const stream = this.replayed(change.name);
    switch (change.op) {
      case "update":
        this.update(stream, change.attributes, change.partitions);
        return;
      case "drop":
        this.drop(stream);
        return;
      case "counters":
        this.addCounters(stream, change.deltas);
        return;
      case "head":
        this.putHead(stream, change.partition, change);
        return;
      case "trim":
        this.trimBefore(stream, change.partition, change.before);
        return;
      case "dedup":
        this.remember(stream, change.dedupId, change.partition, change.offset, change.expiresAt);
        return;
      case "dedupForget":
        this.forget(stream, change.dedupId);
        return;
      case "group":
        this.putGroup(stream, change.group, change.state, change.share ? "shares" : "groups");
        return;
      case "groupDrop":
        this.dropGroup(stream, change.group);
        return;
    }
  }

  /** Replays an append's records change: a chunk placed where its record lies, its records not held. */
  applyRecords(head: StreamRecordsHead, sizes: Uint32Array, place: ChunkPlace): void {
    const stream = this.replayed(head.stream);
    const partition = stream.logs[head.partition];
    invariant(partition, `the log appends to partition ${head.partition} of ${head.stream} before making it`);
    this.addChunk(partition, { first: head.first, timestamp: head.timestamp, sizes, held: undefined, place });
  }

  /**
   * The state as changes, for a snapshot: each stream's record, counters and dedupIds, then each of its
   * chunks as a record of its own (read when the rewrite reaches it, placed where it lands), then its
   * partitions' heads.
   */
  snapshot(writer: RecordWriter, cut: () => void, flush: () => void, records: SnapshotRecord[]): void {
    const emit = (change: StreamChange) => writer.json({ type: changeType.stream, change });
    for (const stream of this.streams.values()) {
      const { name, attributes, createdAt } = stream;
      emit({ op: "create", name, attributes, partitions: stream.logs.length, createdAt });
      emit({ op: "counters", name, deltas: { ...stream.counters } });
      for (const [dedupId, { partition, offset, expiresAt }] of stream.dedup) {
        emit({ op: "dedup", name, dedupId, partition, offset, expiresAt });
        cut();
      }
      flush();
      stream.logs.forEach((log, partition) => {
        for (const chunk of log.chunks) records.push(this.chunkRecord(stream, partition, chunk));
      });
      stream.logs.forEach((log, partition) => {
        const { oldest, next, bytes, lastTimestamp } = log;
        emit({ op: "head", name, partition, oldest, next, bytes, lastTimestamp });
      });
      for (const [group, state] of stream.groups) {
        emit({ op: "group", name, group, state });
        cut();
      }
      for (const [group, state] of stream.shares) {
        emit({ op: "group", name, group, state, share: true });
        cut();
      }
      cut();
    }
  }

  private chunkRecord(stream: StreamState, partition: number, chunk: Chunk): SnapshotRecord {
    return {
      record: () => {
        const writer = new RecordWriter();
        const head = { stream: stream.name, partition, first: chunk.first, timestamp: chunk.timestamp };
        writer.streamRecords(head, this.chunkRecords(stream, partition, chunk), () => {});
        writer.takeLocates();
        return Buffer.from(writer.take());
      },
      located: (seq, offset) => this.placed(chunk, { seq, payloadOffset: offset, changeAt: 0 }),
    };
  }

  /** The chunk's records: held, or read back from where they lie, their frame checked. */
  chunkRecords(stream: StreamState, partition: number, chunk: Chunk): StreamRecordRead[] {
    if (chunk.held) return chunk.held;
    const { place } = chunk;
    invariant(place, "a chunk not held in memory has a place in the log");
    const payload = checkedPayloadAt(
      (offset, length) => this.readPlaced(place.seq, offset, length),
      place.payloadOffset,
    );
    if (!payload)
      throw new HopperError(
        "store_damaged",
        `Stream ${stream.name}, partition ${partition}, offsets from ${chunk.first}: their log record fails its check.`,
        { stream: stream.name, partition, offset: chunk.first },
      );
    return readStreamRecords(payload, place.changeAt).records;
  }

  /** Retained records of the partition from `from`, at most `limit` and about `bytesMax` bytes. */
  read(
    stream: StreamState,
    partition: number,
    from: number,
    limit: number,
    bytesMax: number,
  ): StoredStreamRecord[] {
    const log = stream.logs[partition] as PartitionLog;
    const answered: StoredStreamRecord[] = [];
    let bytes = 0;
    for (let index = chunkIndexOf(log, from); index < log.chunks.length; index++) {
      const chunk = log.chunks[index] as Chunk;
      const records = this.chunkRecords(stream, partition, chunk);
      for (let at = Math.max(0, from - chunk.first); at < records.length; at++) {
        const size = chunk.sizes[at] as number;
        if (answered.length >= limit || (answered.length > 0 && bytes + size > bytesMax)) return answered;
        bytes += size;
        const record = records[at] as StreamRecordRead;
        answered.push({ partition, offset: chunk.first + at, timestamp: chunk.timestamp, ...record });
      }
    }
    return answered;
  }

  /** The log has the chunk's change at `place`: memory no longer holds its records. Not a change of
   * state (no record): replay and compaction place chunks again. */
  private placed(chunk: Chunk, place: ChunkPlace): void {
    chunk.place = place;
    if (chunk.held === undefined) return;
    const bytes = chunkBytes(chunk);
    chunk.held = undefined;
    this.hold(-bytes);
    this.diskBytes += bytes;
  }

  // ---- the primitives

  create(name: string, attributes: StreamAttributes, partitions: number, createdAt: number): void {
    const stream: StreamState = {
      name,
      attributes,
      createdAt,
      counters: { ...zeroStreamCounters },
      logs: Array.from({ length: partitions }, emptyPartition),
      get partitionCount() {
        return this.logs.length;
      },
      dedup: new Map(),
      groups: new Map(),
      shares: new Map(),
    };
    this.streams.set(name, stream);
    const bytes = limits.logStreamItemOverheadBytes * (1 + partitions) + name.length;
    this.hold(bytes);
    this.record({ op: "create", name, attributes, partitions, createdAt }, () => {
      this.hold(-bytes);
      this.streams.delete(name);
    });
  }

  update(stream: StreamState, attributes: StreamAttributes, partitions: number): void {
    const before = { attributes: stream.attributes, partitions: stream.logs.length };
    stream.attributes = attributes;
    const added = Math.max(0, partitions - before.partitions);
    for (let i = 0; i < added; i++) stream.logs.push(emptyPartition());
    this.hold(added * limits.logStreamItemOverheadBytes);
    this.record({ op: "update", name: stream.name, attributes, partitions }, () => {
      stream.attributes = before.attributes;
      stream.logs.length = before.partitions;
      this.hold(-added * limits.logStreamItemOverheadBytes);
    });
  }

  /** Removes the stream whole; what it held no longer counts. */
  drop(stream: StreamState): void {
    let held = limits.logStreamItemOverheadBytes * (1 + stream.logs.length) + stream.name.length;
    let onDisk = 0;
    for (const log of stream.logs) {
      for (const chunk of log.chunks) {
        held += heldChunkBytes(chunk);
        if (chunk.held === undefined) onDisk += chunkBytes(chunk);
      }
    }
    for (const dedupId of stream.dedup.keys()) held += limits.logStreamItemOverheadBytes + dedupId.length;
    for (const [group, state] of [...stream.groups, ...stream.shares]) held += groupBytes(group, state);
    this.streams.delete(stream.name);
    this.hold(-held);
    this.diskBytes -= onDisk;
    this.record({ op: "drop", name: stream.name }, () => {
      this.hold(held);
      this.diskBytes += onDisk;
      this.streams.set(stream.name, stream);
    });
  }

  addCounters(stream: StreamState, deltas: Partial<StreamCounters>): void {
    const counters = stream.counters as unknown as Record<string, number>;
    const add = (sign: number) => {
      for (const [name, delta] of Object.entries(deltas))
        counters[name] = (counters[name] ?? 0) + sign * (delta ?? 0);
    };
    add(1);
    this.record({ op: "counters", name: stream.name, deltas }, () => add(-1));
  }

  putHead(stream: StreamState, partition: number, head: PartitionHead): void {
    const log = stream.logs[partition] as PartitionLog;
    const before = { oldest: log.oldest, next: log.next, bytes: log.bytes, lastTimestamp: log.lastTimestamp };
    const { oldest, next, bytes, lastTimestamp } = head;
    Object.assign(log, { oldest, next, bytes, lastTimestamp });
    this.record({ op: "head", name: stream.name, partition, oldest, next, bytes, lastTimestamp }, () =>
      Object.assign(log, before),
    );
  }

  /** Stores one partition's records of an append as a chunk, held until its record is written. */
  insertRecords(
    stream: StreamState,
    partition: number,
    first: number,
    timestamp: number,
    records: readonly NewStreamRecord[],
  ): void {
    const log = stream.logs[partition] as PartitionLog;
    const held: StreamRecordRead[] = records.map(({ key, contentType, headers, body }) => ({
      key,
      contentType,
      headers,
      body,
    }));
    const sizes = Uint32Array.from(held, (record) =>
      typeof record.body === "string" ? Buffer.byteLength(record.body) : record.body.length,
    );
    const chunk: Chunk = { first, timestamp, sizes, held, place: undefined };
    this.addChunk(log, chunk);
    this.commits.changed(
      () => {
        log.chunks.pop();
        this.hold(-heldChunkBytes(chunk));
      },
      (writer) => {
        const changeAt = writer.streamRecords(
          { stream: stream.name, partition, first, timestamp },
          held,
          (seq, offset) => this.placed(chunk, { seq, payloadOffset: offset - changeAt, changeAt }),
        );
      },
    );
  }

  private addChunk(log: PartitionLog, chunk: Chunk): void {
    log.chunks.push(chunk);
    this.hold(heldChunkBytes(chunk));
    if (chunk.held === undefined) this.diskBytes += chunkBytes(chunk);
  }

  /** Drops the partition's chunks that lie wholly below `before`; answers the records below it. */
  trimBefore(stream: StreamState, partition: number, before: number): number {
    const log = stream.logs[partition] as PartitionLog;
    let count = 0;
    while (count < log.chunks.length) {
      const chunk = log.chunks[count] as Chunk;
      if (chunk.first + chunk.sizes.length > before) break;
      count++;
    }
    const removed = log.chunks.splice(0, count);
    const freed = removed.reduce((sum, chunk) => sum + heldChunkBytes(chunk), 0);
    const freedOnDisk = removed.reduce((sum, chunk) => sum + (chunk.held ? 0 : chunkBytes(chunk)), 0);
    this.hold(-freed);
    this.diskBytes -= freedOnDisk;
    this.record({ op: "trim", name: stream.name, partition, before }, () => {
      this.hold(freed);
      this.diskBytes += freedOnDisk;
      log.chunks.unshift(...removed);
    });
    return Math.max(0, before - log.oldest);
  }

  remember(stream: StreamState, dedupId: string, partition: number, offset: number, expiresAt: number): void {
    const before = stream.dedup.get(dedupId);
    stream.dedup.set(dedupId, { partition, offset, expiresAt });
    const bytes = before ? 0 : limits.logStreamItemOverheadBytes + dedupId.length;
    this.hold(bytes);
    this.record({ op: "dedup", name: stream.name, dedupId, partition, offset, expiresAt }, () => {
      this.hold(-bytes);
      if (before) stream.dedup.set(dedupId, before);
      else stream.dedup.delete(dedupId);
    });
  }

  forget(stream: StreamState, dedupId: string): void {
    const before = stream.dedup.get(dedupId);
    if (!before) return;
    stream.dedup.delete(dedupId);
    const bytes = limits.logStreamItemOverheadBytes + dedupId.length;
    this.hold(-bytes);
    this.record({ op: "dedupForget", name: stream.name, dedupId }, () => {
      this.hold(bytes);
      stream.dedup.set(dedupId, before);
    });
  }
  /** Stores a consumer group's state, or (`kind` "shares") a share group's. */
  putGroup(stream: StreamState, group: string, state: string, kind: "groups" | "shares" = "groups"): void {
    const groups = stream[kind];
    const before = groups.get(group);
    groups.set(group, state);
    const bytes = groupBytes(group, state) - (before === undefined ? 0 : groupBytes(group, before));
    this.hold(bytes);
    const change: StreamChange = {
      op: "group",
      name: stream.name,
      group,
      state,
      ...(kind === "shares" && { share: true as const }),
    };
    this.record(change, () => {
      this.hold(-bytes);
      if (before === undefined) groups.delete(group);
      else groups.set(group, before);
    });
  }

  dropGroup(stream: StreamState, group: string): void {
    const before = stream.groups.get(group);
    if (before === undefined) return;
    stream.groups.delete(group);
    this.hold(-groupBytes(group, before));
    this.record({ op: "groupDrop", name: stream.name, group }, () => {
      this.hold(groupBytes(group, before));
      stream.groups.set(group, before);
    });
  }
}

/** What a group's state costs the store's memory, about. */
function groupBytes(group: string, state: string): number {
  return limits.logStreamItemOverheadBytes + group.length + state.length;
}

/** The index of the chunk that holds `offset` (the first chunk when it lies before them all). */
export function chunkIndexOf(log: PartitionLog, offset: number): number {
  let low = 0;
  let high = log.chunks.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if ((log.chunks[middle] as Chunk).first <= offset) low = middle;
    else high = middle - 1;
  }
  return low;
}
