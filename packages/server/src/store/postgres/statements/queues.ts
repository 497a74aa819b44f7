/**
 * The statements on queue rows and their counters: select, lock, create, update, delete, depth and
 * the next events, with what each does, its parameters ($n, in order) and what it returns.
 */
import { counterColumns, counterSums, depthSum, queueWithCounters } from "./fragments.js";

/** $1 name. Returns: the queue with its counters, or no row. */
export const queueSelectByName = `${queueWithCounters} WHERE q.name = $1 GROUP BY q.queue_id`;

/** Returns: every queue with its counters, by name. */
export const queueSelectAll = `${queueWithCounters} GROUP BY q.queue_id ORDER BY q.name`;

/**
 * $1 now. Returns: every queue with its counters, by name, and its messages not visible at $1 by state
 * (depth_delayed, depth_in_flight: an index range of each queue, as queueDepthByName) and the publish
 * time of its oldest message (depth_oldest, NULL when it holds none). A read in one snapshot.
 */
export const queueSelectAllWithDepth = `
  SELECT q.queue_id, q.name, q.kind, q.attributes, q.created_at, c.*, n.*,
    (SELECT min(m.published_at) FROM messages m WHERE m.queue_id = q.queue_id)::float8 AS depth_oldest
  FROM queues q,
    LATERAL (SELECT ${counterSums} FROM queue_counters c WHERE c.queue_id = q.queue_id) c,
    LATERAL (
      SELECT count(*) FILTER (WHERE m.lease_token IS NULL)::int AS depth_delayed,
        count(*) FILTER (WHERE m.lease_token IS NOT NULL)::int AS depth_in_flight
      FROM messages m WHERE m.queue_id = q.queue_id AND m.visible_at > $1
    ) n
  WHERE q.name > $2
  ORDER BY q.name LIMIT $3`;

/**
 * $1 name. Returns: { queue_id, kind, attributes } and holds a key-share lock on the queue row until
 * commit, so that the queue cannot be deleted under a transaction that writes its messages.
 * Statements that an application runs in its own transaction (sendInTransaction) name their schema,
 * since the application's search_path is its own; they are functions of it.
 */
export const queueLockSharedIn = (schema: string) =>
  `SELECT queue_id, kind, attributes FROM "${schema}".queues WHERE name = $1 FOR KEY SHARE`;

/** $1 name. Returns: the queue with its counters (as queueSelectByName), holding a key-share lock on
 * its row until commit (as queueLockSharedIn). */
export const queueLockSharedWithCountersIn = (schema: string) => `
  WITH q AS (SELECT * FROM "${schema}".queues WHERE name = $1 FOR KEY SHARE)
  SELECT q.queue_id, q.name, q.kind, q.attributes, q.created_at, counters.*
  FROM q, LATERAL (SELECT ${counterSums} FROM "${schema}".queue_counters c WHERE c.queue_id = q.queue_id)
    AS counters`;

/**
 * $1 name. Returns: { queue_id, kind } with the queue row locked FOR NO KEY UPDATE until commit: the
 * lock of a send into a queue with a maxDepth. It serializes such sends, so each reads the depth the
 * previous one left, and conflicts with nothing else: leases, acks and sends without a maxDepth take
 * FOR KEY SHARE, which it does not block. The depth must be read by a later statement (queueCountersIn):
 * a statement's snapshot is taken before it waits for the lock.
 */
export const queueLockForDepthIn = (schema: string) =>
  `SELECT queue_id, kind FROM "${schema}".queues WHERE name = $1 FOR NO KEY UPDATE`;

/** $1 queueId. Returns: one row, the queue's counters summed over their shards. */
export const queueCountersIn = (schema: string) =>
  `SELECT ${counterSums} FROM "${schema}".queue_counters c WHERE c.queue_id = $1`;

/**
 * $1 name. Returns: { queue_id, kind } locked for update: upsert, delete and purge. It waits for every
 * transaction that holds any lock on the queue row and keeps new ones out until commit.
 */
