/**
 * Every SQL statement the SQLite store runs, one named constant each, with what it does, its
 * parameters and what it returns. Nothing else in the server writes SQL.
 */

/*
 * Every bound LIMIT is written `LIMIT :limit + 0`. SQLite (3.46 and later) plans with the value of a
 * bare `LIMIT :limit`, so it marks that parameter as plan-changing and prepares the statement again each
 * time it is bound, which better-sqlite3 does on every run: a lease's candidate query cost 6-8 µs of
 * parsing and planning per call instead of under 1 µs (measured). An expression is not planned on.
 */

/**
 * The columns of a message row, in the order toMessageRow reads them: statements that return whole
 * message rows select these, and the store reads them as arrays (better-sqlite3's raw mode), which
 * costs less per row than an object built column by column. A JSON body is read as its text (valid
 * UTF-8: it was checked to be JSON on the way in), which costs about half of a Buffer of its bytes and
 * is what the wire needs; any other body as its bytes.
 */
export const messageColumns = `seq, queue_id, id,
  CASE WHEN content_type = 'application/json' THEN CAST(body AS TEXT) ELSE body END AS body,
  content_type, headers, key, published_at, visible_at,
  delivery_count, first_delivered_at, lease_token, priority, dedup_id, group_key, head, body_crc, corrupt`;

/** Params: name. Returns: the queue row. */
export const queueSelectByName = `SELECT * FROM queues WHERE name = :name`;

/** Params: name. Returns: { queue_id, name, kind } of the queue, without its attributes and counters. */
export const queueRefByName = `SELECT queue_id, name, kind FROM queues WHERE name = :name`;

/** Returns: every queue row, by name. */
export const queueSelectAll = `SELECT * FROM queues ORDER BY name`;

/**
 * Params: now. Returns: every queue row, by name, with its messages not visible at `now` by state
 * (depth_delayed, depth_in_flight: an index range of each queue, as messageCountNotVisible) and the
 * publish time of its oldest message (depth_oldest, NULL when it holds none).
 */
export const queueSelectAllWithDepth = `
  SELECT q.*,
    (SELECT count(*) FROM messages m
      WHERE m.queue_id = q.queue_id AND m.visible_at > :now AND m.lease_token IS NULL) AS depth_delayed,
    (SELECT count(*) FROM messages m
      WHERE m.queue_id = q.queue_id AND m.visible_at > :now AND m.lease_token IS NOT NULL) AS depth_in_flight,
    (SELECT count(*) FROM messages m WHERE m.queue_id = q.queue_id AND m.corrupt = 1) AS depth_corrupt,
    (SELECT min(m.published_at) FROM messages m WHERE m.queue_id = q.queue_id) AS depth_oldest
  FROM queues q WHERE q.name > :after ORDER BY q.name LIMIT :limit`;

/** Returns: { n } the number of queues. */
export const queueCount = `SELECT count(*) AS n FROM queues`;

/** Params: name, kind, attributes (JSON), createdAt. */
export const queueInsert = `
  INSERT INTO queues (name, kind, attributes, created_at) VALUES (:name, :kind, :attributes, :createdAt)`;

/** Params: queueId, attributes (JSON). */
export const queueUpdateAttributes = `UPDATE queues SET attributes = :attributes WHERE queue_id = :queueId`;

/** Params: name. Returns: { name } of each queue whose dead-letter target is `name`. */
export const queueSelectDeadLetterSources = `
  SELECT name FROM queues WHERE json_extract(attributes, '$.deadLetter.queue') = :name`;

/** Params: queueId. */
export const queueDelete = `DELETE FROM queues WHERE queue_id = :queueId`;

/** Params: queueId and one delta per counter. Adds the deltas to the queue's counters. */
export const queueAddCounters = `
  UPDATE queues SET
    published = published + :published,
    delivered = delivered + :delivered,
    redelivered = redelivered + :redelivered,
    acked = acked + :acked,
    nacked = nacked + :nacked,
    expired = expired + :expired,
    dead_lettered = dead_lettered + :deadLettered,
    purged = purged + :purged,
    dropped = dropped + :dropped,
    redriven = redriven + :redriven
  WHERE queue_id = :queueId`;

/** Params: queueId, id, body, bodyCrc, contentType, headers (JSON or NULL), key, priority, dedupId,
 * groupKey, head (0 or 1), publishedAt, visibleAt, deliveryCount, firstDeliveredAt, leaseToken (NULL, but
 * for a message inserted leased, as a hand-off does) and corrupt (1 for a dead-letter copy of a message
 * that failed its checksum). */
