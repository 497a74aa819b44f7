/**
 * Every SQL statement the PostgreSQL store runs, one named constant each, with what it does, its
 * parameters ($n, in order) and what it returns. Batches travel as arrays and are expanded with
 * unnest(), so one statement handles a whole batch in one round trip; a batch's bodies travel as one
 * bytea with their lengths instead (bodyOf). A parameter documented as
 * "groups (NULL: any)" restricts a statement to FIFO groups whose advisory locks the transaction holds.
 */

const counterColumns =
  "published, delivered, redelivered, acked, nacked, expired, dead_lettered, purged, dropped, redriven";

/** A queue's counters summed over their shards (`c`), as float8, which holds them exactly. */
const counterSums = `
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
const depthSum = `
    coalesce(sum(c.published - c.acked - c.expired - c.dead_lettered - c.purged - c.dropped - c.redriven), 0)`;

/** A queue with its counters summed over their shards. */
const queueWithCounters = `
  SELECT q.queue_id, q.name, q.kind, q.attributes, q.created_at, ${counterSums}
  FROM queues q LEFT JOIN queue_counters c USING (queue_id)`;

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

/** The advisory lock class of FIFO groups; the second key is hashtext(queue_id || ':' || group_key). */
const groupLockClass = 0x686f7067; // "hopg"

/**
 * $1 queueIds, $2 groupKeys: pairs, one array element each. Takes the advisory lock of each FIFO group
 * named until the transaction ends, in the order of the lock keys, so two transactions that lock
 * several groups never wait for each other in a cycle. (PostgreSQL evaluates a volatile function in
 * the select list after ORDER BY, so the locks are taken in that order.) Two groups whose keys hash
 * alike share a lock: that only serializes them more than needed. A transaction takes these locks
 * before it reads a group to add to it or removes a head, and before it locks any message row of the
 * group; see message-writes.ts.
 */
export const groupLockMany = `
  SELECT pg_advisory_xact_lock(${groupLockClass}, k) FROM (
    SELECT DISTINCT hashtext(g.queue_id::text || ':' || g.group_key) AS k
    FROM unnest($1::bigint[], $2::text[]) AS g(queue_id, group_key)) AS keys
  ORDER BY k`;

/**
 * $1 queueId, $2 groupKeys. Makes each group's oldest message its head, where it is not already: run
 * after anything removes messages of the groups, under their locks. Returns: rowCount, the heads made.
 */
export const groupPromoteHeadsIn = (schema: string) => `
  UPDATE "${schema}".messages SET head = true
  WHERE seq IN (
    SELECT (SELECT m.seq FROM "${schema}".messages m WHERE m.queue_id = $1 AND m.group_key = g
            ORDER BY m.seq LIMIT 1)
    FROM unnest($2::text[]) AS g)
  AND NOT head`;

/**
 * $1 queueId, $2 dedupIds (distinct), $3 messageIds, $4 now, $5 expiresAt. Claims each dedupId for its
 * message, unless an entry whose window lasts (expires_at > now) holds it. A concurrent claim of the
 * same id waits here for the other transaction and then finds its entry, so the id is stored once. Ids
 * are claimed in sorted order, so two batches never wait for each other in a cycle. Every entry it
 * meets stays locked until commit, also those it does not claim. Returns: { dedup_id } of each claim.
 */
export const dedupClaimIn = (schema: string) => `
  INSERT INTO "${schema}".dedup AS d (queue_id, dedup_id, message_id, expires_at)
  SELECT $1, e.dedup_id, e.message_id, $5
  FROM unnest($2::text[], $3::text[]) AS e(dedup_id, message_id)
  ORDER BY e.dedup_id
  ON CONFLICT (queue_id, dedup_id) DO UPDATE SET message_id = excluded.message_id, expires_at = excluded.expires_at
  WHERE d.expires_at <= $4
  RETURNING d.dedup_id`;

/** $1 queueId, $2 dedupIds. Returns: { dedup_id, message_id } of each entry (the ones dedupClaimIn
 * found taken; it locked them, so they are still there). */
export const dedupSelectIn = (schema: string) => `
  SELECT dedup_id, message_id FROM "${schema}".dedup WHERE queue_id = $1 AND dedup_id = ANY($2::text[])`;

/** $1 queueId, $2 now, $3 limit. Forgets up to `limit` dedupIds whose window ended; entries that a send
 * holds right now are skipped (it may be claiming them anew). */
export const dedupDeleteExpired = `
  DELETE FROM dedup WHERE queue_id = $1 AND dedup_id IN (
    SELECT dedup_id FROM dedup WHERE queue_id = $1 AND expires_at <= $2 LIMIT $3 FOR UPDATE SKIP LOCKED)`;

/**
 * The rows of `source` (an unnest … WITH ORDINALITY AS u(…, body_length, …, ord)) with body_start, where
 * each message's body begins in the batch's bodies parameter: the lengths of the bodies before it.
 */
const withBodyStarts = (source: string) => `(
    SELECT u.*, (sum(u.body_length) OVER (ORDER BY u.ord) - u.body_length)::int AS body_start FROM ${source})`;

/** A message's body, cut from the batch's bodies parameter (`bodies`, bytea) at its start and length. */
const bodyOf = (bodies: string) => `substring(${bodies}::bytea FROM m.body_start + 1 FOR m.body_length)`;

/**
 * $1 queueId, $2 fifo, $3 ids, $4 bodies (one after the other, messageColumns), $5 contentTypes, $6 headers
 * (JSON or NULL), $7 keys, $8 priorities, $9 dedupIds, $10 publishedAts, $11 visibleAts, $12 body
 * lengths: one array element per message. Inserts
 * them in array order (seq follows it). In a FIFO queue ($2) each joins the group of its key ("" without
 * one), has priority 0, and is its group's head if it is the group's first in the batch and the group
 * holds no message yet; the caller holds the groups' locks, taken by an earlier statement, so that this
 * statement's snapshot sees every committed message of the groups.
 */
export const messageInsertManyIn = (schema: string) => `
  INSERT INTO "${schema}".messages (queue_id, id, body, content_type, headers, key, priority, dedup_id,
    group_key, head, published_at, visible_at)
  SELECT $1, m.id, ${bodyOf("$4")}, m.content_type, m.headers, m.key, CASE WHEN $2 THEN 0 ELSE m.priority END,
    m.dedup_id, CASE WHEN $2 THEN coalesce(m.key, '') END,
    $2 AND m.ord = min(m.ord) OVER (PARTITION BY coalesce(m.key, ''))
      AND NOT EXISTS (SELECT 1 FROM "${schema}".messages x
                      WHERE x.queue_id = $1 AND x.group_key = coalesce(m.key, '')),
    m.published_at, m.visible_at
  FROM ${withBodyStarts(`unnest($3::text[], $12::int[], $5::text[], $6::text[], $7::text[], $8::smallint[],
    $9::text[], $10::bigint[], $11::bigint[])
    WITH ORDINALITY AS u(id, body_length, content_type, headers, key, priority, dedup_id, published_at,
      visible_at, ord)`)} m
  ORDER BY m.ord`;

/**
 * A send's insert and its count in one statement (one round trip fewer per send in a transaction):
 * messageInsertManyIn's parameters, and $13 the counter shard that `published` is added to.
 */
export const messageInsertManyCountedIn = (schema: string) => `
  WITH inserted AS (${messageInsertManyIn(schema)} RETURNING 1)
  INSERT INTO "${schema}".queue_counters AS c (queue_id, shard, published)
  SELECT $1, $13, count(*) FROM inserted HAVING count(*) > 0
  ON CONFLICT (queue_id, shard) DO UPDATE SET published = c.published + excluded.published`;

/**
 * The queue's messages in flight where the in-flight ceiling could bind, else 0: an SQL expression
 * over the queue id, the time, the messages about to be leased and the ceiling. Counting reads every
 * in-flight entry of the index (with 10,000 in flight a lease took 2.5 ms longer and a hand-off send
 * 10 ms: bench/src/store-scaling.ts), while the queue's depth is a sum over its 16 counter rows
 * (invariants rule 21), and what is in flight is part of the depth. So while depth + max is within
 * the ceiling, no count could lower what may be leased, and none is made (PostgreSQL runs the CASE's
 * subquery only when its branch is taken).
 */
const inFlightWhereCeilingBinds = (queueId: string, now: string, max: string, ceiling: string) => `
  CASE WHEN (
    SELECT ${depthSum}::bigint FROM queue_counters c WHERE c.queue_id = ${queueId}
  ) + ${max} <= ${ceiling} THEN 0
  ELSE (
    SELECT count(*) FROM messages m
    WHERE m.queue_id = ${queueId} AND m.visible_at > ${now} AND m.lease_token IS NOT NULL
  ) END`;

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

/** $1 queueId, $2 seqs. Returns: { group_key } of those rows that are in FIFO groups, without
 * locking (a row never changes group): the groups to lock before the rows are. */
export const messageSelectGroupsOfSeqs = `
  SELECT DISTINCT group_key FROM messages
  WHERE queue_id = $1 AND seq = ANY($2::bigint[]) AND group_key IS NOT NULL`;

/** $1 queueId, $2 seqs, $3 tokens. Returns: the rows whose latest lease the (seq, token) pairs name,
 * locked for update. */
export const messageSelectByReceipts = `
  SELECT m.* FROM messages m JOIN unnest($2::bigint[], $3::bigint[]) AS r(seq, token)
    ON m.seq = r.seq AND m.lease_token = r.token
  WHERE m.queue_id = $1
  FOR UPDATE OF m`;

/**
 * The first statement of a FIFO ack: $1 name, $2 seqs. Locks the queue row against deletion (key
 * share) and answers { queue_id, kind, groups }: the groups of the messages the receipts name, whose
 * advisory locks the caller takes next (groupLockMany), before anything reads or changes them. No row
 * when there is no such queue.
 */
export const fifoAckGroups = `
  WITH q AS (SELECT queue_id, kind FROM queues WHERE name = $1 FOR KEY SHARE)
  SELECT q.queue_id, q.kind,
    array(SELECT DISTINCT m.group_key FROM messages m
          WHERE m.queue_id = q.queue_id AND m.seq = ANY($2::bigint[]) AND m.group_key IS NOT NULL) AS groups
  FROM q`;

/**
 * The rest of a FIFO ack as one statement, run under the groups' locks: delete the rows whose latest
 * lease the (seq, token) pairs name, make the next message of each group whose head went its head,
 * count the acks. Only a head can be leased, so each group loses at most its head here; the next is the
 * group's first message after it (the statement's snapshot still shows the deleted rows, so "after"
 * skips them), and the snapshot, taken once the group locks were held, shows every message committed to
 * the group. $1 queueId, $2 seqs, $3 tokens, $4 shard. Returns: one row, { seqs, tokens, promoted }.
 */
export const fifoAckStatement = `
  WITH deleted AS (
    DELETE FROM messages m USING unnest($2::bigint[], $3::bigint[]) AS r(seq, token)
    WHERE m.queue_id = $1 AND m.seq = r.seq AND m.lease_token = r.token
    RETURNING m.seq, m.lease_token, m.group_key, m.head
  ),
  promoted AS (
    UPDATE messages SET head = true
    WHERE seq IN (
      SELECT (SELECT m.seq FROM messages m
              WHERE m.queue_id = $1 AND m.group_key = d.group_key AND m.seq > d.seq
              ORDER BY m.seq LIMIT 1)
      FROM deleted d WHERE d.head AND d.group_key IS NOT NULL)
    AND NOT head
    RETURNING seq
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, acked)
    SELECT $1, $4, count(*) FROM deleted HAVING count(*) > 0
    ON CONFLICT (queue_id, shard) DO UPDATE SET acked = c.acked + excluded.acked
  )
  SELECT
    coalesce((SELECT array_agg(seq::float8 ORDER BY seq) FROM deleted), '{}') AS seqs,
    coalesce((SELECT array_agg(lease_token::float8 ORDER BY seq) FROM deleted), '{}') AS tokens,
    (SELECT count(*)::int FROM promoted) AS promoted`;

/** $1 seqs. Returns: { group_key, head } of each deleted row. */
export const messageDeleteManyIn = (schema: string) =>
  `DELETE FROM "${schema}".messages WHERE seq = ANY($1::bigint[]) RETURNING group_key, head`;

/** $1 seqs, $2 visibleAts. Ends each lease: the row waits as delayed until its visibleAt. */
export const messageReleaseMany = `
  UPDATE messages m SET visible_at = t.visible_at, lease_token = NULL
  FROM unnest($1::bigint[], $2::bigint[]) AS t(seq, visible_at)
  WHERE m.seq = t.seq`;

/** $1 seqs, $2 leaseExpiresAt. Moves each lease's end. */
export const messageExtendMany = `UPDATE messages SET visible_at = $2 WHERE seq = ANY($1::bigint[])`;

/** $1 queueId. Returns: the number of rows deleted (rowCount). */
export const messageDeleteAllOfQueue = `DELETE FROM messages WHERE queue_id = $1`;

/** $1 queueId, $2 expiredBefore, $3 limit. Returns: { group_key } of up to `limit` messages past
 * retention, without locking: the FIFO groups to lock before they are deleted. */
export const messageSelectExpiredGroups = `
  SELECT group_key FROM messages WHERE queue_id = $1 AND published_at <= $2 LIMIT $3`;

/** $1 queueId, $2 expiredBefore, $3 limit, $4 groups (NULL: any). Deletes up to `limit` messages past
 * retention, skipping rows another transaction holds. Returns: { group_key, head } of each. */
export const messageDeleteExpired = `
  DELETE FROM messages WHERE seq IN (
    SELECT seq FROM messages
    WHERE queue_id = $1 AND published_at <= $2 AND ($4::text[] IS NULL OR group_key = ANY($4::text[]))
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
  RETURNING group_key, head`;

/** $1 queueId, $2 visibleFrom, $3 now, $4 maxDeliveries, $5 limit. Returns: { group_key } of the rows
 * messageSelectExhausted would take, without locking: the FIFO groups to lock first. */
export const messageSelectExhaustedGroups = `
  SELECT group_key FROM messages
  WHERE queue_id = $1 AND visible_at >= $2 AND visible_at <= $3
    AND lease_token IS NOT NULL AND delivery_count >= $4
  LIMIT $5`;

/** $1 queueId, $2 visibleFrom, $3 now, $4 maxDeliveries, $5 limit, $6 groups (NULL: any). Returns:
 * rows whose lease ended in [visibleFrom, now] and that have used every delivery, locked. */
export const messageSelectExhausted = `
  SELECT * FROM messages
  WHERE queue_id = $1 AND visible_at >= $2 AND visible_at <= $3
    AND lease_token IS NOT NULL AND delivery_count >= $4
    AND ($6::text[] IS NULL OR group_key = ANY($6::text[]))
  LIMIT $5
  FOR UPDATE SKIP LOCKED`;

/** $1 queueId, $2 limit. Returns: { group_key } of the queue's `limit` oldest messages (by arrival), in
 * any state, without locking: the FIFO groups that an overflow trim locks first. */
export const messageSelectOldestGroupsIn = (schema: string) => `
  SELECT group_key FROM "${schema}".messages WHERE queue_id = $1 ORDER BY published_at, seq LIMIT $2`;

/**
 * $1 queueId, $2 limit, $3 groups (NULL: any). Returns: the queue's `limit` oldest messages (by arrival:
 * publish time, then seq), in any state, locked: what an overflow trim removes. It waits for rows that
 * others hold (a lease, an ack) rather than skip them, so that it takes exactly the oldest; a row that
 * another transaction deleted meanwhile is left out, and its deletion made room already.
 */
export const messageSelectOldestIn = (schema: string) => `
  SELECT * FROM "${schema}".messages
  WHERE queue_id = $1 AND ($3::text[] IS NULL OR group_key = ANY($3::text[]))
  ORDER BY published_at, seq
  LIMIT $2
  FOR UPDATE`;

/**
 * $1 queueId, $2 now, $3 limit. Returns: without locking, the queue's oldest messages (by seq: arrival
 * order, which in a FIFO group is its order) that are not in flight: a redrive step's next. A FIFO
 * group whose head is in flight is left whole, so its messages cannot overtake that head.
 */
export const messageSelectMovable = `
  SELECT * FROM messages m
  WHERE m.queue_id = $1 AND (m.visible_at <= $2 OR m.lease_token IS NULL)
    AND NOT (m.group_key IS NOT NULL AND EXISTS (
      SELECT 1 FROM messages h
      WHERE h.queue_id = $1 AND h.group_key = m.group_key AND h.head
        AND h.visible_at > $2 AND h.lease_token IS NOT NULL))
  ORDER BY m.seq
  LIMIT $3`;

/** $1 queueId, $2 now. Returns: { seq, key, group_key } of the messages in flight (a redrive holds back
 * the later messages of their keys). */
export const messageSelectInFlightKeys = `
  SELECT seq, key, group_key FROM messages WHERE queue_id = $1 AND visible_at > $2 AND lease_token IS NOT NULL`;

/** $1 queueId, $2 seqs, $3 now. Returns: those rows that are still there and not in flight, locked. */
export const messageSelectMovableBySeqs = `
  SELECT * FROM messages
  WHERE queue_id = $1 AND seq = ANY($2::bigint[]) AND (visible_at <= $3 OR lease_token IS NULL)
  ORDER BY seq
  FOR UPDATE`;

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
 * One send into a standard queue as one statement, so one round trip and one implicit transaction:
 * lock the queue row against deletion, insert the messages in array order, add to a counter shard.
 * It writes only if the queue is standard, and says which kind it found: a FIFO queue of that name (one
 * deleted and created again, perhaps on another node) takes the transactional path instead.
 * $1 name, $2 ids, $3 bodies (one after the other, messageColumns), $4 contentTypes, $5 headers, $6 keys,
 * $7 priorities, $8 publishedAts, $9 visibleAts, $10 shard, $11 body lengths; with `notify`, also $12
 * channel and $13 payload of the wake-up NOTIFY, sent by the same commit. Returns: { queue_id, kind }
 * when the queue exists, else no row.
 */
const queueSend = (notify: boolean) => `
  WITH q AS (SELECT queue_id, kind FROM queues WHERE name = $1 FOR KEY SHARE),
  inserted AS (
    INSERT INTO messages (queue_id, id, body, content_type, headers, key, priority, published_at, visible_at)
    SELECT q.queue_id, m.id, ${bodyOf("$3")}, m.content_type, m.headers, m.key, m.priority, m.published_at,
      m.visible_at
    FROM q, ${withBodyStarts(`unnest($2::text[], $11::int[], $4::text[], $5::text[], $6::text[], $7::smallint[],
      $8::bigint[], $9::bigint[])
      WITH ORDINALITY AS u(id, body_length, content_type, headers, key, priority, published_at, visible_at, ord)`)} m
    WHERE q.kind = 'standard'
    ORDER BY m.ord
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, published)
    SELECT queue_id, $10, cardinality($2::text[]) FROM q WHERE q.kind = 'standard'
    ON CONFLICT (queue_id, shard) DO UPDATE SET published = c.published + excluded.published
  )
  SELECT queue_id, kind${
    notify ? `, CASE WHEN kind = 'standard' THEN pg_notify($12, $13) END AS notified` : ""
  } FROM q`;

/** The send with its wake-up NOTIFY sent separately, after the commit (PostgresStore.announceCommitted). */
export const queueSendStatement = queueSend(false);

/**
 * The send that NOTIFYs in its own commit: one round trip where the separate NOTIFY takes two. Used
 * only while no other write of the node is in flight, since PostgreSQL serializes the commits of
 * transactions that NOTIFY (PostgresStore.queueSendInOneStatement).
 */
export const queueSendNotifyingStatement = queueSend(true);

/**
 * The one-statement send with a hand-off (store.ts Handoff): the messages ranked 1 to the queue's
 * in-flight room are inserted already leased, the rest as queueSendStatement inserts them; never
 * NOTIFYs (the caller announces what was left available). $1–$11 as queueSend, then $12 ranks (per
 * message, 0 or its rank, store.ts handoffRanks), $13 max, $14 inFlightMax, $15 now, $16 the
 * lease expiry of each message (read for those leased), $17 tokenBase (the message of rank r gets
 * tokenBase + r). Returns: { queue_id,
 * kind, seqs, tokens } when the queue exists, seqs and tokens of the leased messages in rank order.
 */
export const queueSendHandingOffStatement = `
  WITH q AS (SELECT queue_id, kind FROM queues WHERE name = $1 FOR KEY SHARE),
  room AS (
    SELECT greatest(0, least($13::int,
      $14::int - ${inFlightWhereCeilingBinds("(SELECT queue_id FROM q)", "$15", "$13::int", "$14::int")})) AS n
  ),
  inserted AS (
    INSERT INTO messages (queue_id, id, body, content_type, headers, key, priority, published_at, visible_at,
      delivery_count, first_delivered_at, lease_token)
    SELECT q.queue_id, m.id, ${bodyOf("$3")}, m.content_type, m.headers, m.key, m.priority, m.published_at,
      CASE WHEN m.leased THEN m.lease_expires_at ELSE m.visible_at END,
      CASE WHEN m.leased THEN 1 ELSE 0 END,
      CASE WHEN m.leased THEN $15 END,
      CASE WHEN m.leased THEN $17::bigint + m.rank END
    FROM q, (
      SELECT b.*, b.rank BETWEEN 1 AND (SELECT n FROM room) AS leased
      FROM ${withBodyStarts(`unnest($2::text[], $11::int[], $4::text[], $5::text[], $6::text[], $7::smallint[],
        $8::bigint[], $9::bigint[], $12::int[], $16::bigint[])
        WITH ORDINALITY AS u(id, body_length, content_type, headers, key, priority, published_at, visible_at,
          rank, lease_expires_at, ord)`)} b
    ) m
    WHERE q.kind = 'standard'
    ORDER BY m.ord
    RETURNING seq, lease_token
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, published, delivered)
    SELECT queue_id, $10, cardinality($2::text[]),
      (SELECT count(*) FROM inserted WHERE lease_token IS NOT NULL)
    FROM q WHERE q.kind = 'standard'
    ON CONFLICT (queue_id, shard) DO UPDATE SET
      published = c.published + excluded.published,
      delivered = c.delivered + excluded.delivered
  )
  SELECT queue_id, kind,
    coalesce((SELECT array_agg(seq::float8 ORDER BY lease_token) FROM inserted WHERE lease_token IS NOT NULL),
      '{}') AS seqs,
    coalesce((SELECT array_agg(lease_token::float8 ORDER BY lease_token) FROM inserted
      WHERE lease_token IS NOT NULL), '{}') AS tokens
  FROM q`;

/**
 * One ack batch in a standard queue as one statement: delete each row whose latest lease the
 * (seq, token) pair names and count the deletions. In a FIFO queue it deletes nothing (an ack there
 * may hand a group to its next message, which needs the group's lock) and says so by the kind.
 * $1 name, $2 seqs, $3 tokens, $4 shard. Returns: one row, with queue_id NULL when there is no such
 * queue, the kind, and the pairs deleted (as float8, which holds them exactly).
 */
export const queueAckStatement = `
  WITH q AS (SELECT queue_id, kind FROM queues WHERE name = $1 FOR KEY SHARE),
  deleted AS (
    DELETE FROM messages m USING q, unnest($2::bigint[], $3::bigint[]) AS r(seq, token)
    WHERE q.kind = 'standard' AND m.queue_id = q.queue_id AND m.seq = r.seq AND m.lease_token = r.token
    RETURNING m.seq, m.lease_token
  ),
  counted AS (
    INSERT INTO queue_counters AS c (queue_id, shard, acked)
    SELECT q.queue_id, $4, count(*) FROM q, deleted GROUP BY q.queue_id
    ON CONFLICT (queue_id, shard) DO UPDATE SET acked = c.acked + excluded.acked
  )
  SELECT (SELECT queue_id FROM q) AS queue_id, (SELECT kind FROM q) AS kind,
    coalesce((SELECT array_agg(seq::float8 ORDER BY seq) FROM deleted), '{}') AS seqs,
    coalesce((SELECT array_agg(lease_token::float8 ORDER BY seq) FROM deleted), '{}') AS tokens`;

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

/** $1 queue name. Returns: { oldest } the earliest publish time of the queue's messages, or NULL.
 * Names its schema: sendInTransaction runs it on the application's connection. */
export const messageOldestPublishedAtIn = (schema: string) => `
  SELECT min(m.published_at) AS oldest FROM "${schema}".messages m
  JOIN "${schema}".queues q ON q.queue_id = m.queue_id WHERE q.name = $1`;

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
