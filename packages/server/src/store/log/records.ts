/**
 * The log store's records. One log record holds all the changes of one store call, so that a call
 * is in the log whole or not at all (a torn tail is cut at a record's edge, append-log.ts), and
 * replaying the records in order rebuilds the state. Each change is `type (u8), length (u32), fields`;
 * numbers are little-endian float64 (every time, seq, count and token is an integer below 2^53) with
 * NaN for null; strings are `length (u32; 0xFFFFFFFF for null), UTF-8`.
 *
 * The three changes a message's life writes at rate have binary fields:
 * - insert: seq, publishedAt, visibleAt, deliveryCount, firstDeliveredAt, leaseToken, priority;
 *   queue, id, contentType, key, dedupId, headers (JSON, null when empty); the body to the end.
 * - lease:  seq, visibleAt, leaseToken, deliveryCount, firstDeliveredAt.
 * - delete: seq.
 * The others (queues, counters, dedupIds, exchanges, bindings) are rare or one per call: JSON.
 */
import type { BindingDestination, ExchangeType } from "../../model/exchange.js";
import type { NewMessage } from "../../model/message.js";
import type { QueueAttributes, QueueCounters, QueueKind } from "../../model/queue.js";
import type { NewStreamRecord } from "../../model/stream.js";
import type { InboxChange } from "./inbox-state.js";
import type { StreamChange } from "./stream-state.js";

export const changeType = {
  queueCreate: 1,
  queueAttributes: 2,
  queueDrop: 3,
  counters: 4,
  dedupSet: 5,
  dedupForget: 6,
  insert: 7,
  lease: 8,
  delete: 9,
  exchangeCreate: 10,
  exchangeAlternate: 11,
  exchangeDrop: 12,
  bindingPut: 13,
  bindingDelete: 14,
  seqFloor: 15,
  /** Every change of the inboxes (inbox-state.ts InboxChange) but a body, JSON. */
  inbox: 16,
  /** An inbox append's body, binary: read back from the segment file where it lies (inbox-state.ts). */
  inboxBody: 17,
  /** Every change of the streams (stream-state.ts StreamChange) but their records, JSON. */
  stream: 18,
  /** Records appended to one stream partition by one call, binary: read back from the segment file
   * where they lie (stream-state.ts). */
  streamRecords: 19,
} as const;

/**
 * The records of one partition appended by one call, as their change carries them:
 *   stream (string), partition, first offset, timestamp, count (f64 each), then per record:
 *   text (f64: 1 when the body was JSON text), key, contentType, headers (JSON, null when empty)
 *   (strings), body length (u32), body bytes.
 */
export interface StreamRecordsHead {
  stream: string;
  partition: number;
  first: number;
  timestamp: number;
}

/** One record of a streamRecords change, as read back. */
export type StreamRecordRead = Omit<NewStreamRecord, "partition" | "dedupId">;

/** A message's fields as its insert carries them, all but the body: a new message's, placed and leased. */
export interface InsertHead extends Omit<NewMessage, "body"> {
  queue: string;
  seq: number;
  deliveryCount: number;
  firstDeliveredAt: number | null;
  leaseToken: number | null;
}

export interface LeaseFields {
  seq: number;
  visibleAt: number;
  leaseToken: number | null;
  deliveryCount: number;
  firstDeliveredAt: number | null;
}

type T = typeof changeType;

/** The changes whose fields are JSON. */
export type JsonChange =
  | { type: T["queueCreate"]; name: string; kind: QueueKind; attributes: QueueAttributes; createdAt: number }
  | { type: T["queueAttributes"]; name: string; attributes: QueueAttributes }
  | { type: T["queueDrop"]; name: string }
  | { type: T["counters"]; queue: string; deltas: Partial<QueueCounters> }
  | { type: T["dedupSet"]; queue: string; dedupId: string; messageId: string; expiresAt: number }
  | { type: T["dedupForget"]; queue: string; dedupId: string }
  | {
      type: T["exchangeCreate"];
      name: string;
      exchangeType: ExchangeType;
      alternate: string | null;
      createdAt: number;
    }
  | { type: T["exchangeAlternate"]; name: string; alternate: string | null }
  | { type: T["exchangeDrop"]; name: string }
  | { type: T["bindingPut"]; exchange: string; destination: BindingDestination; pattern: string }
  | { type: T["bindingDelete"]; exchange: string; destination: BindingDestination; pattern: string }
  | { type: T["inbox"]; change: InboxChange }
  | { type: T["stream"]; change: StreamChange };