export const queueLockExclusive = `SELECT queue_id, kind FROM queues WHERE name = $1 FOR UPDATE`;

/** Returns: { n } the number of queues. */
export const queueCount = `SELECT count(*)::int AS n FROM queues`;

/** $1 name, $2 kind, $3 attributes (JSON), $4 createdAt. Returns: { queue_id }, or no row if the name
 * was taken by a concurrent create. */
export const queueInsert = `
  INSERT INTO queues (name, kind, attributes, created_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO NOTHING RETURNING queue_id`;

/** $1 queueId, $2 attributes (JSON). */
export const queueUpdateAttributes = `UPDATE queues SET attributes = $2 WHERE queue_id = $1`;

/** $1 name. Returns: { name } of each other queue whose dead-letter target is `name`. */
export const queueSelectDeadLetterSources = `
  SELECT name FROM queues WHERE attributes -> 'deadLetter' ->> 'queue' = $1 AND name <> $1`;

/** $1 queueId. Deletes the queue; its counters go by cascade. */
export const queueDelete = `DELETE FROM queues WHERE queue_id = $1`;

/** $1 queueId, $2 shard, $3..$12 the counter deltas in counterColumns order. */
export const queueAddCountersIn = (schema: string) => `
  INSERT INTO "${schema}".queue_counters AS queue_counters (queue_id, shard, ${counterColumns})
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
  ON CONFLICT (queue_id, shard) DO UPDATE SET
    published = queue_counters.published + excluded.published,
    delivered = queue_counters.delivered + excluded.delivered,
    redelivered = queue_counters.redelivered + excluded.redelivered,
    acked = queue_counters.acked + excluded.acked,
    nacked = queue_counters.nacked + excluded.nacked,
    expired = queue_counters.expired + excluded.expired,
    dead_lettered = queue_counters.dead_lettered + excluded.dead_lettered,
    purged = queue_counters.purged + excluded.purged,
    dropped = queue_counters.dropped + excluded.dropped,
    redriven = queue_counters.redriven + excluded.redriven`;

/** $1 name. Returns: { name } of each queue whose dead-letter exchange is `name`. */
export const queueSelectDeadLetterExchangeSources = `
  SELECT name FROM queues WHERE attributes -> 'deadLetter' ->> 'exchange' = $1`;

/** $1 name. Returns: { queue_id } without a lock, for reads. */
export const queueSelectId = `SELECT queue_id FROM queues WHERE name = $1`;

/**
 * $1 name, $2 now. Returns: no row when there is no such queue; else { available, delayed, in_flight,
 * oldest }. It counts only the messages not visible now: the depth is exact in the counters
 * (invariants rule 21), so the available ones, usually the most, are the rest, and a backlog costs no
 * scan. A read in one snapshot: it takes no lock, so it writes nothing.
 */
export const queueDepthByName = `
  SELECT d.depth - n.delayed - n.in_flight AS available, n.delayed, n.in_flight,
    (SELECT min(m.published_at) FROM messages m WHERE m.queue_id = q.queue_id)::float8 AS oldest
  FROM queues q,
    LATERAL (SELECT ${depthSum}::float8 AS depth FROM queue_counters c WHERE c.queue_id = q.queue_id) d,
    LATERAL (
      SELECT count(*) FILTER (WHERE m.lease_token IS NULL)::int AS delayed,
        count(*) FILTER (WHERE m.lease_token IS NOT NULL)::int AS in_flight
      FROM messages m WHERE m.queue_id = q.queue_id AND m.visible_at > $2
    ) n
  WHERE q.name = $1`;

/** $1 name, $2 now. Returns: no row when there is no such queue; else { next, oldest } (the earliest
 * visible_at after now and the earliest publish time, each NULL when there is none). A read. */
export const queueNextEventsByName = `
  SELECT
    (SELECT min(visible_at) FROM messages m WHERE m.queue_id = q.queue_id AND m.visible_at > $2)::float8 AS next,
    (SELECT min(published_at) FROM messages m WHERE m.queue_id = q.queue_id)::float8 AS oldest
  FROM queues q WHERE q.name = $1`;
