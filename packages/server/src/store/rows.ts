/**
 * The row shapes both stores share (the same column names in SQLite and PostgreSQL) and their mapping
 * to the Store's records. Only how `attributes` is stored differs: JSON text in SQLite, jsonb in
 * PostgreSQL, so the queue row is generic in it.
 */

import type { InboxCounters } from "../model/inbox.js";
import type { StoredMessage } from "../model/message.js";
import {
  depthOf,
  type QueueAttributes,
  type QueueCounters,
  type QueueDepth,
  type QueueKind,
  type QueueRecord,
} from "../model/queue.js";

/** Attributes added after a queue may have been stored: their values for a queue stored before. */
const laterAttributes = {
  maxDepth: null,
  overflow: "reject",
  dedupWindowMs: 0,
  contentBasedDedup: false,
  pushbackDepth: null,
  pushbackAgeMs: null,
} as const satisfies Partial<QueueAttributes>;

/** A queue's counters as columns (summed over the shards on PostgreSQL). */
export interface CounterColumns {
  published: number;
  delivered: number;
  redelivered: number;
  acked: number;
  nacked: number;
  expired: number;
  dead_lettered: number;
  purged: number;
  dropped: number;
  redriven: number;
}

export interface QueueRow<Attributes = QueueAttributes> extends CounterColumns {
  queue_id: number;
  name: string;
  kind: QueueKind;
  attributes: Attributes;
  created_at: number;
}

export interface MessageRow {
  seq: number;
  queue_id: number;
  id: string;
  /** The bytes, or a JSON body's text (the SQLite store reads JSON bodies as text). */
  body: Buffer | string;
  content_type: string;
  headers: string | null;
  key: string | null;
  published_at: number;
  visible_at: number;
  delivery_count: number;
  first_delivered_at: number | null;
  lease_token: number | null;
  priority: number;
  dedup_id: string | null;
  /** FIFO queues only: the group (the key, or "" without one); NULL in a standard queue. */
  group_key: string | null;
  /** FIFO queues only: 1 on the oldest message of its group, the only one that can be leased. */
  head: number | boolean;
}

/** The entries of `defaults` whose keys `attributes` lacks. */
function missingFrom(attributes: object, defaults: object): object {
  return Object.fromEntries(Object.entries(defaults).filter(([name]) => !(name in attributes)));
}

export function toQueueCounters(row: CounterColumns): QueueCounters {
  return {
    published: row.published,
    delivered: row.delivered,
    redelivered: row.redelivered,
    acked: row.acked,
    nacked: row.nacked,
    expired: row.expired,
    deadLettered: row.dead_lettered,
    purged: row.purged,
    dropped: row.dropped,
    redriven: row.redriven,
  };
}

export function toQueueRecord(row: QueueRow): QueueRecord {
  return {
    name: row.name,
    kind: row.kind,
    attributes: { ...row.attributes, ...missingFrom(row.attributes, laterAttributes) },
    createdAt: row.created_at,
    counters: toQueueCounters(row),
  };
}

export function toStoredMessage(row: MessageRow): StoredMessage {
  return {
    id: row.id,
    body: row.body,
    contentType: row.content_type,
    headers: row.headers ? (JSON.parse(row.headers) as Record<string, string>) : {},
    key: row.key,
    priority: row.priority,
    dedupId: row.dedup_id,
    publishedAt: row.published_at,
    visibleAt: row.visible_at,
    deliveryCount: row.delivery_count,
    firstDeliveredAt: row.first_delivered_at,
  };
}

/** The columns each store's listing with depths adds to a queue row (queueSelectAllWithDepth). */
export interface DepthColumns {
  depth_delayed: number;
  depth_in_flight: number;
  /** SQLite only: the messages marked corrupt (QueueDepth.corrupt); PostgreSQL keeps none. */
  depth_corrupt?: number;
  depth_oldest: number | null;
}

/**
 * A queue's depth by state: its counters' depth is exact (invariants rule 21), so what is neither
 * delayed, in flight nor corrupt now is available, and a backlog costs no scan (rule 60). A corrupt
 * message is always visible and unleased (SQLite marks it so), so it is counted in no other state.
 */
export function depthByState(
  counters: QueueCounters,
  notAvailable: { delayed: number; inFlight: number; corrupt?: number },
  oldestPublishedAt: number | null,
): QueueDepth {
  const { delayed, inFlight, corrupt = 0 } = notAvailable;
  return {
    available: depthOf(counters) - delayed - inFlight - corrupt,
    delayed,
    inFlight,
    corrupt,
    oldestPublishedAt,
  };
}

/** One entry of a listing with depths, from its row and the store's own mapping of the queue row. */
export function withDepth<Row>(
  row: Row & DepthColumns,
  toRecord: (row: Row) => QueueRecord,
): { queue: QueueRecord; depth: QueueDepth } {
  const {
    depth_delayed: delayed,
    depth_in_flight: inFlight,
    depth_corrupt: corrupt,
    depth_oldest: oldest,
    ...queueRow
  } = row;
  const queue = toRecord(queueRow as Row);
  return { queue, depth: depthByState(queue.counters, { delayed, inFlight, corrupt }, oldest) };
}

/** A namespace's inbox counters as columns (summed over the shards on PostgreSQL). */
export interface InboxCounterColumns {
  appended: number;
  duplicates: number;
  skipped: number;
  acked: number;
  expired: number;
  overflowed: number;
  devices_forgotten: number;
}

export function toInboxCounters(row: InboxCounterColumns): InboxCounters {
  return {
    appended: row.appended,
    duplicates: row.duplicates,
    skipped: row.skipped,
    acked: row.acked,
    expired: row.expired,
    overflowed: row.overflowed,
    devicesForgotten: row.devices_forgotten,
  };
}