/** An inbox append's message as its body change carries it. */
export interface InboxBodyHead {
  inbox: string;
  bodyId: number;
  id: string;
  contentType: string;
  headers: Record<string, string>;
  /** The body was given as text (a JSON body): it reads back as text. */
  text: boolean;
}

export type Change =
  | JsonChange
  | { type: T["inboxBody"]; head: InboxBodyHead; body: Buffer; bodyOffset: number }
  | { type: T["streamRecords"]; head: StreamRecordsHead; sizes: Uint32Array; changeAt: number }
  | { type: T["insert"]; head: InsertHead; body: Buffer }
  | ({ type: T["lease"] } & LeaseFields)
  | { type: T["delete"]; seq: number }
  | { type: T["seqFloor"]; seq: number };

const nullLength = 0xffffffff;
/** The most bytes a string of this many UTF-16 units can take as UTF-8. */
const utf8BytesPerUnitMax = 3;

function orNaN(value: number | null): number {
  return value === null ? Number.NaN : value;
}

function orNull(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}

/**
 * Writes the changes of one call into one reusable buffer, growing it as needed; `take` answers
 * them as one record (a view, valid until the next change is written) and starts the next.
 */
/** A request to learn where the bytes at `offset` of a record land in the log. */
export interface Located {
  offset: number;
  located: (seq: number, offset: number) => void;
}

export class RecordWriter {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private length = 0;
  private changeStart = -1;
  /** Who wants to know where bytes of the record so far land in the log (locate). */
  private locates: Located[] = [];

  /** The record so far, as a view into the writer's buffer; the writer starts a new one. */
  take(): Buffer {
    const record = this.buffer.subarray(0, this.length);
    this.length = 0;
    return record;
  }

  /** The locate requests of the record just taken, in the order made. */
  takeLocates(): Located[] {
    const locates = this.locates;
    this.locates = [];
    return locates;
  }

  /** Forgets the changes written since the last `take` (a call that threw). */
  discard(): void {
    this.length = 0;
    this.locates = [];
  }

  /**
   * Writes an inbox body's change, and asks to be told where its body bytes land in the log:
   * `located(seq, offset)` once the record is written (never, for a store without a log).
   */
  inboxBody(
    head: InboxBodyHead,
    body: Buffer | string,
    located: (seq: number, offset: number) => void,
  ): void {
    this.begin(changeType.inboxBody);
    this.f64(head.bodyId);
    this.f64(head.text ? 1 : 0);
    this.string(head.inbox);
    this.string(head.id);
    this.string(head.contentType);
    this.string(hasKeys(head.headers) ? JSON.stringify(head.headers) : null);
    this.locates.push({ offset: this.length, located });
    if (typeof body === "string") {
      this.reserve(body.length * utf8BytesPerUnitMax);
      this.length += this.buffer.write(body, this.length, "utf8");
    } else {
      this.reserve(body.length);
      this.length += body.copy(this.buffer, this.length);
    }
    this.end();
  }

  /**
   * Writes one partition's appended records as one change, and asks to be told where the change
   * starts in the log (`located(seq, offset)`, once the record is written; never without a log).
   * Answers where the change starts in this record.
   */
  streamRecords(
    head: StreamRecordsHead,
    records: readonly StreamRecordRead[],
    located: (seq: number, offset: number) => void,
  ): number {
    const changeAt = this.length;
    this.locates.push({ offset: changeAt, located });
    this.begin(changeType.streamRecords);
    this.string(head.stream);
    this.f64(head.partition);
    this.f64(head.first);
    this.f64(head.timestamp);
    this.f64(records.length);
    for (const record of records) {
      this.f64(typeof record.body === "string" ? 1 : 0);
      this.string(record.key);
      this.string(record.contentType);
      this.string(hasKeys(record.headers) ? JSON.stringify(record.headers) : null);
      const lengthAt = this.length;
      this.reserve(4);
      this.length += 4;
      if (typeof record.body === "string") {
        this.reserve(record.body.length * utf8BytesPerUnitMax);
        this.length += this.buffer.write(record.body, this.length, "utf8");
      } else {
        this.reserve(record.body.length);
        this.length += record.body.copy(this.buffer, this.length);
      }
      this.buffer.writeUInt32LE(this.length - lengthAt - 4, lengthAt);
    }
    this.end();
    return changeAt;
  }

