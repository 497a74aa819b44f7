/**
 * The SQLite store's statements over the inbox tables (schema.ts, migration 5), one named constant
 * each, with what it takes and answers.
 */

/** Params: name. Returns: the namespace row. */
export const inboxSelectByName = "SELECT * FROM inboxes WHERE name = :name";

/** Returns: every namespace row, by name. */
export const inboxSelectAll = "SELECT * FROM inboxes ORDER BY name";

/** Returns: { n } the namespaces. */
export const inboxCount = "SELECT count(*) AS n FROM inboxes";

/** Params: inboxId. Returns: { entries, recipients } held now. */
export const inboxSizes = `
  SELECT (SELECT count(*) FROM inbox_entries WHERE inbox_id = :inboxId) AS entries,
         (SELECT count(*) FROM inbox_recipients WHERE inbox_id = :inboxId) AS recipients`;

/** Params: name, attributes (JSON), epoch, createdAt. */
export const inboxInsert = `
  INSERT INTO inboxes (name, attributes, epoch, created_at) VALUES (:name, :attributes, :epoch, :createdAt)`;

/** Params: inboxId, attributes (JSON). */
export const inboxUpdateAttributes = "UPDATE inboxes SET attributes = :attributes WHERE inbox_id = :inboxId";

/** Params: inboxId. Deletes the namespace; its rows in every inbox table go by cascade. */
export const inboxDelete = "DELETE FROM inboxes WHERE inbox_id = :inboxId";

/** Params: inboxId and every counter's delta. */
export const inboxAddCounters = `
  UPDATE inboxes SET appended = appended + :appended, duplicates = duplicates + :duplicates,
    skipped = skipped + :skipped, acked = acked + :acked, expired = expired + :expired,
    overflowed = overflowed + :overflowed, devices_forgotten = devices_forgotten + :devicesForgotten
  WHERE inbox_id = :inboxId`;

/** Params: inboxId, recipient. Returns: { head, skipped_after }. */
export const recipientSelect = `
  SELECT head, skipped_after FROM inbox_recipients WHERE inbox_id = :inboxId AND recipient = :recipient`;

/**
 * Params: inboxId, recipients (a JSON array of distinct names), messageId, now. Returns: per recipient,
 * its index in the array (idx), { head, skipped_after } (null without a row) and the earlier_seq its
 * message id is remembered at in inbox_ids (or null). One statement for all of an append's
 * recipients; no ORDER BY, which would sort them in a temporary B-tree: the caller places rows by idx.
 */
export const appendTargets = `
  SELECT j.key AS idx, r.head, r.skipped_after,
    (SELECT i.seq FROM inbox_ids i
     WHERE i.inbox_id = :inboxId AND i.recipient = j.value AND i.message_id = :messageId
       AND i.expires_at > :now) AS earlier_seq
  FROM json_each(:recipients) j
  LEFT JOIN inbox_recipients r ON r.inbox_id = :inboxId AND r.recipient = j.value`;

/**
 * Params: inboxId, recipients (a JSON array). Returns: { idx, last_seen_at }, the latest last_seen_at
 * of the devices of each recipient that has some, by its index in the array. (CROSS JOIN keeps the
 * array outside: otherwise SQLite prefers inbox_devices_by_seen, which covers the query but reads
 * every device of the namespace.)
 */
export const devicesLastSeen = `
  SELECT j.key AS idx, max(d.last_seen_at) AS last_seen_at
  FROM json_each(:recipients) j
  CROSS JOIN inbox_devices d ON d.inbox_id = :inboxId AND d.recipient = j.value
  GROUP BY j.key`;

/**
 * Params: inboxId, rows (a JSON array of [recipient, head]). Sets each recipient's skipped_after to its
 * head, creating its row. (WHERE true: SQLite's parser needs it before ON CONFLICT in INSERT … SELECT.)
 */
