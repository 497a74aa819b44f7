/**
 * The PostgreSQL store's share groups: each call is one transaction that locks the stream row (KEY
 * SHARE), then the share group's row FOR UPDATE, applies model/stream-share.ts (where what a share
 * group means is written) to its state, reads the records it hands out or dead-letters, sends the
 * dead letters to their queue (its row locked shared, as any send), and writes the state back. Calls
 * on one share group apply one after another on every node, so two consumers never hold one record.
 */
import { deadLetterQueueNotFound, groupNotFound } from "../../errors.js";
import type { NewMessage } from "../../model/message.js";
import { noSendPolicy } from "../../model/policies.js";
import type { StoredStreamRecord } from "../../model/stream.js";
import type { HeadRange } from "../../model/stream-group.js";
import {
  newShareState,
  type ShareDeadLetter,
  type ShareDelivery,
  type ShareState,
  shareAck,
  shareDeadLetterMessage,
  shareExtend,
  shareInfo,
  shareNack,
  shareNext,
  shareNextVisibleAt,
  sharePending,
  shareRedeliver,
  shareTakeNew,
} from "../../model/stream-share.js";
import type { Random } from "../../random.js";
import type { ShareRecord, StreamStore } from "../stream-store.js";
import type { Client, PostgresDatabase } from "./database.js";
import type { QueueContext } from "./queue-context.js";
import * as sql from "./statements/index.js";
import { lockStreamShared } from "./stream-append.js";
import type { PostgresStreamStore } from "./stream-store.js";

type Params<Name extends keyof StreamStore> = Parameters<StreamStore[Name]>[0];
type LockedStream = Awaited<ReturnType<typeof lockStreamShared>> & { name: string };

