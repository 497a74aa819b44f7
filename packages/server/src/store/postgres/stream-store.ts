/**
 * The PostgreSQL store's streams (StreamStore): stream records, reads and retention here; the append in
 * stream-append.ts. Each call is one transaction, or one statement for a read.
 *
 * Locks, always taken in this order (docs/invariants.md, "Streams"):
 *   1. the stream row: KEY SHARE by every append (so a delete or a growth waits for the appends in
 *      flight), UPDATE by an upsert or a delete;
 *   2. dedupIds claimed by an append, inserted in byte order (a concurrent append of the same id
 *      waits for the first to commit, then finds it remembered);
 *   3. partition heads, FOR UPDATE, several always in one statement in partition order.
 *
 * Invariant (offsets visible in order): an append takes its partitions' head rows FOR UPDATE, gives
 * offsets from `next`, and writes the new `next` in the same commit as the records. The next append to
 * a partition waits for that lock, so appends to one partition commit one after another in offset
 * order, and any snapshot that holds offset n holds every offset below it (no reader sees offset 7
 * before 6 commits). A read runs as one statement, from one snapshot, and answers only records below
 * the `next` of that snapshot.
 */
import {
  HopperError,
  invariant,
  offsetOutOfRange,
  partitionNotFound,
  partitionsShrink,
  streamNotFound,
} from "../../errors.js";
import { limits } from "../../limits.js";
import {
  retentionCut,
  type StoredStreamRecord,
  type StreamAttributes,
  type StreamRecord,
} from "../../model/stream.js";
import type { StreamStore } from "../stream-store.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import * as sql from "./statements/index.js";
import { lockStreamShared, StreamAppends } from "./stream-append.js";

interface StreamRow {
  stream_id: number;
  name: string;
  attributes: StreamAttributes;
  partitions: number;
  created_at: number;
  appended: number;
  appended_bytes: number;
  duplicates: number;
  expired: number;
  heads: { partition: number; oldest: number; next: number; bytes: number }[];
}

function toStreamRecord(row: StreamRow): StreamRecord {
  return {
    name: row.name,
    attributes: row.attributes,
    createdAt: row.created_at,
    counters: {
      appended: row.appended,
      appendedBytes: row.appended_bytes,
      duplicates: row.duplicates,
      expired: row.expired,
    },
    partitions: row.heads.map((head) => ({
      partition: head.partition,
      oldest: Number(head.oldest),
      next: Number(head.next),
      records: Number(head.next) - Number(head.oldest),
      bytes: Number(head.bytes),
    })),
  };
}

type ReadParams = Parameters<StreamStore["streamRead"]>[0];

/** A row of statements.streamRead: the state (record_offset -1) or a record. */
interface ReadRow {
  record_offset: number;
  partitions: number | null;
  oldest: number | null;
  next: number | null;
  from_offset: number | null;
  timestamp: number | null;
  key: string | null;
  content_type: string | null;
  headers: string | null;
  body: Buffer | null;
}

