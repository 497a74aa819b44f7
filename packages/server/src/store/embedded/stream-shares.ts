/**
 * A stream's share groups on the embedded stores: each call loads the group's state through the stream
 * rows, applies model/stream-share.ts (where what a share group means is written), reads the records
 * it hands out or dead-letters, and stores the state again, all inside one write of the store. A
 * dead letter is a queue send in the same write (`deadLetter`).
 */
import { deadLetterQueueNotFound, groupNotFound, invariant } from "../../errors.js";
import type { NewMessage } from "../../model/message.js";
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
import type { ShareRecord, StreamStore } from "../stream-store.js";
import type { StreamRows, StreamSlot } from "./stream-rows.js";
import type { EmbeddedStreams } from "./streams.js";

type Params<Name extends keyof StreamStore> = Parameters<StreamStore[Name]>[0];

export class EmbeddedStreamShares<S extends StreamSlot> {
  constructor(
    private readonly rows: StreamRows<S>,
    private readonly streams: EmbeddedStreams<S>,
    /** The queues, in the same write: whether one exists, and a send of one message to it. */
    private readonly queues: {
      exists(queue: string): boolean;
      send(queue: string, message: NewMessage, now: number): void;
    },
    /** A lease token (the store's random source). */
    private readonly token: () => number,
  ) {}

  private heads(stream: S): HeadRange[] {
    return Array.from({ length: stream.partitionCount }, (_, partition) => this.rows.head(stream, partition));
  }

  private existing(stream: S, group: string): ShareState {
    const state = this.rows.shareGet(stream, group);
    if (!state) throw groupNotFound(stream.name, group);
    return state;
  }

  private record(stream: S, partition: number, offset: number): StoredStreamRecord | undefined {
    const [record] = this.rows.recordsRead(stream, partition, offset, 1, Number.MAX_SAFE_INTEGER);
    return record?.offset === offset ? record : undefined;
  }

  /** Copies each dead letter's record into the dead-letter queue; answers how many went. */
  private deadLetters(
    stream: S,
    group: string,
    state: ShareState,
    dead: ShareDeadLetter[],
    newId: () => string,
    now: number,
  ): number {
    const queue = state.attributes.deadLetter?.queue;
    invariant(dead.length === 0 || queue, "only a share group with a dead-letter queue dead-letters");
    for (const letter of dead) {
      const record = this.record(stream, letter.partition, letter.offset);
      // A dead-letter queue deleted since is no destination: the record is dropped, and still counted.
      if (!record || !queue || !this.queues.exists(queue)) continue;
      const message = shareDeadLetterMessage(record, {
        id: newId(),
        now,
        stream: stream.name,
        group,
        deliveries: letter.deliveries,
      });
      this.queues.send(queue, message, now);
    }
    return dead.length;
  }

  upsert(params: Params<"streamShareUpsert">): { created: boolean; share: ReturnType<typeof shareInfo> } {
    const stream = this.streams.require(params.name);
    const deadLetterQueue = params.attributes.deadLetter?.queue;
    if (deadLetterQueue !== undefined && !this.queues.exists(deadLetterQueue))
      throw deadLetterQueueNotFound(deadLetterQueue);
    const existing = this.rows.shareGet(stream, params.group);
    const state = existing ?? newShareState(params.attributes, params.now);
    state.attributes = params.attributes;
    this.rows.sharePut(stream, params.group, state);
    return { created: !existing, share: shareInfo(params.group, state) };
  }

  receive(params: Params<"streamShareReceive">): {
    records: ShareRecord[];
    deadLettered: number;
    nextVisibleAt: number | null;
  } {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const heads = this.heads(stream);
    const lease = { now: params.now, leaseMs: params.leaseMs, token: this.token };
    const { deliveries, deadLetters } = shareRedeliver(state, { ...lease, max: params.max, heads });
    const records: ShareRecord[] = [];
    for (const delivery of deliveries) {
      const record = this.record(stream, delivery.partition, delivery.offset);
      if (record) records.push({ ...record, receipt: delivery.receipt, deliveries: delivery.deliveries });
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
      const read = this.rows.recordsRead(stream, partition, next, room, Number.MAX_SAFE_INTEGER);
      const taken: ShareDelivery[] = shareTakeNew(
        state,
        partition,
        read.map((record) => record.offset),
        lease,
      );
      read.forEach((record, index) => {
        const delivery = taken[index] as ShareDelivery;
        records.push({ ...record, receipt: delivery.receipt, deliveries: delivery.deliveries });
      });
    }
    const deadLettered = this.deadLetters(stream, params.group, state, deadLetters, params.newId, params.now);
    this.rows.sharePut(stream, params.group, state);
    return { records, deadLettered, nextVisibleAt: shareNextVisibleAt(state) };
  }

  ack(params: Params<"streamShareAck">): ReturnType<typeof shareAck> {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const results = shareAck(state, params.receipts);
    this.rows.sharePut(stream, params.group, state);
    return results;
  }

  nack(params: Params<"streamShareNack">): { results: ReturnType<typeof shareAck>; deadLettered: number } {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const { results, deadLetters } = shareNack(state, params.receipts, params);
    const deadLettered = this.deadLetters(stream, params.group, state, deadLetters, params.newId, params.now);
    this.rows.sharePut(stream, params.group, state);
    return { results, deadLettered };
  }

  extend(params: Params<"streamShareExtend">): ReturnType<typeof shareAck> {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const results = shareExtend(state, params.receipts, params);
    this.rows.sharePut(stream, params.group, state);
    return results;
  }

  pending(params: Params<"streamSharePending">): {
    share: ReturnType<typeof shareInfo>;
    pending: ReturnType<typeof sharePending>;
  } {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    return { share: shareInfo(params.group, state), pending: sharePending(state, params) };
  }
}
