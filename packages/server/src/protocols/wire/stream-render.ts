/**
 * How stream answers look on the wire (API.md "Streams"): records with a JSON body carry it as the
 * JSON value it was appended as, any other content type as base64; times are ISO-8601.
 */
import { HopperError } from "../../errors.js";
import { jsonContentType } from "../../model/message-body.js";
import type { StoredStreamRecord, StreamRecord } from "../../model/stream.js";

/**
 * One record as JSON text: `{ partition, offset, timestamp, key, headers, contentType, body |
 * bodyBase64 }`. A JSON body goes in as the text it was stored as (checked to be JSON when appended).
 */
export function streamRecordJson(record: StoredStreamRecord): string {
  const text = typeof record.body === "string" ? record.body : undefined;
  const body =
    record.contentType === jsonContentType
      ? `"body":${text ?? (record.body as Buffer).toString("utf8")}`
      : `"bodyBase64":"${(text === undefined ? (record.body as Buffer) : Buffer.from(text, "utf8")).toString("base64")}"`;
  return (
    `{"partition":${record.partition},"offset":${record.offset},"timestamp":"${new Date(record.timestamp).toISOString()}",` +
    `"key":${JSON.stringify(record.key)},"headers":${JSON.stringify(record.headers)},` +
    `"contentType":${JSON.stringify(record.contentType)},${body}}`
  );
}

/** The answer of a read: `{ records, oldest, next }`, as JSON text. */
export function streamRecordsJson(read: {
  records: readonly StoredStreamRecord[];
  oldest: number;
  next: number;
}): string {
  const next = read.records.length > 0 ? (read.records.at(-1) as StoredStreamRecord).offset + 1 : read.next;
  return `{"records":[${read.records.map(streamRecordJson).join(",")}],"oldest":${read.oldest},"next":${next}}`;
}

export function renderStream(stream: StreamRecord): Record<string, unknown> {
  return {
    name: stream.name,
    attributes: stream.attributes,
    stats: { partitions: stream.partitions, ...stream.counters },
    createdAt: new Date(stream.createdAt).toISOString(),
  };
}

/** A time on the wire (`fromTime`, a reset's `time`) as milliseconds: ISO-8601, or milliseconds. */
export function timeOf(text: string): number {
  const time = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isSafeInteger(time))
    throw new HopperError("invalid_request", "A time is ISO-8601 or milliseconds.");
  return time;
}