export class PostgresStreamStore
  implements
    Pick<
      StreamStore,
      "streamUpsert" | "streamGet" | "streamList" | "streamDelete" | "streamRead" | "streamSweep"
    >
{
  readonly appends: StreamAppends;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly link: PostgresClusterLink,
  ) {
    this.appends = new StreamAppends(db, link);
  }

  streamUpsert(params: {
    name: string;
    attributes: StreamAttributes;
    partitions: number;
    now: number;
  }): Promise<{ created: boolean; stream: StreamRecord }> {
    return this.db.transaction(async (client) => {
      const attributes = JSON.stringify(params.attributes);
      let existing = (
        await client.query<{ stream_id: number; partitions: number }>(sql.streamLockForUpdate, [params.name])
      ).rows[0];
      let created = false;
      if (!existing) {
        const { rows } = await client.query<{ n: number }>(sql.streamCount);
        if ((rows[0]?.n ?? 0) >= limits.streamsMax) throw new HopperError("too_many_streams");
        const inserted = await client.query<{ stream_id: number }>(sql.streamInsert, [
          params.name,
          attributes,
          params.partitions,
          params.now,
        ]);
        const streamId = inserted.rows[0]?.stream_id;
        if (streamId !== undefined) {
          created = true;
          await client.query(sql.streamPartitionsInsert, [streamId, 0, params.partitions]);
        } else {
          // A concurrent create won the name: this call becomes an update of that stream.
          existing = (await client.query(sql.streamLockForUpdate, [params.name])).rows[0];
        }
      }
      if (existing) {
        if (params.partitions < existing.partitions) throw partitionsShrink(params.name, existing.partitions);
        await client.query(sql.streamUpdate, [existing.stream_id, attributes, params.partitions]);
        if (params.partitions > existing.partitions)
          await client.query(sql.streamPartitionsInsert, [
            existing.stream_id,
            existing.partitions,
            params.partitions,
          ]);
      }
      const row = (await client.query<StreamRow>(sql.streamSelectByName, [params.name])).rows[0];
      invariant(row, "an upserted stream exists in its own transaction");
      return { created, stream: toStreamRecord(row) };
    });
  }

  async streamGet(params: { name: string }): Promise<StreamRecord | undefined> {
    const row = (await this.db.statement<StreamRow>(sql.streamSelectByName, [params.name])).rows[0];
    return row && toStreamRecord(row);
  }

  async streamList(): Promise<StreamRecord[]> {
    return (await this.db.statement<StreamRow>(sql.streamSelectAll, [])).rows.map(toStreamRecord);
  }

  streamDelete(params: { name: string }): Promise<{ removed: number }> {
    return this.db.transaction(async (client) => {
      const stream = (await client.query<{ stream_id: number }>(sql.streamLockForUpdate, [params.name]))
        .rows[0];
      if (!stream) throw streamNotFound(params.name);
      const { rows } = await client.query<{ removed: number }>(sql.streamDeleteAll, [stream.stream_id]);
      await client.query(sql.bindingDeleteByDestination, ["stream", params.name]);
      // Every node drops its cached bindings, which may lead to this stream.
      await this.link.announce(client, { kind: "stream", stream: params.name, partitions: null });
      return { removed: rows[0]?.removed ?? 0 };
    });
  }

  streamAppend(params: Parameters<StreamStore["streamAppend"]>[0]): ReturnType<StreamStore["streamAppend"]> {
    return this.appends.streamAppend(params);
  }

  streamRead(params: ReadParams): Promise<{ records: StoredStreamRecord[]; oldest: number; next: number }> {
    return this.readWith((text, values) => this.db.statement<ReadRow>(text, values), params);
  }

  /** The read, inside the transaction on `client` (a group's fetch). */
  readIn(
    client: Client,
    params: ReadParams,
  ): Promise<{ records: StoredStreamRecord[]; oldest: number; next: number }> {
    return this.readWith((text, values) => client.query<ReadRow>(text, values), params);
  }

  private async readWith(
    query: (text: string, values: unknown[]) => Promise<{ rows: ReadRow[] }>,
    params: ReadParams,
  ): Promise<{ records: StoredStreamRecord[]; oldest: number; next: number }> {
    const { position } = params;
    const { rows } = await query(sql.streamRead, [
      params.name,
      params.partition,
      "offset" in position ? position.offset : null,
      "time" in position ? position.time : 0,
      params.limit,
      params.bytesMax,
    ]);
    const state = rows.find((row) => row.record_offset === -1);
    if (!state) throw streamNotFound(params.name);
    if (state.oldest === null || state.next === null)
      throw partitionNotFound(params.name, params.partition, state.partitions ?? 0);
    const head = { oldest: state.oldest, next: state.next };
    const from = state.from_offset ?? head.next;
    if (from < head.oldest || from > head.next) throw offsetOutOfRange(from, head);
    const records = rows
      .filter((row) => row.record_offset >= 0)
      .sort((a, b) => a.record_offset - b.record_offset)
      .map(
        (row): StoredStreamRecord => ({
          partition: params.partition,
          offset: row.record_offset,
          timestamp: row.timestamp ?? 0,
          key: row.key,
          contentType: row.content_type ?? "",
          headers: JSON.parse(row.headers ?? "{}") as Record<string, string>,
          body: row.body ?? Buffer.alloc(0),
        }),
      );
    return { records, ...head };
  }

  /** Each partition in its own lock, one after another, in one transaction. */
  streamSweep(params: { name: string; now: number; max: number }): Promise<{ expired: number }> {
    return this.db.transaction(async (client) => {
      const stream = await lockStreamShared(client, params.name);
      let expired = 0;
      for (let partition = 0; partition < stream.partitions && expired < params.max; partition++) {
        const head = (
          await client.query<{ oldest: number; next: number; bytes: number }>(sql.streamPartitionLock, [
            stream.stream_id,
            partition,
          ])
        ).rows[0];
        if (!head || head.oldest === head.next) continue;
        const oldest = await client.query<{ record_offset: number; timestamp: number; bytes: number }>(
          sql.streamOldestSizes,
          [stream.stream_id, partition, params.max - expired],
        );
        const sizes = oldest.rows.map((row) => ({
          offset: row.record_offset,
          timestamp: row.timestamp,
          bytes: row.bytes,
        }));
        const cut = retentionCut(stream.attributes, head, sizes, params.now);
        if (cut === head.oldest) continue;
        const trimmed = await client.query<{ expired: number }>(sql.streamPartitionTrim, [
          stream.stream_id,
          partition,
          cut,
        ]);
        expired += trimmed.rows[0]?.expired ?? 0;
      }
      await client.query(sql.streamDedupForget, [stream.stream_id, params.now, params.max]);
      return { expired };
    });
  }
}