export const messageInsert = `
  INSERT INTO messages (queue_id, id, body, body_crc, content_type, headers, key, priority, dedup_id, group_key,
    head, published_at, visible_at, delivery_count, first_delivered_at, lease_token, corrupt)
  VALUES (:queueId, :id, :body, :bodyCrc, :contentType, :headers, :key, :priority, :dedupId, :groupKey,
    :head, :publishedAt, :visibleAt, :deliveryCount, :firstDeliveredAt, :leaseToken, :corrupt)`;

/**
 * Params: queueId, now, expiredBefore, limit. Returns: the next available priority-0 messages in
 * visibility order (ties in index order), skipping those past retention, which the sweep deletes, and
 * those marked corrupt, which are never leased. (The candidate queries read each row they test anyway,
 * so `corrupt = 0` costs no extra read.)
 */
export const messageSelectAvailable = `
  SELECT ${messageColumns} FROM messages
  WHERE queue_id = :queueId AND visible_at <= :now AND published_at > :expiredBefore AND priority = 0
    AND corrupt = 0
  ORDER BY visible_at
  LIMIT :limit + 0`;

/** Params as messageSelectAvailable. Returns: the available messages above priority 0, highest first,
 * then in visibility order: a standard queue leases these before any of priority 0. */
export const messageSelectAvailablePrioritized = `
  SELECT ${messageColumns} FROM messages
  WHERE queue_id = :queueId AND priority > 0 AND visible_at <= :now AND published_at > :expiredBefore
    AND corrupt = 0
  ORDER BY priority DESC, visible_at
  LIMIT :limit + 0`;

/** Params as messageSelectAvailable. Returns: a FIFO queue's available group heads, in visibility
 * order: the only messages it can lease. */
export const messageSelectAvailableHeads = `
  SELECT ${messageColumns} FROM messages
  WHERE queue_id = :queueId AND head = 1 AND visible_at <= :now AND published_at > :expiredBefore
    AND corrupt = 0
  ORDER BY visible_at
  LIMIT :limit + 0`;

/** Params: queueId, groupKey. Returns: a row if the FIFO group holds any message. */
export const groupHasMessage = `SELECT 1 FROM messages WHERE queue_id = :queueId AND group_key = :groupKey LIMIT 1`;

/** Params: queueId, groupKey. Makes the group's oldest message its head, if it is not already: run
 * after anything removes messages of the group. */
export const groupPromoteHead = `
  UPDATE messages SET head = 1
  WHERE seq = (SELECT min(seq) FROM messages WHERE queue_id = :queueId AND group_key = :groupKey) AND head = 0`;

/** Params: queueId, dedupId, now. Returns: { message_id } of the message stored under the dedupId,
 * while its window lasts. */
export const dedupSelect = `
  SELECT message_id FROM dedup WHERE queue_id = :queueId AND dedup_id = :dedupId AND expires_at > :now`;

/** Params: queueId, dedupId, messageId, expiresAt. Remembers a dedupId (replacing one whose window
 * ended). */
export const dedupUpsert = `
  INSERT INTO dedup (queue_id, dedup_id, message_id, expires_at) VALUES (:queueId, :dedupId, :messageId, :expiresAt)
  ON CONFLICT (queue_id, dedup_id) DO UPDATE SET message_id = excluded.message_id, expires_at = excluded.expires_at`;

/** Params: queueId, now. Forgets the dedupIds whose window ended. */
export const dedupDeleteExpired = `DELETE FROM dedup WHERE queue_id = :queueId AND expires_at <= :now`;

/** Params: queueId. */
export const dedupDeleteAllOfQueue = `DELETE FROM dedup WHERE queue_id = :queueId`;

/** Params: queueId, limit. Returns: the oldest messages by arrival, in any state (overflow drops). */
export const messageSelectOldest = `
  SELECT ${messageColumns} FROM messages WHERE queue_id = :queueId ORDER BY published_at, seq LIMIT :limit + 0`;

/** Params: queueId, now. Returns: { seq, key, group_key } of the messages in flight. */
export const messageSelectInFlightKeys = `
  SELECT seq, key, group_key FROM messages WHERE queue_id = :queueId AND visible_at > :now AND lease_token IS NOT NULL`;

/** Params: queueId, now, limit. Returns: the oldest messages by arrival that are neither in flight nor
 * marked corrupt (a redrive's candidates). */
export const messageSelectMovable = `
  SELECT ${messageColumns} FROM messages
  WHERE queue_id = :queueId AND (visible_at <= :now OR lease_token IS NULL) AND corrupt = 0
  ORDER BY published_at, seq LIMIT :limit + 0`;

/**
 * Params: seqs (a JSON array), leaseExpiresAt, tokenBase, now. Takes a lease on every listed row in one
 * statement: each row's token is tokenBase + seq, so tokens differ between the rows of one call, and a
 * fresh random base per call makes a later lease's token differ from an earlier one's. Each row's
 * delivery count goes up by one and its first delivery time is set if it had none; the store, which
 * read the rows in the same transaction, knows the new values without reading them back (a RETURNING
 * clause cost 1.5-2.5 µs per row, docs/benchmarks.md session 8).
 */