  get empty(): boolean {
    return this.length === 0;
  }

  get bytes(): number {
    return this.length;
  }

  insert(head: InsertHead, body: Buffer | string): void {
    this.begin(changeType.insert);
    this.f64(head.seq);
    this.f64(head.publishedAt);
    this.f64(head.visibleAt);
    this.f64(head.deliveryCount);
    this.f64(orNaN(head.firstDeliveredAt));
    this.f64(orNaN(head.leaseToken));
    this.f64(head.priority);
    this.string(head.queue);
    this.string(head.id);
    this.string(head.contentType);
    this.string(head.key);
    this.string(head.dedupId);
    this.string(hasKeys(head.headers) ? JSON.stringify(head.headers) : null);
    if (typeof body === "string") {
      this.reserve(body.length * utf8BytesPerUnitMax);
      this.length += this.buffer.write(body, this.length, "utf8");
    } else {
      this.reserve(body.length);
      this.length += body.copy(this.buffer, this.length);
    }
    this.end();
  }

  lease(lease: LeaseFields): void {
    this.begin(changeType.lease);
    this.f64(lease.seq);
    this.f64(lease.visibleAt);
    this.f64(orNaN(lease.leaseToken));
    this.f64(lease.deliveryCount);
    this.f64(orNaN(lease.firstDeliveredAt));
    this.end();
  }

  delete(seq: number): void {
    this.begin(changeType.delete);
    this.f64(seq);
    this.end();
  }

  seqFloor(seq: number): void {
    this.begin(changeType.seqFloor);
    this.f64(seq);
    this.end();
  }

  json(change: JsonChange): void {
    const { type, ...fields } = change;
    const json = JSON.stringify(fields);
    this.begin(type);
    this.reserve(json.length * utf8BytesPerUnitMax);
    this.length += this.buffer.write(json, this.length, "utf8");
    this.end();
  }

  private begin(type: number): void {
    this.reserve(5 + 7 * 8);
    this.buffer[this.length] = type;
    this.changeStart = this.length;
    this.length += 5;
  }

  private end(): void {
    this.buffer.writeUInt32LE(this.length - this.changeStart - 5, this.changeStart + 1);
  }

  private f64(value: number): void {
    this.reserve(8);
    this.buffer.writeDoubleLE(value, this.length);
    this.length += 8;
  }

