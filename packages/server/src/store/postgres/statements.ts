/**
 * Every SQL statement the PostgreSQL store runs, one named constant each, with what it does, its
 * parameters ($n, in order) and what it returns. Batches travel as arrays and are expanded with
 * unnest(), so one statement handles a whole batch in one round trip.
 */

const counterColumns = "published, delivered, redelivered, acked, nacked, expired, dead_lettered, purged";

/** A queue with its counters summed over their shards. */
const queueWithCounters = `
  SELECT q.queue_id, q.name, q.kind, q.attributes, q.created_at,
    coalesce(sum(c.published), 0)::float8 AS published,
    coalesce(sum(c.delivered), 0)::float8 AS delivered,
    coalesce(sum(c.redelivered), 0)::float8 AS redelivered,
    coalesce(sum(c.acked), 0)::float8 AS acked,
    coalesce(sum(c.nacked), 0)::float8 AS nacked,
    coalesce(sum(c.expired), 0)::float8 AS expired,
    coalesce(sum(c.dead_lettered), 0)::float8 AS dead_lettered,
    coalesce(sum(c.purged), 0)::float8 AS purged
  FROM queues q LEFT JOIN queue_counters c USING (queue_id)`;

/** $1 name. Returns: the queue with its counters, or no row. */
export const queueSelectByName = `${queueWithCounters} WHERE q.name = $1 GROUP BY q.queue_id`;

/** Returns: every queue with its counters, by name. */
export const queueSelectAll = `${queueWithCounters} GROUP BY q.queue_id ORDER BY q.name`;

/**
 * $1 name. Returns: { queue_id, attributes } and holds a key-share lock on the queue row until
 * commit, so that the queue cannot be deleted under a transaction that writes its messages.
 * Statements that an application runs in its own transaction (sendInTransaction) name their schema,
 * since the application's search_path is its own; they are functions of it.
 */
export const queueLockSharedIn = (schema: string) =>
  `SELECT queue_id, attributes FROM "${schema}".queues WHERE name = $1 FOR KEY SHARE`;

/** $1 name. Returns: { queue_id, kind } locked for update (upsert and delete). */
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

/** $1 queueId, $2 shard, $3..$10 the counter deltas in counterColumns order. */
export const queueAddCountersIn = (schema: string) => `
  INSERT INTO "${schema}".queue_counters AS queue_counters (queue_id, shard, ${counterColumns})
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
  ON CONFLICT (queue_id, shard) DO UPDATE SET
    published = queue_counters.published + excluded.published,
    delivered = queue_counters.delivered + excluded.delivered,
    redelivered = queue_counters.redelivered + excluded.redelivered,
    acked = queue_counters.acked + excluded.acked,
    nacked = queue_counters.nacked + excluded.nacked,
    expired = queue_counters.expired + excluded.expired,
    dead_lettered = queue_counters.dead_lettered + excluded.dead_lettered,
    purged = queue_counters.purged + excluded.purged`;

/** $1 queueId, $2 ids, $3 bodies, $4 contentTypes, $5 headers (JSON or NULL), $6 keys, $7 publishedAts,
 * $8 visibleAts, $9 deliveryCounts: one array element per message. */
export const messageInsertManyIn = (schema: string) => `
  INSERT INTO "${schema}".messages (queue_id, id, body, content_type, headers, key, published_at, visible_at, delivery_count)
  SELECT $1, * FROM unnest($2::text[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::bigint[],
    $8::bigint[], $9::int[])`;

/** $1 queueId, $2 now. Returns: { n } messages in flight. */
export const messageCountInFlight = `
  SELECT count(*)::int AS n FROM messages
  WHERE queue_id = $1 AND visible_at > $2 AND lease_token IS NOT NULL`;

/**
 * $1 queueId, $2 now, $3 expiredBefore, $4 limit. Returns: the next available rows in visibility order,
 * locked; rows another transaction holds are skipped, so concurrent leases take different messages.
 * `published_at + 0` keeps the planner off the publish index: the only good plan walks
 * messages_by_visibility in order and stops after `limit` rows, whatever the queue's depth.
 */