export const messageLeaseMany = `
  UPDATE messages SET
    visible_at = :leaseExpiresAt,
    lease_token = :tokenBase + seq,
    delivery_count = delivery_count + 1,
    first_delivered_at = coalesce(first_delivered_at, :now)
  WHERE seq IN (SELECT value FROM json_each(:seqs))`;

/** Params: seq, queueId, leaseToken. Returns: the row if the receipt names its latest lease. */
export const messageSelectByReceipt = `
  SELECT ${messageColumns} FROM messages WHERE seq = :seq AND queue_id = :queueId AND lease_token = :leaseToken`;

/** Params: seq, queueId, leaseToken. Deletes the row if the receipt names its latest lease (an ack of
 * a standard queue's message): one change, or none when the receipt is stale. */
export const messageDeleteByReceipt = `
  DELETE FROM messages WHERE seq = :seq AND queue_id = :queueId AND lease_token = :leaseToken`;

/** As messageDeleteByReceipt, in a FIFO queue. Returns: { group_key } of the deleted row, whose group
 * gets its next head, or no row when the receipt is stale. */
export const messageDeleteByReceiptInGroup = `${messageDeleteByReceipt}
  RETURNING group_key`;

/** Params: seq, queueId, leaseToken, leaseExpiresAt. Moves a lease's expiry. */
export const messageExtendByReceipt = `
  UPDATE messages SET visible_at = :leaseExpiresAt
  WHERE seq = :seq AND queue_id = :queueId AND lease_token = :leaseToken`;

/** Params: seq, now. Marks a message whose body failed its checksum: visible and unleased, so that it
 * counts only as corrupt (QueueDepth), and never leased again (the candidate queries skip it). */
export const messageMarkCorrupt = `UPDATE messages SET corrupt = 1, visible_at = :now, lease_token = NULL WHERE seq = :seq`;

/** Params: queueId. Returns: { n } the queue's messages marked corrupt (from the partial index). */
export const messageCountCorrupt = `SELECT count(*) AS n FROM messages WHERE queue_id = :queueId AND corrupt = 1`;

/** Returns: a row if the database has its commit count yet (a file from before it does not). */
export const commitCountTableExists = `SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'commit_count'`;

/** Returns: { commits } the group commits made (commit-count.ts). */
export const commitCountSelect = `SELECT commits FROM commit_count WHERE id = 1`;

/** Params: commits. Records the commit being made as the latest; run inside each group commit. */
export const commitCountUpdate = `UPDATE commit_count SET commits = :commits WHERE id = 1`;

/** Params: seq, visibleAt. Ends the lease: the row waits as delayed until visibleAt. */
export const messageRelease = `UPDATE messages SET visible_at = :visibleAt, lease_token = NULL WHERE seq = :seq`;

/** Params: seq. Returns: { group_key } of the deleted row (FIFO heads to promote). */
export const messageDelete = `DELETE FROM messages WHERE seq = :seq RETURNING group_key`;

/** Params: queueId. Returns: the number of rows deleted (via changes). */
export const messageDeleteAllOfQueue = `DELETE FROM messages WHERE queue_id = :queueId`;

/** Returns: { last } the highest seq of any queue, or null: a purge's bound (every message stored
 * before it has a seq at or below it). */
export const messageLastSeq = `SELECT max(seq) AS last FROM messages`;

/** Params: queueId, lastSeq, limit. Deletes up to `limit` of the queue's messages at or below lastSeq
 * (one step of a purge or a queue delete). Returns: the number of rows deleted (via changes). */
export const messageDeleteStep = `
  DELETE FROM messages WHERE seq IN (
    SELECT seq FROM messages WHERE queue_id = :queueId AND seq <= :lastSeq LIMIT :limit + 0)`;

/** Params: queueId, afterSeq. Returns: { group_key } of the FIFO groups with messages above afterSeq.
 * It walks the rows above afterSeq (`+queue_id` keeps the planner off the group index, which would
 * read every message of the queue). */
export const groupsAfterSeq = `
  SELECT DISTINCT group_key FROM messages WHERE seq > :afterSeq AND +queue_id = :queueId AND group_key IS NOT NULL`;

/** Params: queueId, expiredBefore, limit. Deletes up to `limit` messages past retention. Returns:
 * { group_key } per deleted row. */
export const messageDeleteExpired = `
  DELETE FROM messages WHERE seq IN (
    SELECT seq FROM messages WHERE queue_id = :queueId AND published_at <= :expiredBefore LIMIT :limit + 0)
  RETURNING group_key`;

