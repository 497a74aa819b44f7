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
 * Params: inboxId, recipients (a JSON array of distinct names), messageId, now, withDevices (0 or 1).
 * Returns: per recipient, in the array's order, { head, skipped_after } (null without a row), the
 * earlier_seq its message id is remembered at (or null), and with withDevices the latest last_seen_at of
 * its devices (null with none). One statement for all of an append's recipients.
 */
export const appendTargets = `
  SELECT r.head, r.skipped_after,
    (SELECT i.seq FROM inbox_ids i
     WHERE i.inbox_id = :inboxId AND i.recipient = j.value AND i.message_id = :messageId
       AND i.expires_at > :now) AS earlier_seq,
    CASE WHEN :withDevices THEN
      (SELECT max(d.last_seen_at) FROM inbox_devices d WHERE d.inbox_id = :inboxId AND d.recipient = j.value)
    END AS last_seen_at
  FROM json_each(:recipients) j
  LEFT JOIN inbox_recipients r ON r.inbox_id = :inboxId AND r.recipient = j.value
  ORDER BY j.key`;

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

/** Params: inboxId, entries (as entriesInsert), messageId, expiresAt. Remembers the id per recipient. */
export const idsRemember = `
  INSERT INTO inbox_ids (inbox_id, recipient, message_id, seq, expires_at)
  SELECT :inboxId, j.value ->> 0, :messageId, j.value ->> 1, :expiresAt FROM json_each(:entries) j WHERE true
  ON CONFLICT (inbox_id, recipient, message_id) DO UPDATE SET seq = excluded.seq, expires_at = excluded.expires_at`;

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

/** Params: inboxId, recipient, seq. Deletes the entries at or below seq; returns their body ids. */
export const entryDeleteThrough = `
  DELETE FROM inbox_entries WHERE inbox_id = :inboxId AND recipient = :recipient AND seq <= :seq
  RETURNING body_id`;

/** Params: inboxId, appendedBefore, limit. Deletes up to limit of the oldest entries appended at or
 * before appendedBefore; returns their body ids. */
export const entryDeleteExpired = `
  DELETE FROM inbox_entries WHERE (inbox_id, recipient, seq) IN (
    SELECT inbox_id, recipient, seq FROM inbox_entries
    WHERE inbox_id = :inboxId AND appended_at <= :appendedBefore ORDER BY appended_at LIMIT :limit)
  RETURNING body_id`;

/** Params: bodyIds (a JSON array). Deletes the bodies no entry names any more. */
export const bodyDeleteUnused = `
  DELETE FROM inbox_bodies WHERE body_id IN (SELECT value FROM json_each(:bodyIds))
    AND NOT EXISTS (SELECT 1 FROM inbox_entries WHERE inbox_entries.body_id = inbox_bodies.body_id)`;

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
