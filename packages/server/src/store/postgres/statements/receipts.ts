/**
 * The statements that act on a lease's receipt: find the rows receipts name, ack (in one statement in
 * a standard queue, under group locks in a FIFO one), release for a retry, extend.
 */

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
