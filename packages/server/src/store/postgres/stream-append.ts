/**
 * The PostgreSQL store's stream append (StreamStore.streamAppend), in the lock order of
 * stream-store.ts: the stream row (KEY SHARE), the dedupIds it claims, then the heads of every
 * partition it writes to or counts a duplicate in, in partition order. Offsets are given from the
 * locked heads, so appends to one partition commit in offset order.
 */
import { partitionNotFound, streamNotFound } from "../../errors.js";
import { bodyBytes } from "../../model/message.js";
import type { NewStreamRecord, StreamAppendResult, StreamAttributes } from "../../model/stream.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import * as sql from "./statements/index.js";

interface HeadRow {
  partition: number;
  oldest: number;
  next: number;
  bytes: number;
  last_timestamp: number;
}

/** Locks the stream row against deletion and growth until commit (stream-store.ts, lock 1); throws
 * stream_not_found. */
export async function lockStreamShared(
  client: Client,
  name: string,
): Promise<{ stream_id: number; attributes: StreamAttributes; partitions: number }> {
  const stream = (
    await client.query<{ stream_id: number; attributes: StreamAttributes; partitions: number }>(
      sql.streamLockShared,
      [name],
    )
  ).rows[0];
  if (!stream) throw streamNotFound(name);
  return stream;
}

