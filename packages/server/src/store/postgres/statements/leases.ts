/**
 * The statements that lease messages: the in-flight count under the ceiling, the candidates of a
 * transactional lease, and the one-statement leases of a standard and of a FIFO queue.
 */
import { inFlightWhereCeilingBinds } from "./fragments.js";

/** $1 queueId, $2 now, $3 max, $4 inFlightMax. Returns: { n } messages in flight, or 0 where the
 * ceiling cannot bind (inFlightWhereCeilingBinds). */
export const messageCountInFlight = `
  SELECT (${inFlightWhereCeilingBinds("$1", "$2", "$3", "$4")})::int AS n`;

/**
 * $1 queueId, $2 now, $3 expiredBefore, $4 limit. Returns: a standard queue's next available rows,
 * those above priority 0 first (highest first), each part in visibility order, locked; rows another
 * transaction holds are skipped, so concurrent leases take different messages. `published_at + 0`
 * keeps the planner off the publish index: the good plans walk messages_by_priority and
 * messages_by_visibility in order and stop after `limit` rows, whatever the queue's depth.
 */
export const messageSelectAvailableForLease = `
  WITH prioritized AS (
    SELECT * FROM messages
    WHERE queue_id = $1 AND priority > 0 AND visible_at <= $2 AND published_at + 0 > $3
    ORDER BY priority DESC, visible_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
  ),
  unprioritized AS (
    SELECT * FROM messages
    WHERE queue_id = $1 AND priority = 0 AND visible_at <= $2 AND published_at + 0 > $3
    ORDER BY visible_at
    LIMIT $4 - (SELECT count(*) FROM prioritized)
    FOR UPDATE SKIP LOCKED
  )
  SELECT * FROM prioritized UNION ALL SELECT * FROM unprioritized
  ORDER BY priority DESC, visible_at, seq`;

/** $1 queueId, $2 now, $3 expiredBefore, $4 limit. Returns: { group_key, delivery_count } of the FIFO
 * queue's next available heads, without locking: the groups a transactional lease locks before it
 * locks heads. */
export const messageSelectHeadGroups = `
  SELECT group_key, delivery_count FROM messages
  WHERE queue_id = $1 AND head AND visible_at <= $2 AND published_at + 0 > $3
  ORDER BY visible_at
  LIMIT $4`;

/** $1 queueId, $2 now, $3 expiredBefore, $4 limit, $5 groups. Returns: the available heads of those
 * FIFO groups in visibility order, locked, skipping rows another transaction holds. */
export const messageSelectHeadsForLease = `
  SELECT * FROM messages
  WHERE queue_id = $1 AND head AND visible_at <= $2 AND published_at + 0 > $3 AND group_key = ANY($5::text[])
  ORDER BY visible_at
  LIMIT $4
  FOR UPDATE SKIP LOCKED`;

/** $1 seqs, $2 tokens, $3 leaseExpiresAt, $4 now. Takes a lease on each row. Returns: seq,
 * delivery_count, first_delivered_at after the update. */
export const messageLeaseMany = `
  UPDATE messages m SET
    visible_at = $3,
    lease_token = t.token,
    delivery_count = m.delivery_count + 1,
    first_delivered_at = coalesce(m.first_delivered_at, $4)
  FROM unnest($1::bigint[], $2::bigint[]) AS t(seq, token)
  WHERE m.seq = t.seq
  RETURNING m.seq, m.delivery_count, m.first_delivered_at`;

/**
 * The lease statement around its candidates: count the queue's in-flight messages (for the ceiling),
 * lock the candidates (SKIP LOCKED), lease those with deliveries left, count them. Candidates that used
 * their last delivery are left alone and counted in `exhausted`; the caller then takes the
 * transactional path, which moves them to the dead-letter queue. `candidates` must select seq,
 * priority, visible_at and delivery_count, with the LIMIT `wanted`, and only when q.kind is its kind.
 * They name the queue as `queue_id = (SELECT queue_id FROM q …)`, a value, not as a join with q: with
 * a join the planner cannot tell that the index walk is already in visibility order, and reads and
 * sorts every available message of the queue before its LIMIT (73 ms for 30,000 messages, measured).
 */