export const messageSelectAvailableForLease = `
  SELECT * FROM messages
  WHERE queue_id = $1 AND visible_at <= $2 AND published_at + 0 > $3
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

/** $1 queueId, $2 seqs, $3 tokens. Returns: the rows whose latest lease the (seq, token) pairs name,
 * locked for update. */
export const messageSelectByReceipts = `
  SELECT m.* FROM messages m JOIN unnest($2::bigint[], $3::bigint[]) AS r(seq, token)
    ON m.seq = r.seq AND m.lease_token = r.token
  WHERE m.queue_id = $1
  FOR UPDATE OF m`;

/** $1 seqs. */
export const messageDeleteMany = `DELETE FROM messages WHERE seq = ANY($1::bigint[])`;

/** $1 seqs, $2 visibleAts. Ends each lease: the row waits as delayed until its visibleAt. */
export const messageReleaseMany = `
  UPDATE messages m SET visible_at = t.visible_at, lease_token = NULL
  FROM unnest($1::bigint[], $2::bigint[]) AS t(seq, visible_at)
  WHERE m.seq = t.seq`;

/** $1 seqs, $2 leaseExpiresAt. Moves each lease's end. */
export const messageExtendMany = `UPDATE messages SET visible_at = $2 WHERE seq = ANY($1::bigint[])`;

/** $1 queueId. Returns: the number of rows deleted (rowCount). */
export const messageDeleteAllOfQueue = `DELETE FROM messages WHERE queue_id = $1`;

/** $1 queueId, $2 expiredBefore, $3 limit. Deletes up to `limit` messages past retention. */
export const messageDeleteExpired = `
  DELETE FROM messages WHERE seq IN (
    SELECT seq FROM messages WHERE queue_id = $1 AND published_at <= $2 LIMIT $3 FOR UPDATE SKIP LOCKED)`;

/** $1 queueId, $2 visibleFrom, $3 now, $4 maxDeliveries, $5 limit. Returns: rows whose lease ended in
 * [visibleFrom, now] and that have used every delivery, locked. */
export const messageSelectExhausted = `
  SELECT * FROM messages
  WHERE queue_id = $1 AND visible_at >= $2 AND visible_at <= $3
    AND lease_token IS NOT NULL AND delivery_count >= $4
  LIMIT $5
  FOR UPDATE SKIP LOCKED`;

/** $1 queueId, $2 now, $3 limit. Peek at available messages. */
export const messagePeekAvailable = `
  SELECT * FROM messages WHERE queue_id = $1 AND visible_at <= $2 ORDER BY visible_at LIMIT $3`;

/** $1 queueId, $2 now, $3 limit. Peek at delayed messages. */
export const messagePeekDelayed = `
  SELECT * FROM messages WHERE queue_id = $1 AND visible_at > $2 AND lease_token IS NULL
  ORDER BY visible_at LIMIT $3`;

/** $1 queueId, $2 now, $3 limit. Peek at in-flight messages. */
export const messagePeekInFlight = `
  SELECT * FROM messages WHERE queue_id = $1 AND visible_at > $2 AND lease_token IS NOT NULL
  ORDER BY visible_at LIMIT $3`;

/** $1 channel, $2 payload. Queued by PostgreSQL and delivered to listeners only if the transaction
 * commits. */
export const notify = `SELECT pg_notify($1, $2)`;

/**
 * $1 lock class, $2 schema. Returns: { locked } whether this session now holds the housekeeping lock
 * of the nodes that share `schema`. The two-key form keys the lock by schema, so deployments that
 * share a database but not a schema each have their own leader.
 */
export const leaderTryLock = `SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked`;

/** $1 lock class, $2 schema. Serializes migrations of one schema until the transaction ends. */
export const migrationLock = `SELECT pg_advisory_xact_lock($1, hashtext($2))`;

/** An exchange with its bindings as a JSON array, in a stable order. */
const exchangeWithBindings = `
  SELECT e.exchange_id, e.name, e.type, e.alternate, e.created_at,
    coalesce(
      (SELECT json_agg(json_build_object('kind', b.destination_kind, 'name', b.destination, 'pattern', b.pattern)
         ORDER BY b.destination_kind, b.destination, b.pattern)
       FROM bindings b WHERE b.exchange_id = e.exchange_id),
      '[]') AS bindings
  FROM exchanges e`;

/** $1 name. Returns: the exchange with its bindings, or no row. */
export const exchangeSelectByName = `${exchangeWithBindings} WHERE e.name = $1`;

/** Returns: every exchange with its bindings, by name. */
export const exchangeSelectAll = `${exchangeWithBindings} ORDER BY e.name`;

/** $1 name. Returns: { exchange_id, type } locked against deletion until commit. */
export const exchangeLockShared = `SELECT exchange_id, type FROM exchanges WHERE name = $1 FOR KEY SHARE`;

/** $1 name. Returns: { exchange_id, type } locked for update (upsert and delete). */
export const exchangeLockExclusive = `SELECT exchange_id, type FROM exchanges WHERE name = $1 FOR UPDATE`;

/** $1 name, $2 type, $3 alternate, $4 createdAt. Returns: { exchange_id }, or no row if the name was
 * taken by a concurrent create. */
export const exchangeInsert = `
  INSERT INTO exchanges (name, type, alternate, created_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO NOTHING RETURNING exchange_id`;

/** $1 exchangeId, $2 alternate. */
export const exchangeUpdateAlternate = `UPDATE exchanges SET alternate = $2 WHERE exchange_id = $1`;

/** $1 exchangeId. Deletes the exchange; its own bindings go by cascade. */
export const exchangeDelete = `DELETE FROM exchanges WHERE exchange_id = $1`;

/** $1 name. Returns: { name } of each queue whose dead-letter exchange is `name`. */
export const queueSelectDeadLetterExchangeSources = `
  SELECT name FROM queues WHERE attributes -> 'deadLetter' ->> 'exchange' = $1`;

/** $1 exchangeId, $2 destinationKind, $3 destination, $4 pattern. Returns: rowCount 1 if new. */
export const bindingInsert = `
  INSERT INTO bindings (exchange_id, destination_kind, destination, pattern) VALUES ($1, $2, $3, $4)
  ON CONFLICT DO NOTHING`;

/** $1 exchangeId, $2 destinationKind, $3 destination, $4 pattern. Returns: rowCount 1 if it existed. */
export const bindingDelete = `
  DELETE FROM bindings WHERE exchange_id = $1 AND destination_kind = $2 AND destination = $3 AND pattern = $4`;

/** $1 destinationKind, $2 destination. Deletes every binding to a queue or exchange being deleted. */
export const bindingDeleteByDestination = `DELETE FROM bindings WHERE destination_kind = $1 AND destination = $2`;

/**
 * One send as one statement, so one round trip and one implicit transaction: lock the queue row
 * against deletion, insert the messages, add to a counter shard. (The wake-up NOTIFY goes after the
 * commit, from the store: see PostgresStore.announceCommitted.)
 * $1 name, $2 ids, $3 bodies, $4 contentTypes, $5 headers, $6 keys, $7 publishedAts, $8 visibleAts,
 * $9 deliveryCounts, $10 shard. Returns: one row when the queue exists.
 */
export const queueSendStatement = `
  WITH q AS (SELECT queue_id FROM queues WHERE name = $1 FOR KEY SHARE),
  inserted AS (
    INSERT INTO messages (queue_id, id, body, content_type, headers, key, published_at, visible_at, delivery_count)
    SELECT q.queue_id, m.* FROM q, unnest($2::text[], $3::bytea[], $4::text[], $5::text[], $6::text[],
      $7::bigint[], $8::bigint[], $9::int[]) AS m
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, published)
    SELECT queue_id, $10, cardinality($2::text[]) FROM q
    ON CONFLICT (queue_id, shard) DO UPDATE SET published = c.published + excluded.published
  )
  SELECT queue_id FROM q`;

/**
 * One ack batch as one statement: delete each row whose latest lease the (seq, token) pair names and
 * count the deletions. $1 name, $2 seqs, $3 tokens, $4 shard. Returns: one row, with queue_id NULL
 * when there is no such queue, and the pairs deleted (as float8, which holds them exactly).
 */
export const queueAckStatement = `
  WITH q AS (SELECT queue_id FROM queues WHERE name = $1 FOR KEY SHARE),
  deleted AS (
    DELETE FROM messages m USING q, unnest($2::bigint[], $3::bigint[]) AS r(seq, token)
    WHERE m.queue_id = q.queue_id AND m.seq = r.seq AND m.lease_token = r.token
    RETURNING m.seq, m.lease_token
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, acked)
    SELECT q.queue_id, $4, count(*) FROM q, deleted GROUP BY q.queue_id
    ON CONFLICT (queue_id, shard) DO UPDATE SET acked = c.acked + excluded.acked
  )
  SELECT (SELECT queue_id FROM q) AS queue_id,
    coalesce((SELECT array_agg(seq::float8 ORDER BY seq) FROM deleted), '{}') AS seqs,
    coalesce((SELECT array_agg(lease_token::float8 ORDER BY seq) FROM deleted), '{}') AS tokens`;

/**
 * The common lease as one statement: count the queue's in-flight messages (for the ceiling), lock up
 * to `max` available rows in visibility order (SKIP LOCKED), lease those with deliveries left, count
 * them. Candidates that used their last delivery are left alone and counted in `exhausted`; the caller
 * then takes the transactional path, which moves them to the dead-letter queue.
 * $1 name, $2 now, $3 expiredBefore, $4 max, $5 inFlightMax, $6 maxDeliveries, $7 leaseExpiresAt,
 * $8 tokens (one per possible lease), $9 shard. Returns: no row when there is no such queue; else one
 * row per leased message (or one row of NULLs), each with `exhausted` and `lease_index`.
 */
export const queueLeaseStatement = `
  WITH q AS (SELECT queue_id FROM queues WHERE name = $1 FOR KEY SHARE),
  in_flight AS (
    SELECT count(*) AS n FROM messages m, q
    WHERE m.queue_id = q.queue_id AND m.visible_at > $2 AND m.lease_token IS NOT NULL
  ),
  candidates AS (
    SELECT m.seq, m.visible_at, m.delivery_count FROM messages m, q
    WHERE m.queue_id = q.queue_id AND m.visible_at <= $2 AND m.published_at + 0 > $3
    ORDER BY m.visible_at
    LIMIT greatest(0, least($4, $5 - (SELECT n FROM in_flight)))
    FOR UPDATE OF m SKIP LOCKED
  ),
  numbered AS (
    SELECT seq, row_number() OVER (ORDER BY visible_at, seq) AS lease_index
    FROM candidates WHERE delivery_count < $6
  ),
  leased AS (
    UPDATE messages m SET
      visible_at = $7,
      lease_token = ($8::bigint[])[n.lease_index],
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
  SELECT (SELECT count(*)::int FROM candidates WHERE delivery_count >= $6) AS exhausted, l.*
  FROM q LEFT JOIN leased l ON true`;

/** $1 name. Returns: { queue_id } without a lock, for reads. */
export const queueSelectId = `SELECT queue_id FROM queues WHERE name = $1`;

/** $1 name, $2 now. Returns: no row when there is no such queue; else { available, delayed, in_flight,
 * oldest } in one pass over the queue's messages. A read: it takes no lock, so it writes nothing. */
export const queueDepthByName = `
  SELECT
    count(m.seq) FILTER (WHERE m.visible_at <= $2)::int AS available,
    count(m.seq) FILTER (WHERE m.visible_at > $2 AND m.lease_token IS NULL)::int AS delayed,
    count(m.seq) FILTER (WHERE m.visible_at > $2 AND m.lease_token IS NOT NULL)::int AS in_flight,
    min(m.published_at)::float8 AS oldest
  FROM queues q LEFT JOIN messages m ON m.queue_id = q.queue_id
  WHERE q.name = $1
  GROUP BY q.queue_id`;

/** $1 name, $2 now. Returns: no row when there is no such queue; else { next, oldest } (the earliest
 * visible_at after now and the earliest publish time, each NULL when there is none). A read. */
export const queueNextEventsByName = `
  SELECT
    (SELECT min(visible_at) FROM messages m WHERE m.queue_id = q.queue_id AND m.visible_at > $2)::float8 AS next,
    (SELECT min(published_at) FROM messages m WHERE m.queue_id = q.queue_id)::float8 AS oldest
  FROM queues q WHERE q.name = $1`;