export const recipientsSkip = `
  INSERT INTO inbox_recipients (inbox_id, recipient, head, skipped_after)
  SELECT :inboxId, j.value ->> 0, j.value ->> 1, j.value ->> 1 FROM json_each(:rows) j WHERE true
  ON CONFLICT (inbox_id, recipient) DO UPDATE SET skipped_after = excluded.skipped_after`;

/** Params: inboxId, entries (a JSON array of [recipient, seq]), bodyId, appendedAt. One append's entries. */
export const entriesInsert = `
  INSERT INTO inbox_entries (inbox_id, recipient, seq, body_id, appended_at)
  SELECT :inboxId, j.value ->> 0, j.value ->> 1, :bodyId, :appendedAt FROM json_each(:entries) j`;

/** Params: inboxId, entries (as entriesInsert). Moves each recipient's head to its entry's seq. */
export const recipientsAdvance = `
  INSERT INTO inbox_recipients (inbox_id, recipient, head, skipped_after)
  SELECT :inboxId, j.value ->> 0, j.value ->> 1, NULL FROM json_each(:entries) j WHERE true
  ON CONFLICT (inbox_id, recipient) DO UPDATE SET head = excluded.head`;

/**
 * Params: bodyId, refs, appendedAt, recipients (the append's entries, as entriesInsert), idsExpireAt
 * (or null). Completes an append's body row with what its entries need (schema.ts, migration 6).
 */
export const bodyAppended = `
  UPDATE inbox_bodies SET refs = :refs, appended_at = :appendedAt, recipients = :recipients,
    ids_expire_at = :idsExpireAt
  WHERE body_id = :bodyId`;

/**
 * Params: inboxId, messageId, now. Returns: { recipients } of each body of that message whose ids are
 * still remembered: the [recipient, seq] pairs it was appended with.
 */
export const bodyRecipientsByMessage = `
  SELECT recipients FROM inbox_bodies
  WHERE inbox_id = :inboxId AND message_id = :messageId AND ids_expire_at > :now`;

/** Params: inboxId, recipient. Returns: { oldest } the lowest retained seq, or null. */
export const entryOldestSeq = `
  SELECT min(seq) AS oldest FROM inbox_entries WHERE inbox_id = :inboxId AND recipient = :recipient`;

/** Params: inboxId, recipient. Returns: { n } the entries held. */
export const entryCount =
  "SELECT count(*) AS n FROM inbox_entries WHERE inbox_id = :inboxId AND recipient = :recipient";

/** Params: inboxId, now, limit. Forgets up to limit ids whose window ended. */
export const idDeleteExpired = `
  DELETE FROM inbox_ids WHERE (inbox_id, recipient, message_id) IN (
    SELECT inbox_id, recipient, message_id FROM inbox_ids
    WHERE inbox_id = :inboxId AND expires_at <= :now LIMIT :limit)`;

/** Params: inboxId, messageId, body, bodyCrc, contentType, headers. */
export const bodyInsert = `
  INSERT INTO inbox_bodies (inbox_id, message_id, body, body_crc, content_type, headers)
  VALUES (:inboxId, :messageId, :body, :bodyCrc, :contentType, :headers)`;

/** Params: inboxId, recipient, after, limit. Returns: the entries after the cursor, in order, with
 * their bodies. */
export const entrySelectAfter = `
  SELECT e.seq, b.message_id, b.body, b.body_crc, b.content_type, b.headers, e.appended_at
  FROM inbox_entries e JOIN inbox_bodies b ON b.body_id = e.body_id
  WHERE e.inbox_id = :inboxId AND e.recipient = :recipient AND e.seq > :after
  ORDER BY e.seq LIMIT :limit`;

/** Params: inboxId, recipient, seq. Deletes the entries at or below seq; returns what went. */
export const entryDeleteThrough = `
  DELETE FROM inbox_entries WHERE inbox_id = :inboxId AND recipient = :recipient AND seq <= :seq
  RETURNING recipient, seq, body_id`;

