/**
 * What streams do (DESIGN.md §5, docs/streams.md): the one object the protocol adapters call for
 * streams, appends and reads. It validates every input before the store is called (a refused item
 * changes nothing), chooses each record's partition (an explicit `partition`, else the key's stable
 * hash, else round robin), and runs retention on a timer (streamSweep, on the node that leads
 * housekeeping). It knows no protocol.
 */
import type { Clock } from "../clock.js";
import { HopperError, streamNotFound } from "../errors.js";
import { uuidv7Generator } from "../ids.js";
import { limits } from "../limits.js";
import { bodyByteLength } from "../model/message.js";
import { decodeMessageBody } from "../model/message-body.js";
import {
  type NewStreamRecord,
  partitionOfKey,
  type ReadPosition,
  type StoredStreamRecord,
  type StreamAppendResult,
  type StreamRecord,
} from "../model/stream.js";
import {
  defaultStreamAttributes,
  resolveStreamAttributes,
  type StreamAttributesInput,
} from "../model/stream-attributes.js";
import { checkHeaders } from "./inboxes.js";
import { PeriodicPass } from "./periodic-pass.js";
import { checkName, type Logger } from "./queue-context.js";
import type { OutgoingMessage } from "./queues.js";
import type { Router } from "./router.js";
import { type StreamBrokerStore, StreamGroupBroker, streamTopic } from "./stream-groups.js";
import { StreamShareBroker } from "./stream-shares.js";
import { Wakeups } from "./wake.js";

export type { StreamBrokerStore } from "./stream-groups.js";

/** A record as a protocol adapter hands it over: the wire's fields, its body not yet decoded. */
export interface AppendRecordRequest {
  body?: unknown;
  bodyBase64?: string;
  contentType?: string;
  headers?: Record<string, string>;
  key?: string;
  partition?: number;
  dedupId?: string;
}

export type StreamAppendItem = StreamAppendResult | { error: HopperError };

export interface StreamReadOptions {
  /** An offset, or a time (ms since the epoch): the first record appended at or after it. */
  from?: number | undefined;
  fromTime?: number | undefined;
  limit?: number | undefined;
}

function invalid(message: string, details?: Record<string, unknown>): HopperError {
  return new HopperError("invalid_request", message, details);
}

export class StreamBroker {
  /** The next partition of a record with no key and no partition, per stream: round robin on this node. */
  private readonly roundRobin = new Map<string, number>();
  private readonly retention: PeriodicPass;
  /** Each stream's topic (streamTopic) advances after every append that wrote to it. */
  readonly wake: Wakeups;
  /** The stream's consumer groups (stream-groups.ts). */
  readonly groups: StreamGroupBroker;
  /** The stream's share groups (stream-shares.ts). */
  readonly shares: StreamShareBroker;

  constructor(
    private readonly store: StreamBrokerStore,
    private readonly clock: Clock,
    log: Logger = { info: () => {}, warn: console.warn, error: console.error },
    /** The exchange router, whose cached bindings a deleted stream takes with it. */
    private readonly router?: Pick<Router, "invalidate">,
  ) {
    this.wake = new Wakeups(clock);
    this.groups = new StreamGroupBroker(store, clock, this.wake, () => this.retention.isStopped);
    this.shares = new StreamShareBroker(
      store,
      clock,
      this.wake,
      uuidv7Generator(clock),
      () => this.retention.isStopped,
    );
    this.retention = new PeriodicPass(
      clock,
      limits.streamSweepIntervalMs,
      () => this.sweepNow(),
      (error) => log.error({ err: error }, "stream retention failed; retrying next pass"),
    );
  }

  /** Listens to the other nodes' appends and starts retention's timer. */
  start(): void {
    this.store.watch((event) => {
      if (event.kind === "resync") this.wake.advanceAll();
      else if (event.kind === "stream") this.wake.advance(streamTopic(event.stream));
    });
    this.retention.start();
  }

