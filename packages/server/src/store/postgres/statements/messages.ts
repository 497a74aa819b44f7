/**
 * The statements on messages beyond send, lease and ack: FIFO group locks and heads, purge, expiry,
 * the exhausted sweep, overflow trims, redrive moves and peeks.
 */
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
