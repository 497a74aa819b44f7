/**
 * The log store's stream rows (embedded/stream-rows.ts): the streams in memory (stream-state.ts),
 * changed only through its primitives. What the rows mean is in the engine (embedded/streams.ts).
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
import type { PartitionHead, RecordSize, StreamRows } from "../embedded/stream-rows.js";
import { compareText } from "./queue-state.js";
import {
  type Chunk,
  chunkIndexOf,
  type LogStreamState,
  type PartitionLog,
  type StreamState,
} from "./stream-state.js";

export class LogStreamRows implements StreamRows<StreamState> {
  constructor(
    private readonly state: LogStreamState,
    /** What the store holds now, and its bound (the queue rows' capacity check). */
    private readonly capacity: { mark(): number; check(mark: number): void },
  ) {}

  stream(name: string): StreamState | undefined {
    return this.state.streams.get(name);
  }

  streamRecord(stream: StreamState): StreamRecord {
    return {
      name: stream.name,
      attributes: stream.attributes,
      createdAt: stream.createdAt,
      counters: { ...stream.counters },
      partitions: stream.logs.map((log, partition) => ({
        partition,
        oldest: log.oldest,
        next: log.next,
        records: log.next - log.oldest,
        bytes: log.bytes,
      })),
    };
  }

  streamRecords(): StreamRecord[] {
    return [...this.state.streams.values()]
      .sort((a, b) => compareText(a.name, b.name))
      .map((stream) => this.streamRecord(stream));
  }

  streamCount(): number {
    return this.state.streams.size;
  }

  streamInsert(name: string, attributes: StreamAttributes, partitions: number, now: number): void {
    this.state.create(name, attributes, partitions, now);
  }

  streamUpdate(stream: StreamState, attributes: StreamAttributes, partitions: number): void {
    this.state.update(stream, attributes, partitions);
  }

  streamRemove(stream: StreamState): number {
    const records = stream.logs.reduce((sum, log) => sum + log.next - log.oldest, 0);
    this.state.drop(stream);
    return records;
  }

  countersAdd(stream: StreamState, deltas: Partial<StreamCounters>): void {
    if (Object.values(deltas).some((delta) => delta !== 0)) this.state.addCounters(stream, deltas);
  }

  head(stream: StreamState, partition: number): PartitionHead {
    const { oldest, next, bytes, lastTimestamp } = stream.logs[partition] as PartitionLog;
    return { oldest, next, bytes, lastTimestamp };
  }

  headPut(stream: StreamState, partition: number, head: PartitionHead): void {
    this.state.putHead(stream, partition, head);
  }

  recordsInsert(
    stream: StreamState,
    partition: number,
    first: number,
    timestamp: number,
    records: readonly NewStreamRecord[],
  ): void {
    this.state.insertRecords(stream, partition, first, timestamp, records);
  }

  recordsRead(
    stream: StreamState,
    partition: number,
    from: number,
    limit: number,
    bytesMax: number,
  ): StoredStreamRecord[] {
    return this.state.read(stream, partition, from, limit, bytesMax);
  }

  /** A binary search over the chunks: timestamps never go back within a partition. */
  offsetAtTime(stream: StreamState, partition: number, time: number): number | undefined {
    const log = stream.logs[partition] as PartitionLog;
    let low = 0;
    let high = log.chunks.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if ((log.chunks[middle] as Chunk).timestamp >= time) high = middle;
      else low = middle + 1;
    }
    const chunk = log.chunks[low];
    return chunk && Math.max(chunk.first, log.oldest);
  }

  oldestSizes(stream: StreamState, partition: number, limit: number): RecordSize[] {
    const log = stream.logs[partition] as PartitionLog;
    const sizes: RecordSize[] = [];
    for (let index = chunkIndexOf(log, log.oldest); index < log.chunks.length; index++) {
      const chunk = log.chunks[index] as Chunk;
      for (let at = Math.max(0, log.oldest - chunk.first); at < chunk.sizes.length; at++) {
        if (sizes.length >= limit) return sizes;
        sizes.push({
          offset: chunk.first + at,
          timestamp: chunk.timestamp,
          bytes: chunk.sizes[at] as number,
        });
      }
    }
    return sizes;
  }

  recordsTrimBefore(stream: StreamState, partition: number, offset: number): number {
    return this.state.trimBefore(stream, partition, offset);
  }

  dedupLookup(
    stream: StreamState,
    dedupId: string,
    now: number,
  ): { partition: number; offset: number } | undefined {
    const remembered = stream.dedup.get(dedupId);
    return remembered && remembered.expiresAt > now
      ? { partition: remembered.partition, offset: remembered.offset }
      : undefined;
  }

  dedupRemember(
    stream: StreamState,
    dedupId: string,
    partition: number,
    offset: number,
    expiresAt: number,
  ): void {
    this.state.remember(stream, dedupId, partition, offset, expiresAt);
  }

  dedupForget(stream: StreamState, now: number, max: number): number {
    const expired: string[] = [];
    for (const [dedupId, { expiresAt }] of stream.dedup) {
      if (expired.length >= max) break;
      if (expiresAt <= now) expired.push(dedupId);
    }
    for (const dedupId of expired) this.state.forget(stream, dedupId);
    return expired.length;
  }

  groupGet(stream: StreamState, group: string): GroupState | undefined {
    const state = stream.groups.get(group);
    return state === undefined ? undefined : (JSON.parse(state) as GroupState);
  }

  groupPut(stream: StreamState, group: string, state: GroupState): void {
    this.state.putGroup(stream, group, JSON.stringify(state));
  }

  groupRemove(stream: StreamState, group: string): void {
    this.state.dropGroup(stream, group);
  }

  groupNames(stream: StreamState): string[] {
    return [...stream.groups.keys()].sort(compareText);
  }

  shareGet(stream: StreamState, group: string): ShareState | undefined {
    const state = stream.shares.get(group);
    return state === undefined ? undefined : (JSON.parse(state) as ShareState);
  }

  sharePut(stream: StreamState, group: string, state: ShareState): void {
    this.state.putGroup(stream, group, JSON.stringify(state), "shares");
  }

  capacityMark(): number {
    return this.capacity.mark();
  }

  capacityCheck(mark: number): void {
    this.capacity.check(mark);
  }
}