  /** Ends retention's timer and every waiting fetch (they answer what they have). */
  stop(): void {
    this.retention.stop();
    this.wake.advanceAll();
  }

  /** Records were appended to the stream (here, or by an exchange publish): its fetches look again. */
  appended(stream: string): void {
    this.wake.advance(streamTopic(stream));
  }

  /** Creates the stream, or updates its attributes and grows its partitions (never shrinks them). */
  async putStream(
    name: string,
    input: StreamAttributesInput & { partitions?: number },
  ): Promise<{ created: boolean; stream: StreamRecord }> {
    checkName(name);
    const { partitions: asked, ...attributesInput } = input;
    const existing = await this.store.streamGet({ name });
    const attributes = resolveStreamAttributes(
      existing?.attributes ?? defaultStreamAttributes,
      attributesInput,
    );
    const partitions = asked ?? existing?.partitions.length ?? 1;
    if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > limits.streamPartitionsMax)
      throw new HopperError(
        "invalid_attribute",
        `partitions must be an integer from 1 to ${limits.streamPartitionsMax}.`,
        {
          attribute: "partitions",
        },
      );
    return this.store.streamUpsert({ name, attributes, partitions, now: this.clock.now() });
  }

  async getStream(name: string): Promise<StreamRecord> {
    checkName(name);
    const stream = await this.store.streamGet({ name });
    if (!stream) throw streamNotFound(name);
    return stream;
  }

  listStreams(): Promise<StreamRecord[]> {
    return this.store.streamList();
  }

  async deleteStream(name: string): Promise<{ removed: number }> {
    checkName(name);
    const result = await this.store.streamDelete({ name });
    this.roundRobin.delete(name);
    this.router?.invalidate();
    return result;
  }

  /** The record an exchange publish appends to `stream` for `message` (its partition by key, else round
   * robin). Throws stream_not_found. */
  async recordOf(stream: string, message: OutgoingMessage): Promise<NewStreamRecord> {
    const { partitions } = await this.getStream(stream);
    return {
      partition: this.partitionOf(stream, message.key, partitions.length),
      body: message.body,
      contentType: message.contentType,
      headers: message.headers ?? {},
      key: message.key ?? null,
      dedupId: message.dedupId ?? null,
    };
  }

  /** A record's partition: its key's stable hash, or the stream's next in round robin. */
  private partitionOf(stream: string, key: string | undefined, partitions: number): number {
    if (key !== undefined) return partitionOfKey(key, partitions);
    const partition = (this.roundRobin.get(stream) ?? 0) % partitions;
    this.roundRobin.set(stream, (partition + 1) % partitions);
    return partition;
  }

  /**
   * Appends the records in one transaction, each to its partition; answers per record, in order. An
   * item that fails its checks answers its error and is not written; the others are, all together.
   * `bodiesSentAs[i]`: record i's JSON body as its producer sent it, when the adapter knows it.
   */
  async append(
    name: string,
    records: readonly AppendRecordRequest[],
    bodiesSentAs: readonly (Buffer | undefined)[] = [],
  ): Promise<StreamAppendItem[]> {
    const stream = await this.getStream(name);
    if (records.length < 1 || records.length > limits.batchSizeMax)
      throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} records.`);
    const partitions = stream.partitions.length;
    const items: (NewStreamRecord | { error: HopperError })[] = records.map((record, index) => {
      try {
        return this.checked(name, record, partitions, `records[${index}]`, bodiesSentAs[index]);
      } catch (error) {
        if (error instanceof HopperError) return { error };
        throw error;
      }
    });
    const valid = items.filter((item): item is NewStreamRecord => !("error" in item));
    const { results } =
      valid.length === 0
        ? { results: [] }
        : await this.store.streamAppend({ name, records: valid, now: this.clock.now() });
    if (results.some((result) => !result.duplicate)) this.appended(name);
    let next = 0;
    return items.map((item) => ("error" in item ? item : (results[next++] as StreamAppendResult)));
  }

  /** One record's checks and its partition. */
  private checked(
    stream: string,
    record: AppendRecordRequest,
    partitions: number,
    where: string,
    sentAs: Buffer | undefined,
  ): NewStreamRecord {
    const headers = checkHeaders(record.headers ?? {});
    if (record.key !== undefined && (record.key.length < 1 || record.key.length > limits.keyLengthMax))
      throw invalid(`${where}.key is 1 to ${limits.keyLengthMax} characters.`, { where });
    if (
      record.dedupId !== undefined &&
      (record.dedupId.length < 1 || record.dedupId.length > limits.dedupIdLengthMax)
    )
      throw invalid(`${where}.dedupId is 1 to ${limits.dedupIdLengthMax} characters.`, { where });
    const { body, contentType } = decodeMessageBody(record, where, sentAs);
    const bytes = bodyByteLength(body);
    if (bytes > limits.messageBytesMax)
      throw new HopperError(
        "message_too_large",
        `${where}: the body is ${bytes} bytes; a record takes at most ${limits.messageBytesMax}.`,
        {
          bytes,
          max: limits.messageBytesMax,
        },
      );
    let partition: number;
    if (record.partition !== undefined) {
      if (!Number.isSafeInteger(record.partition) || record.partition < 0 || record.partition >= partitions)
        throw new HopperError(
          "partition_not_found",
          `Stream "${stream}" has partitions 0 to ${partitions - 1}; there is no ${record.partition}.`,
          { stream, partition: record.partition, partitions, where },
        );
      partition = record.partition;
    } else {
      partition = this.partitionOf(stream, record.key, partitions);
    }
    return {
      partition,
      body,
      contentType,
      headers,
      key: record.key ?? null,
      dedupId: record.dedupId ?? null,
    };
  }

  /** A partition's records from an offset (default 0's oldest) or a time, at most `limit`. */
  async read(
    name: string,
    partition: number,
    options: StreamReadOptions,
  ): Promise<{ records: StoredStreamRecord[]; oldest: number; next: number }> {
    checkName(name);
    if (options.from !== undefined && options.fromTime !== undefined)
      throw invalid("Give from or fromTime, not both.");
    const limit = options.limit ?? limits.streamReadLimitDefault;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > limits.streamReadLimitMax)
      throw invalid(`limit must be an integer from 1 to ${limits.streamReadLimitMax}.`);
    let position: ReadPosition;
    if (options.fromTime !== undefined) position = { time: options.fromTime };
    else if (options.from !== undefined) position = { offset: options.from };
    else position = { offset: (await this.getStream(name)).partitions[partition]?.oldest ?? 0 };
    return this.store.streamRead({ name, partition, position, limit, bytesMax: limits.streamReadBytesMax });
  }

  /** One retention pass now, as the timer makes them (tests, and an operator's tool). */
  async sweepNow(): Promise<{ expired: number }> {
    let expired = 0;
    if (!(await this.store.housekeepingLeader())) return { expired };
    for (const stream of await this.store.streamList()) {
      if (this.retention.isStopped) break;
      for (let call = 0; call < limits.streamSweepCallsPerPassMax; call++) {
        const max = limits.streamSweepBatchMax;
        let swept: { expired: number };
        try {
          swept = await this.store.streamSweep({ name: stream.name, now: this.clock.now(), max });
        } catch (error) {
          // Deleted since the listing: nothing left to sweep.
          if (error instanceof HopperError && error.code === "stream_not_found") break;
          throw error;
        }
        expired += swept.expired;
        if (swept.expired < max) break;
      }
      await this.store
        .streamGroupExpire({ name: stream.name, now: this.clock.now() })
        .catch((error: unknown) => {
          if (!(error instanceof HopperError && error.code === "stream_not_found")) throw error;
        });
    }
    return { expired };
  }
}