const leaseAround = (candidates: string) => `
  WITH q AS (SELECT queue_id, kind FROM queues WHERE name = $1 FOR KEY SHARE),
  wanted AS (
    SELECT greatest(0, least($4, $5 - ${inFlightWhereCeilingBinds("(SELECT queue_id FROM q)", "$2", "$4", "$5")})) AS n
  ),
  ${candidates},
  numbered AS (
    SELECT seq, row_number() OVER (ORDER BY priority DESC, visible_at, seq) AS lease_index
    FROM candidates WHERE delivery_count < $6
  ),
  leased AS (
    UPDATE messages m SET
      visible_at = $7,
      lease_token = $8::bigint + n.lease_index,
      delivery_count = m.delivery_count + 1,
      first_delivered_at = coalesce(m.first_delivered_at, $2)
    FROM numbered n
    WHERE m.seq = n.seq
    RETURNING m.*, n.lease_index
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, delivered, redelivered)
    SELECT q.queue_id, $9, count(*), count(*) FILTER (WHERE l.delivery_count > 1) FROM q, leased l
    GROUP BY q.queue_id
    ON CONFLICT (queue_id, shard) DO UPDATE SET
      delivered = c.delivered + excluded.delivered,
      redelivered = c.redelivered + excluded.redelivered
  )
  SELECT q.kind, (SELECT count(*)::int FROM candidates WHERE delivery_count >= $6) AS exhausted, l.*
  FROM q LEFT JOIN leased l ON true`;

/**
 * The common lease of a standard queue as one statement (see leaseAround): candidates above priority
 * 0 first, highest first, then those of priority 0, each in visibility order.
 * $1 name, $2 now, $3 expiredBefore, $4 max, $5 inFlightMax, $6 maxDeliveries, $7 leaseExpiresAt,
 * $8 tokenBase (48 random bits: the n-th message leased gets tokenBase + n, so the tokens of one call
 * differ, and a later lease's differ from an earlier one's but by chance), $9 shard. Returns: no row
 * when there is no such queue; else the queue's kind (a FIFO queue is left alone) with one row per
 * leased message (or one row of NULLs), each with `exhausted` and `lease_index`.
 */
export const queueLeaseStatement = leaseAround(`
  prioritized AS (
    SELECT m.seq, m.priority, m.visible_at, m.delivery_count FROM messages m
    WHERE m.queue_id = (SELECT queue_id FROM q WHERE kind = 'standard') AND m.priority > 0
      AND m.visible_at <= $2
      AND m.published_at + 0 > $3
    ORDER BY m.priority DESC, m.visible_at
    LIMIT (SELECT n FROM wanted)
    FOR UPDATE OF m SKIP LOCKED
  ),
  unprioritized AS (
    SELECT m.seq, m.priority, m.visible_at, m.delivery_count FROM messages m
    WHERE m.queue_id = (SELECT queue_id FROM q WHERE kind = 'standard') AND m.priority = 0
      AND m.visible_at <= $2
      AND m.published_at + 0 > $3
    ORDER BY m.visible_at
    LIMIT (SELECT n FROM wanted) - (SELECT count(*) FROM prioritized)
    FOR UPDATE OF m SKIP LOCKED
  ),
  candidates AS (SELECT * FROM prioritized UNION ALL SELECT * FROM unprioritized)`);

/**
 * The common lease of a FIFO queue as one statement (see leaseAround): its available group heads in
 * visibility order, so a group never has two messages in flight. It needs no group lock: leasing
 * changes no head, and a head being removed is locked by its remover, so SKIP LOCKED passes it by.
 * Parameters and result as queueLeaseStatement; a standard queue is left alone.
 */
export const queueLeaseFifoStatement = leaseAround(`
  candidates AS (
    SELECT m.seq, m.priority, m.visible_at, m.delivery_count FROM messages m
    WHERE m.queue_id = (SELECT queue_id FROM q WHERE kind = 'fifo') AND m.head AND m.visible_at <= $2
      AND m.published_at + 0 > $3
    ORDER BY m.visible_at
    LIMIT (SELECT n FROM wanted)
    FOR UPDATE OF m SKIP LOCKED
  )`);