/**
 * Params: inboxId, appendedBefore, limit. Returns: up to limit of the namespace's oldest bodies
 * appended at or before appendedBefore, with their [recipient, seq] pairs, oldest first.
 */
export const bodySelectExpired = `
  SELECT body_id, recipients FROM inbox_bodies
  WHERE inbox_id = :inboxId AND appended_at <= :appendedBefore ORDER BY appended_at, body_id LIMIT :limit`;

/**
 * Params: inboxId, pairs (a JSON array of [recipient, seq], oldest first), limit. Deletes the first
 * limit of those entries that are still held; returns what went. (CROSS JOIN: the array outside, each
 * pair one search of the primary key; SQLite would otherwise scan the namespace's entries.)
 */
export const entryDeletePairs = `
  DELETE FROM inbox_entries WHERE (inbox_id, recipient, seq) IN (
    SELECT e.inbox_id, e.recipient, e.seq FROM json_each(:pairs) j
    CROSS JOIN inbox_entries e
      ON e.inbox_id = :inboxId AND e.recipient = j.value ->> 0 AND e.seq = j.value ->> 1
    ORDER BY j.key LIMIT :limit)
  RETURNING recipient, seq, body_id`;

/**
 * Params: inboxId, gone (a JSON array of [recipient, seq, bodyId]: entries just deleted), now. Keeps
 * the message id of each for its recipient while its body's window is open, as the append promised.
 */
export const idsKeepTrimmed = `
  INSERT INTO inbox_ids (inbox_id, recipient, message_id, seq, expires_at)
  SELECT :inboxId, j.value ->> 0, b.message_id, j.value ->> 1, b.ids_expire_at
  FROM json_each(:gone) j JOIN inbox_bodies b ON b.body_id = j.value ->> 2
  WHERE b.ids_expire_at > :now
  ON CONFLICT (inbox_id, recipient, message_id) DO UPDATE SET seq = excluded.seq, expires_at = excluded.expires_at`;

/**
 * Params: counts (a JSON array of [bodyId, entries gone], one pair per body). Takes the entries gone
 * from each body's refs.
 */
export const bodyRefsTake = `
  UPDATE inbox_bodies SET refs = refs - c.gone
  FROM (SELECT j.value ->> 0 AS body_id, j.value ->> 1 AS gone FROM json_each(:counts) j) c
  WHERE inbox_bodies.body_id = c.body_id`;

/** Params: counts (as bodyRefsTake). Deletes those bodies that no entry names any more. */
export const bodyDeleteUnused = `
  DELETE FROM inbox_bodies WHERE body_id IN (SELECT value ->> 0 FROM json_each(:counts)) AND refs <= 0`;

/** Params: inboxId, recipient. Returns: the recipient's devices, by name. */
export const deviceSelect = `
  SELECT device, cursor, last_seen_at FROM inbox_devices
  WHERE inbox_id = :inboxId AND recipient = :recipient ORDER BY device`;

/** Params: inboxId, recipient, device, cursor, lastSeenAt. */
export const deviceUpsert = `
  INSERT INTO inbox_devices (inbox_id, recipient, device, cursor, last_seen_at)
  VALUES (:inboxId, :recipient, :device, :cursor, :lastSeenAt)
  ON CONFLICT (inbox_id, recipient, device) DO UPDATE SET cursor = excluded.cursor, last_seen_at = excluded.last_seen_at`;

/** Params: inboxId, recipient, device. */
export const deviceDelete = `
  DELETE FROM inbox_devices WHERE inbox_id = :inboxId AND recipient = :recipient AND device = :device`;

/** Params: inboxId, seenBefore, limit. Returns: up to limit devices last seen at or before seenBefore. */
export const deviceSelectUnseen = `
  SELECT recipient, device FROM inbox_devices WHERE inbox_id = :inboxId AND last_seen_at <= :seenBefore
  ORDER BY last_seen_at LIMIT :limit`;