export class StreamShares {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly streams: PostgresStreamStore,
    private readonly queues: QueueContext,
    private readonly random: Random,
  ) {}

  /** Runs `work` on the locked stream and the share group's locked state, then saves the state. */
  private inShare<T>(
    params: { name: string; group: string },
    work: (client: Client, stream: LockedStream, state: ShareState) => Promise<T>,
  ): Promise<T> {
    return this.db.transaction(async (client) => {
      const stream = { ...(await lockStreamShared(client, params.name)), name: params.name };
      const row = (
        await client.query<{ state: ShareState }>(sql.streamShareLock, [stream.stream_id, params.group])
      ).rows[0];
      if (!row) throw groupNotFound(params.name, params.group);
      const result = await work(client, stream, row.state);
      await client.query(sql.streamShareSave, [stream.stream_id, params.group, JSON.stringify(row.state)]);
      return result;
    });
  }

  private async record(client: Client, name: string, partition: number, offset: number, limit = 1) {
    const read = await this.streams.readIn(client, {
      name,
      partition,
      position: { offset },
      limit,
      bytesMax: Number.MAX_SAFE_INTEGER,
    });
    return read.records;
  }

  private async heads(client: Client, stream: LockedStream): Promise<HeadRange[]> {
    const { rows } = await client.query<{ oldest: number; next: number }>(sql.streamHeads, [
      stream.stream_id,
    ]);
    return rows.map((row) => ({ oldest: row.oldest, next: row.next }));
  }

  /** Copies each dead letter's record into the dead-letter queue; one that no longer exists drops it. */
  private async deadLetters(
    client: Client,
    stream: LockedStream,
    params: { group: string; now: number; newId: () => string },
    state: ShareState,
    dead: readonly ShareDeadLetter[],
  ): Promise<number> {
    const name = state.attributes.deadLetter?.queue;
    if (dead.length === 0 || !name) return dead.length;
    const queue = await this.queues.writes.lockQueue(client, name, "share");
    if (!queue) return dead.length;
    const messages: NewMessage[] = [];
    for (const letter of dead) {
      const [record] = await this.record(client, stream.name, letter.partition, letter.offset);
      if (record?.offset !== letter.offset) continue;
      const id = params.newId();
      messages.push(
        shareDeadLetterMessage(record, {
          id,
          now: params.now,
          stream: stream.name,
          group: params.group,
          ...letter,
        }),
      );
    }
    const { written } = await this.queues.writes.send(client, queue, messages, noSendPolicy, params.now);
    this.queues.link.announceOnCommit(client, ...written);
    return dead.length;
  }

  upsert(params: Params<"streamShareUpsert">): ReturnType<StreamStore["streamShareUpsert"]> {
    return this.db.transaction(async (client) => {
      const stream = await lockStreamShared(client, params.name);
      const queue = params.attributes.deadLetter?.queue;
      if (queue !== undefined && !(await this.queues.writes.lockQueue(client, queue, "share")))
        throw deadLetterQueueNotFound(queue);
      const row = (
        await client.query<{ state: ShareState }>(sql.streamShareLock, [stream.stream_id, params.group])
      ).rows[0];
      const state = row?.state ?? newShareState(params.attributes, params.now);
      state.attributes = params.attributes;
      await client.query(sql.streamShareUpsert, [stream.stream_id, params.group, JSON.stringify(state)]);
      return { created: !row, share: shareInfo(params.group, state) };
    });
  }

  receive(params: Params<"streamShareReceive">): ReturnType<StreamStore["streamShareReceive"]> {
    return this.inShare(params, async (client, stream, state) => {
      const heads = await this.heads(client, stream);
      const lease = { now: params.now, leaseMs: params.leaseMs, token: () => this.random.uint48() };
      const { deliveries, deadLetters } = shareRedeliver(state, { ...lease, max: params.max, heads });
      const records: ShareRecord[] = [];
      const withLease = (record: StoredStreamRecord, delivery: ShareDelivery) =>
        records.push({ ...record, receipt: delivery.receipt, deliveries: delivery.deliveries });
      for (const delivery of deliveries) {
        const [record] = await this.record(client, params.name, delivery.partition, delivery.offset);
        if (record?.offset === delivery.offset) withLease(record, delivery);
      }
      for (let partition = 0; partition < heads.length; partition++) {
        const room = Math.min(
          params.max - records.length,
          params.inFlightMax - Object.keys(state.inFlight).length,
        );
        if (room <= 0) break;
        const head = heads[partition] as HeadRange;
        const next = shareNext(state, partition, head);
        if (next >= head.next) continue;
        const read = await this.record(client, params.name, partition, next, room);
        const taken = shareTakeNew(
          state,
          partition,
          read.map((record) => record.offset),
          lease,
        );
        read.forEach((record, index) => {
          withLease(record, taken[index] as ShareDelivery);
        });
      }
      const deadLettered = await this.deadLetters(client, stream, params, state, deadLetters);
      return { records, deadLettered, nextVisibleAt: shareNextVisibleAt(state) };
    });
  }

  ack(params: Params<"streamShareAck">): ReturnType<StreamStore["streamShareAck"]> {
    return this.inShare(params, async (_client, _stream, state) => shareAck(state, params.receipts));
  }

  nack(params: Params<"streamShareNack">): ReturnType<StreamStore["streamShareNack"]> {
    return this.inShare(params, async (client, stream, state) => {
      const { results, deadLetters } = shareNack(state, params.receipts, params);
      return { results, deadLettered: await this.deadLetters(client, stream, params, state, deadLetters) };
    });
  }

  extend(params: Params<"streamShareExtend">): ReturnType<StreamStore["streamShareExtend"]> {
    return this.inShare(params, async (_client, _stream, state) =>
      shareExtend(state, params.receipts, params),
    );
  }

  pending(params: Params<"streamSharePending">): ReturnType<StreamStore["streamSharePending"]> {
    return this.inShare(params, async (_client, _stream, state) => ({
      share: shareInfo(params.group, state),
      pending: sharePending(state, params),
    }));
  }
}