  private string(value: string | null): void {
    if (value === null) {
      this.reserve(4);
      this.buffer.writeUInt32LE(nullLength, this.length);
      this.length += 4;
      return;
    }
    this.reserve(4 + value.length * utf8BytesPerUnitMax);
    const written = this.buffer.write(value, this.length + 4, "utf8");
    this.buffer.writeUInt32LE(written, this.length);
    this.length += 4 + written;
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}

function hasKeys(object: object): boolean {
  for (const _ in object) return true;
  return false;
}

/** Reads the changes of one record, in order; throws on what it cannot read (the CRC passed: a bug). */
export function* readChanges(record: Buffer): Generator<Change> {
  let at = 0;
  while (at < record.length) {
    if (at + 5 > record.length) throw new Error(`a log record ends inside a change header at ${at}`);
    const type = record[at] as number;
    const length = record.readUInt32LE(at + 1);
    const end = at + 5 + length;
    if (end > record.length) throw new Error(`a change of type ${type} runs past its record`);
    yield readChange(type, record.subarray(at + 5, end), at + 5);
    at = end;
  }
}

/** `fieldsAt`: where the change's fields start in its record. */
function readChange(type: number, fields: Buffer, fieldsAt: number): Change {
  const reader = new FieldReader(fields);
  switch (type) {
    case changeType.inboxBody: {
      const bodyId = reader.f64();
      const text = reader.f64() === 1;
      const inbox = reader.string() as string;
      const id = reader.string() as string;
      const contentType = reader.string() as string;
      const headersJson = reader.string();
      const headers = headersJson === null ? {} : (JSON.parse(headersJson) as Record<string, string>);
      const bodyOffset = fieldsAt + reader.position;
      return {
        type,
        head: { inbox, bodyId, id, contentType, headers, text },
        body: reader.rest(),
        bodyOffset,
      };
    }
    case changeType.streamRecords: {
      const { head, records } = streamRecordsOf(reader, false);
      const sizes = Uint32Array.from(records, (record) => (record.body as Buffer).length);
      return { type, head, sizes, changeAt: fieldsAt - 5 };
    }
    case changeType.insert: {
      const seq = reader.f64();
      const publishedAt = reader.f64();
      const visibleAt = reader.f64();
      const deliveryCount = reader.f64();
      const firstDeliveredAt = orNull(reader.f64());
      const leaseToken = orNull(reader.f64());
      const priority = reader.f64();
      const queue = reader.string() as string;
      const id = reader.string() as string;
      const contentType = reader.string() as string;
      const key = reader.string();
      const dedupId = reader.string();
      const headersJson = reader.string();
      const headers = headersJson === null ? {} : (JSON.parse(headersJson) as Record<string, string>);
      const head: InsertHead = {
        queue,
        seq,
        id,
        contentType,
        headers,
        key,
        priority,
        dedupId,
        publishedAt,
        visibleAt,
        deliveryCount,
        firstDeliveredAt,
        leaseToken,
      };
      return { type, head, body: reader.rest() };
    }
    case changeType.lease:
      return {
        type,
        seq: reader.f64(),
        visibleAt: reader.f64(),
        leaseToken: orNull(reader.f64()),
        deliveryCount: reader.f64(),
        firstDeliveredAt: orNull(reader.f64()),
      };
    case changeType.delete:
    case changeType.seqFloor:
      return { type, seq: reader.f64() };
    default:
      if (
        type !== changeType.inbox &&
        type !== changeType.stream &&
        (type < changeType.queueCreate || type > changeType.bindingDelete)
      ) {
        throw new Error(`a log change of unknown type ${type}`);
      }
      return { type, ...JSON.parse(fields.toString("utf8")) } as Change;
  }
}

/**
 * The fields of a streamRecords change. `decoded`: a JSON body as text and any other as a copy of its
 * bytes (a read); otherwise every body is a view into the reader's bytes (a replay, which keeps only
 * their sizes).
 */
function streamRecordsOf(
  reader: FieldReader,
  decoded: boolean,
): { head: StreamRecordsHead; records: StreamRecordRead[] } {
  const stream = reader.string() as string;
  const partition = reader.f64();
  const first = reader.f64();
  const timestamp = reader.f64();
  const count = reader.f64();
  const records: StreamRecordRead[] = [];
  for (let i = 0; i < count; i++) {
    const text = reader.f64() === 1;
    const key = reader.string();
    const contentType = reader.string() as string;
    const headersJson = reader.string();
    const headers = headersJson === null ? {} : (JSON.parse(headersJson) as Record<string, string>);
    const bytes = reader.take(reader.u32());
    const body = !decoded ? bytes : text ? bytes.toString("utf8") : Buffer.from(bytes);
    records.push({ key, contentType, headers, body });
  }
  return { head: { stream, partition, first, timestamp }, records };
}

/** The records of the streamRecords change at `changeAt` of a log record (read back from a segment
 * file, its frame checked). */
export function readStreamRecords(
  record: Buffer,
  changeAt: number,
): { head: StreamRecordsHead; records: StreamRecordRead[] } {
  if (record[changeAt] !== changeType.streamRecords)
    throw new Error(`no stream records change at ${changeAt} of its log record`);
  const length = record.readUInt32LE(changeAt + 1);
  return streamRecordsOf(new FieldReader(record.subarray(changeAt + 5, changeAt + 5 + length)), true);
}

class FieldReader {
  private at = 0;

  constructor(private readonly bytes: Buffer) {}

  get position(): number {
    return this.at;
  }

  f64(): number {
    const value = this.bytes.readDoubleLE(this.at);
    this.at += 8;
    return value;
  }

  string(): string | null {
    const length = this.bytes.readUInt32LE(this.at);
    this.at += 4;
    if (length === nullLength) return null;
    const value = this.bytes.toString("utf8", this.at, this.at + length);
    this.at += length;
    return value;
  }

  rest(): Buffer {
    return this.bytes.subarray(this.at);
  }

  u32(): number {
    const value = this.bytes.readUInt32LE(this.at);
    this.at += 4;
    return value;
  }

  take(length: number): Buffer {
    const value = this.bytes.subarray(this.at, this.at + length);
    this.at += length;
    return value;
  }
}
