/**
 * SQL fragments that statements of several entities share: a queue's counters and depth, a batch's
 * bodies cut from one bytea, the in-flight count under the ceiling. Not statements themselves.
 */
export const counterColumns =
  "published, delivered, redelivered, acked, nacked, expired, dead_lettered, purged, dropped, redriven";

/** A queue's counters summed over their shards (`c`), as float8, which holds them exactly. */
export const counterSums = `
    coalesce(sum(c.published), 0)::float8 AS published,
    coalesce(sum(c.delivered), 0)::float8 AS delivered,
    coalesce(sum(c.redelivered), 0)::float8 AS redelivered,
    coalesce(sum(c.acked), 0)::float8 AS acked,
    coalesce(sum(c.nacked), 0)::float8 AS nacked,
    coalesce(sum(c.expired), 0)::float8 AS expired,
    coalesce(sum(c.dead_lettered), 0)::float8 AS dead_lettered,
    coalesce(sum(c.purged), 0)::float8 AS purged,
    coalesce(sum(c.dropped), 0)::float8 AS dropped,
    coalesce(sum(c.redriven), 0)::float8 AS redriven`;

/** A queue's depth (store.ts depthOf) summed over its counter rows (`c`), as numeric. */
export const depthSum = `
    coalesce(sum(c.published - c.acked - c.expired - c.dead_lettered - c.purged - c.dropped - c.redriven), 0)`;

/** A queue with its counters summed over their shards. */
export const queueWithCounters = `
  SELECT q.queue_id, q.name, q.kind, q.attributes, q.created_at, ${counterSums}
  FROM queues q LEFT JOIN queue_counters c USING (queue_id)`;

/**
 * The rows of `source` (an unnest … WITH ORDINALITY AS u(…, body_length, …, ord)) with body_start, where
 * each message's body begins in the batch's bodies parameter: the lengths of the bodies before it.
 */
export const withBodyStarts = (source: string) => `(
    SELECT u.*, (sum(u.body_length) OVER (ORDER BY u.ord) - u.body_length)::int AS body_start FROM ${source})`;

/** A message's body, cut from the batch's bodies parameter (`bodies`, bytea) at its start and length. */
export const bodyOf = (bodies: string) =>
  `substring(${bodies}::bytea FROM m.body_start + 1 FOR m.body_length)`;

/**
 * The queue's messages in flight where the in-flight ceiling could bind, else 0: an SQL expression
 * over the queue id, the time, the messages about to be leased and the ceiling. Counting reads every
 * in-flight entry of the index (with 10,000 in flight a lease took 2.5 ms longer and a hand-off send
 * 10 ms: bench/src/store-scaling.ts), while the queue's depth is a sum over its 16 counter rows
 * (invariants rule 21), and what is in flight is part of the depth. So while depth + max is within
 * the ceiling, no count could lower what may be leased, and none is made (PostgreSQL runs the CASE's
 * subquery only when its branch is taken).
 */
export const inFlightWhereCeilingBinds = (queueId: string, now: string, max: string, ceiling: string) => `
  CASE WHEN (
    SELECT ${depthSum}::bigint FROM queue_counters c WHERE c.queue_id = ${queueId}
  ) + ${max} <= ${ceiling} THEN 0
  ELSE (
    SELECT count(*) FROM messages m
    WHERE m.queue_id = ${queueId} AND m.visible_at > ${now} AND m.lease_token IS NOT NULL
  ) END`;