/**
 * Params: queueId, visibleFrom, now, maxDeliveries, limit. Returns: rows whose lease ended in
 * [visibleFrom, now] and that have used every delivery.
 */
export const messageSelectExhausted = `
  SELECT ${messageColumns} FROM messages
  WHERE queue_id = :queueId AND visible_at >= :visibleFrom AND visible_at <= :now
    AND lease_token IS NOT NULL AND delivery_count >= :maxDeliveries
  LIMIT :limit + 0`;

/** Params: queueId, now. Returns: { delayed, inFlight }, the messages not visible now, counted from the
 * index alone (the rest of the depth is available: queueDepth). */
export const messageCountNotVisible = `
  SELECT
    count(*) FILTER (WHERE lease_token IS NULL) AS delayed,
    count(*) FILTER (WHERE lease_token IS NOT NULL) AS inFlight
  FROM messages WHERE queue_id = :queueId AND visible_at > :now`;

/** Params: queueId, now. Returns: { n } messages in flight. */
export const messageCountInFlight = `
  SELECT count(*) AS n FROM messages
  WHERE queue_id = :queueId AND visible_at > :now AND lease_token IS NOT NULL`;

/** Params: queueId. Returns: { oldest } the earliest publish time, or NULL when empty. */
export const messageOldestPublishedAt = `
  SELECT min(published_at) AS oldest FROM messages WHERE queue_id = :queueId`;

/** Params: queueId, now. Returns: { next } the earliest visible_at after now, or NULL. */
export const messageNextVisibleAt = `
  SELECT min(visible_at) AS next FROM messages WHERE queue_id = :queueId AND visible_at > :now`;

/** Params: queueId, now, limit. Peek at available messages. */
export const messagePeekAvailable = `
  SELECT ${messageColumns} FROM messages WHERE queue_id = :queueId AND visible_at <= :now ORDER BY visible_at LIMIT :limit + 0`;

/** Params: queueId, now, limit. Peek at delayed messages. */
export const messagePeekDelayed = `
  SELECT ${messageColumns} FROM messages WHERE queue_id = :queueId AND visible_at > :now AND lease_token IS NULL
  ORDER BY visible_at LIMIT :limit + 0`;

/** Params: queueId, now, limit. Peek at in-flight messages. */
export const messagePeekInFlight = `
  SELECT ${messageColumns} FROM messages WHERE queue_id = :queueId AND visible_at > :now AND lease_token IS NOT NULL
  ORDER BY visible_at LIMIT :limit + 0`;

/** Params: name. Returns: the exchange row. */
export const exchangeSelectByName = `SELECT * FROM exchanges WHERE name = :name`;

/** Returns: every exchange row, by name. */
export const exchangeSelectAll = `SELECT * FROM exchanges ORDER BY name`;

/** Params: name, type, alternate, createdAt. */
export const exchangeInsert = `
  INSERT INTO exchanges (name, type, alternate, created_at) VALUES (:name, :type, :alternate, :createdAt)`;

/** Params: exchangeId, alternate. */
export const exchangeUpdateAlternate = `UPDATE exchanges SET alternate = :alternate WHERE exchange_id = :exchangeId`;

/** Params: exchangeId. Deletes the exchange; its own bindings go by cascade. */
export const exchangeDelete = `DELETE FROM exchanges WHERE exchange_id = :exchangeId`;

/** Params: name. Returns: { name } of each queue whose dead-letter exchange is `name`. */
export const queueSelectDeadLetterExchangeSources = `
  SELECT name FROM queues WHERE json_extract(attributes, '$.deadLetter.exchange') = :name`;

/** Params: exchangeId. Returns: the exchange's bindings in a stable order. */
export const bindingSelectByExchange = `
  SELECT destination_kind, destination, pattern FROM bindings WHERE exchange_id = :exchangeId
  ORDER BY destination_kind, destination, pattern`;

/** Params: exchangeId, destinationKind, destination, pattern. Returns: changes 1 if new. */
export const bindingInsert = `
  INSERT INTO bindings (exchange_id, destination_kind, destination, pattern)
  VALUES (:exchangeId, :destinationKind, :destination, :pattern)
  ON CONFLICT DO NOTHING`;

/** Params: exchangeId, destinationKind, destination, pattern. Returns: changes 1 if it existed. */
export const bindingDelete = `
  DELETE FROM bindings WHERE exchange_id = :exchangeId AND destination_kind = :destinationKind
    AND destination = :destination AND pattern = :pattern`;

/** Params: destinationKind, destination. Deletes every binding to a queue, exchange or stream being deleted. */
export const bindingDeleteByDestination = `
  DELETE FROM bindings WHERE destination_kind = :destinationKind AND destination = :destination`;