export class StreamAppends {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly link: PostgresClusterLink,
  ) {}

  streamAppend(params: { name: string; records: readonly NewStreamRecord[]; now: number }): Promise<{
    results: StreamAppendResult[];
  }> {
    return this.db.transaction(async (client) => ({ results: await this.appendIn(client, params) }));
  }

  /** The append, inside the transaction on `client` (an exchange publish's queue copies share it). */
  async appendIn(
    client: Client,
    params: { name: string; records: readonly NewStreamRecord[]; now: number },
  ): Promise<StreamAppendResult[]> {
    const stream = await lockStreamShared(client, params.name);
    for (const record of params.records) {
      if (
        !Number.isSafeInteger(record.partition) ||
        record.partition < 0 ||
        record.partition >= stream.partitions
      )
        throw partitionNotFound(params.name, record.partition, stream.partitions);
    }
    const streamId = stream.stream_id;
    const remembered = await this.claimDedupIds(client, streamId, stream.attributes, params);
    // Which records are duplicates (of a remembered id, or of one earlier in the call), which are new.
    const firstInCall = new Map<string, number>();
    const duplicateOf: (number | { partition: number; offset: number } | undefined)[] = params.records.map(
      (record, index) => {
        if (record.dedupId === null || stream.attributes.dedupWindowMs === 0) return undefined;
        const earlier = remembered.get(record.dedupId) ?? firstInCall.get(record.dedupId);
        if (earlier === undefined) firstInCall.set(record.dedupId, index);
        return earlier;
      },
    );
    const locked = new Set<number>();
    params.records.forEach((record, index) => {
      const duplicate = duplicateOf[index];
      if (duplicate === undefined) locked.add(record.partition);
      else if (typeof duplicate !== "number") locked.add(duplicate.partition);
    });
    const heads = new Map<number, HeadRow>();
    const headRows = await client.query<HeadRow>(sql.streamPartitionsLock, [
      streamId,
      [...locked].sort((a, b) => a - b),
    ]);
    for (const row of headRows.rows) heads.set(row.partition, row);
    return this.write(client, streamId, params, duplicateOf, heads);
  }

  /**
   * Forgets the call's dedupIds whose window ended, then claims those not remembered: answers where each
   * remembered one (claimed before this call) was appended.
   */
  private async claimDedupIds(
    client: Client,
    streamId: number,
    attributes: StreamAttributes,
    params: { records: readonly NewStreamRecord[]; now: number },
  ): Promise<Map<string, { partition: number; offset: number }>> {
    const remembered = new Map<string, { partition: number; offset: number }>();
    if (attributes.dedupWindowMs === 0) return remembered;
    const ids = [
      ...new Set(params.records.flatMap((record) => (record.dedupId === null ? [] : [record.dedupId]))),
    ];
    if (ids.length === 0) return remembered;
    await client.query(sql.streamDedupDeleteEnded, [streamId, ids, params.now]);
    const claimed = await client.query<{ dedup_id: string }>(sql.streamDedupClaim, [
      streamId,
      ids,
      params.now + attributes.dedupWindowMs,
    ]);
    const mine = new Set(claimed.rows.map((row) => row.dedup_id));
    const others = ids.filter((id) => !mine.has(id));
    if (others.length === 0) return remembered;
    const { rows } = await client.query<{ dedup_id: string; partition: number; record_offset: number }>(
      sql.streamDedupSelect,
      [streamId, others],
    );
    for (const row of rows)
      remembered.set(row.dedup_id, { partition: row.partition, offset: row.record_offset });
    return remembered;
  }

  /** Gives offsets from the locked heads, inserts the records, moves the heads, places the dedupIds. */
  private async write(
    client: Client,
    streamId: number,
    params: { name: string; records: readonly NewStreamRecord[]; now: number },
    duplicateOf: readonly (number | { partition: number; offset: number } | undefined)[],
    heads: Map<number, HeadRow>,
  ): Promise<StreamAppendResult[]> {
    const added = new Map<number, { count: number; bytes: number; duplicates: number }>();
    const addedTo = (partition: number) => {
      let entry = added.get(partition);
      if (!entry) {
        entry = { count: 0, bytes: 0, duplicates: 0 };
        added.set(partition, entry);
      }
      return entry;
    };
    const results: StreamAppendResult[] = [];
    const inserted: { record: NewStreamRecord; offset: number; body: Buffer }[] = [];
    params.records.forEach((record, index) => {
      const duplicate = duplicateOf[index];
      if (duplicate !== undefined) {
        const original =
          typeof duplicate === "number" ? (results[duplicate] as StreamAppendResult) : duplicate;
        addedTo(original.partition).duplicates++;
        results.push({ partition: original.partition, offset: original.offset, duplicate: true });
        return;
      }
      const head = heads.get(record.partition) as HeadRow;
      const entry = addedTo(record.partition);
      const offset = head.next + entry.count;
      const body = bodyBytes(record.body);
      entry.count++;
      entry.bytes += body.length;
      inserted.push({ record, offset, body });
      results.push({ partition: record.partition, offset, duplicate: false });
    });
    const timestampOf = (partition: number) =>
      Math.max(params.now, heads.get(partition)?.last_timestamp ?? 0);
    if (inserted.length > 0) {
      await client.query(sql.streamRecordsInsert, [
        streamId,
        inserted.map((item) => item.record.partition),
        inserted.map((item) => item.offset),
        inserted.map((item) => timestampOf(item.record.partition)),
        inserted.map((item) => item.record.key),
        inserted.map((item) => item.record.contentType),
        inserted.map((item) => JSON.stringify(item.record.headers)),
        inserted.map((item) => item.body.length),
        Buffer.concat(inserted.map((item) => item.body)),
      ]);
    }
    const partitions = [...added.keys()];
    await client.query(sql.streamPartitionsAdvance, [
      streamId,
      partitions,
      partitions.map(
        (partition) => (heads.get(partition) as HeadRow).next + (added.get(partition)?.count ?? 0),
      ),
      partitions.map((partition) => added.get(partition)?.bytes ?? 0),
      partitions.map((partition) =>
        (added.get(partition)?.count ?? 0) > 0
          ? timestampOf(partition)
          : (heads.get(partition) as HeadRow).last_timestamp,
      ),
      partitions.map((partition) => added.get(partition)?.count ?? 0),
      partitions.map((partition) => added.get(partition)?.duplicates ?? 0),
    ]);
    const placed = params.records
      .map((record, index) => ({ record, result: results[index] as StreamAppendResult }))
      .filter(({ record, result }) => record.dedupId !== null && !result.duplicate);
    if (placed.length > 0) {
      await client.query(sql.streamDedupPlace, [
        streamId,
        placed.map(({ record }) => record.dedupId),
        placed.map(({ result }) => result.partition),
        placed.map(({ result }) => result.offset),
      ]);
    }
    if (inserted.length > 0)
      this.link.announceStreamOnCommit(client, params.name, [
        ...new Set(inserted.map((item) => item.record.partition)),
      ]);
    return results;
  }
}
