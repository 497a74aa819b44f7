/**
 * The log store's records: one per change of state (the primitives of log-store.ts), so that
 * replaying them in order rebuilds the state. The three a message's life writes at rate — its insert,
 * each lease, its delete — have fixed binary layouts; the rest are JSON. Every record starts with its
 * type byte; numbers are little-endian float64 (every time, seq and token is an integer below 2^53),
 * and NaN stands for null.
 *
 * Layouts:
 * - insert: type, u32 length of the JSON head, the head (InsertHead), the body's bytes.
 * - lease:  type, seq, visibleAt, leaseToken, deliveryCount, firstDeliveredAt (41 bytes).
 * - delete: type, seq (9 bytes).
 * - others: type, JSON.
 */
import type {
  BindingDestination,
  ExchangeType,
  QueueAttributes,
  QueueCounters,
  QueueKind,
} from "../store.js";

export const recordType = {
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
} as const;

/** A message's fields as its insert record carries them, all but the body. */
export interface InsertHead {
  queue: string;
  seq: number;
  id: string;
  contentType: string;
  headers: Record<string, string>;
  key: string | null;
  priority: number;
  dedupId: string | null;
  publishedAt: number;
  visibleAt: number;
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

export type LogRecord =
  | {
      type: typeof recordType.queueCreate;
      name: string;
      kind: QueueKind;
      attributes: QueueAttributes;
      createdAt: number;
    }
  | { type: typeof recordType.queueAttributes; name: string; attributes: QueueAttributes }
  | { type: typeof recordType.queueDrop; name: string }
  | { type: typeof recordType.counters; queue: string; deltas: Partial<QueueCounters> }
  | { type: typeof recordType.dedupSet; queue: string; dedupId: string; messageId: string; expiresAt: number }
  | { type: typeof recordType.dedupForget; queue: string; dedupId: string }
  | { type: typeof recordType.insert; head: InsertHead; body: Buffer }
  | ({ type: typeof recordType.lease } & LeaseFields)
  | { type: typeof recordType.delete; seq: number }
  | {
      type: typeof recordType.exchangeCreate;
      name: string;
      exchangeType: ExchangeType;
      alternate: string | null;
      createdAt: number;
    }
  | { type: typeof recordType.exchangeAlternate; name: string; alternate: string | null }
  | { type: typeof recordType.exchangeDrop; name: string }
  | { type: typeof recordType.bindingPut; exchange: string; destination: BindingDestination; pattern: string }
  | {
      type: typeof recordType.bindingDelete;
      exchange: string;
      destination: BindingDestination;
      pattern: string;
    }
  | { type: typeof recordType.seqFloor; seq: number };

const leaseBytes = 1 + 8 * 5;
const deleteBytes = 1 + 8;

function orNaN(value: number | null): number {
  return value === null ? Number.NaN : value;
}

function orNull(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}

export function encodeInsert(head: InsertHead, body: Buffer | string): Buffer {
  const headJson = JSON.stringify(head);
  const headBytes = Buffer.byteLength(headJson);
  const bodyLength = typeof body === "string" ? Buffer.byteLength(body) : body.length;
  const record = Buffer.allocUnsafe(5 + headBytes + bodyLength);
  record[0] = recordType.insert;
  record.writeUInt32LE(headBytes, 1);
  record.write(headJson, 5, "utf8");
  if (typeof body === "string") record.write(body, 5 + headBytes, "utf8");
  else body.copy(record, 5 + headBytes);
  return record;
}

export function encodeLease(lease: LeaseFields): Buffer {
  const record = Buffer.allocUnsafe(leaseBytes);
  record[0] = recordType.lease;
  record.writeDoubleLE(lease.seq, 1);
  record.writeDoubleLE(lease.visibleAt, 9);
  record.writeDoubleLE(orNaN(lease.leaseToken), 17);
  record.writeDoubleLE(lease.deliveryCount, 25);
  record.writeDoubleLE(orNaN(lease.firstDeliveredAt), 33);
  return record;
}

export function encodeDelete(seq: number): Buffer {
  const record = Buffer.allocUnsafe(deleteBytes);
  record[0] = recordType.delete;
  record.writeDoubleLE(seq, 1);
  return record;
}

export function encodeSeqFloor(seq: number): Buffer {
  const record = Buffer.allocUnsafe(deleteBytes);
  record[0] = recordType.seqFloor;
  record.writeDoubleLE(seq, 1);
  return record;
}

type JsonRecord = Exclude<
  LogRecord,
  {
    type:
      | typeof recordType.insert
      | typeof recordType.lease
      | typeof recordType.delete
      | typeof recordType.seqFloor;
  }
>;

/** A record of the kinds that are JSON: its type byte, then the rest of its fields. */
export function encodeJson(record: JsonRecord): Buffer {
  const { type, ...fields } = record;
  const json = JSON.stringify(fields);
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(json));
  bytes[0] = type;
  bytes.write(json, 1, "utf8");
  return bytes;
}

/** Reads one record; throws on a type or length it does not know (the log's CRC passed, so a bug). */
export function decodeRecord(bytes: Buffer): LogRecord {
  const type = bytes[0];
  switch (type) {
    case recordType.insert: {
      const headBytes = bytes.readUInt32LE(1);
      const head = JSON.parse(bytes.toString("utf8", 5, 5 + headBytes)) as InsertHead;
      return { type, head, body: bytes.subarray(5 + headBytes) };
    }
    case recordType.lease:
      expectLength(bytes, leaseBytes);
      return {
        type,
        seq: bytes.readDoubleLE(1),
        visibleAt: bytes.readDoubleLE(9),
        leaseToken: orNull(bytes.readDoubleLE(17)),
        deliveryCount: bytes.readDoubleLE(25),
        firstDeliveredAt: orNull(bytes.readDoubleLE(33)),
      };
    case recordType.delete:
    case recordType.seqFloor:
      expectLength(bytes, deleteBytes);
      return { type, seq: bytes.readDoubleLE(1) };
    default: {
      if (type === undefined || type < recordType.queueCreate || type > recordType.seqFloor) {
        throw new Error(`log record of unknown type ${type}`);
      }
      return { type, ...JSON.parse(bytes.toString("utf8", 1)) } as LogRecord;
    }
  }
}

function expectLength(bytes: Buffer, length: number): void {
  if (bytes.length !== length)
    throw new Error(`log record of type ${bytes[0]} has ${bytes.length} bytes, not ${length}`);
}
