/**
 * The statements on inbox namespaces and their per-recipient logs (schema.ts migration 4 has the
 * tables; inbox-store.ts the lock order every transaction keeps). Recipients are always taken in
 * `recipient COLLATE "C"` order: byte order, the same on every node whatever the database's collation.
 */

/** The inbox counter columns; a namespace's record sums them over their shards. */
export type InboxCounterColumn =
  | "appended"
  | "duplicates"
  | "skipped"
  | "acked"
  | "expired"
  | "overflowed"
  | "devices_forgotten"
  | "recipients";

/** A namespace with its counters summed over their shards (`c`), as float8, which holds them exactly. */
const inboxWithCounters = `
  SELECT i.inbox_id, i.name, i.epoch, i.attributes, i.created_at,
    coalesce(sum(c.appended), 0)::float8 AS appended,
    coalesce(sum(c.duplicates), 0)::float8 AS duplicates,
    coalesce(sum(c.skipped), 0)::float8 AS skipped,
    coalesce(sum(c.acked), 0)::float8 AS acked,
    coalesce(sum(c.expired), 0)::float8 AS expired,
    coalesce(sum(c.overflowed), 0)::float8 AS overflowed,
    coalesce(sum(c.devices_forgotten), 0)::float8 AS devices_forgotten,
    coalesce(sum(c.recipients), 0)::float8 AS recipients
  FROM inboxes i LEFT JOIN inbox_counters c USING (inbox_id)`;

/** $1 name. Returns: the namespace with its counters, or no row. */
export const inboxSelectByName = `${inboxWithCounters} WHERE i.name = $1 GROUP BY i.inbox_id`;

/** Returns: every namespace with its counters, by name (byte order). */
export const inboxSelectAll = `${inboxWithCounters} GROUP BY i.inbox_id ORDER BY i.name COLLATE "C"`;

/** Returns: { n } the number of namespaces. */
export const inboxCount = `SELECT count(*)::int AS n FROM inboxes`;

/** $1 name. Returns: { inbox_id } locked against deletion and other upserts, not against appends. */
export const inboxLockForUpdate = `SELECT inbox_id FROM inboxes WHERE name = $1 FOR NO KEY UPDATE`;

/** $1 name. Returns: { inbox_id } locked against everything: every write waits, then finds it gone. */
export const inboxLockForDelete = `SELECT inbox_id FROM inboxes WHERE name = $1 FOR UPDATE`;

/** $1 name. Returns: { inbox_id, attributes } locked against deletion until commit. */
export const inboxLockShared = `SELECT inbox_id, attributes FROM inboxes WHERE name = $1 FOR KEY SHARE`;

/** $1 name, $2 epoch, $3 attributes (JSON), $4 createdAt. Returns: { inbox_id }, or no row if a
 * concurrent create took the name. */
export const inboxInsert = `
  INSERT INTO inboxes (name, epoch, attributes, created_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO NOTHING RETURNING inbox_id`;

/** $1 inboxId, $2 attributes (JSON). */
export const inboxUpdateAttributes = `UPDATE inboxes SET attributes = $2 WHERE inbox_id = $1`;

/** $1 inboxId. Deletes the namespace and every row of it (the inbox tables have no foreign keys).
 * Returns: { removed } the entries deleted. */
export const inboxDeleteAll = `
  WITH entries AS (DELETE FROM inbox_entries WHERE inbox_id = $1 RETURNING 1),
  bodies AS (DELETE FROM inbox_bodies WHERE inbox_id = $1),
  recipients AS (DELETE FROM inbox_recipients WHERE inbox_id = $1),
  devices AS (DELETE FROM inbox_devices WHERE inbox_id = $1),
  ids AS (DELETE FROM inbox_ids WHERE inbox_id = $1),
  counters AS (DELETE FROM inbox_counters WHERE inbox_id = $1),
  inbox AS (DELETE FROM inboxes WHERE inbox_id = $1)
  SELECT count(*)::float8 AS removed FROM entries`;

/**
 * $1 name, $2 recipients (distinct). Locks the namespace against deletion and creates the recipients'
 * rows that are missing, in byte order, so that concurrent creators of the same rows wait for each
 * other in one order. Returns: { inbox_id, attributes, created } when the namespace exists (created:
 * rows made), else no row.
 */
export const inboxRecipientsEnsure = `
  WITH i AS (SELECT inbox_id, attributes FROM inboxes WHERE name = $1 FOR KEY SHARE),
  created AS (
    INSERT INTO inbox_recipients (inbox_id, recipient)
    SELECT i.inbox_id, u.recipient FROM i, unnest($2::text[]) AS u(recipient)
    ORDER BY u.recipient COLLATE "C"
    ON CONFLICT (inbox_id, recipient) DO NOTHING
    RETURNING 1
  )
  SELECT i.inbox_id, i.attributes, (SELECT count(*) FROM created)::int AS created FROM i`;

/**
 * $1 inboxId, $2 recipients. Locks the recipients' rows in byte order (LockRows runs above the sort),
 * the lock every write to a recipient's log, devices or ids holds first. Returns: { recipient, head,
 * trimmed_through, skipped_after } of each row there, as locked (the newest version).
 */
export const inboxRecipientsLock = `
  SELECT recipient, head, trimmed_through, skipped_after FROM inbox_recipients
  WHERE inbox_id = $1 AND recipient = ANY($2::text[])
  ORDER BY recipient COLLATE "C"
  FOR NO KEY UPDATE`;

/**
 * Given a CTE `deleted` of rows (body_id) of deleted entries: the CTE `released` (body_id, n), how many
 * entries of each body went. The bodies' counts are lowered by a statement of their own
 * (inboxBodiesLock, inboxBodiesRelease), which locks them in body_id order: two trims that share
 * bodies then never wait for each other in a cycle.
 */
const releasedBodies = (deleted: string) => `
  released AS (SELECT body_id, count(*)::int AS n FROM ${deleted} GROUP BY body_id)`;

/** The columns { body_ids, body_counts } of `released`, in body_id order. */
const releasedColumns = `
  coalesce((SELECT array_agg(body_id::float8 ORDER BY body_id) FROM released), '{}') AS body_ids,
  coalesce((SELECT array_agg(n ORDER BY body_id) FROM released), '{}') AS body_counts`;

/**
 * One append after inboxRecipientsLock, all recipients in one statement. It starts once the locks are
 * held, so its snapshot holds every append committed to these recipients before. Per recipient it
 * decides: `duplicate` when the message id is remembered (expires_at > now), `skipped` when
 * stopFanoutAfterMs is set and every device it has was last seen that long ago (a recipient with no
 * device is never idle), else `appended` at head + 1. Then it writes: the body once, an entry per
 * appended recipient, its id remembered, its head moved, its entries beyond maxDepth trimmed; the
 * skipped recipients' skipped_after; the counters.
 * $1 inboxId, $2 recipients (distinct, locked), $3 how many more times each was named in the call,
 * $4 messageId, $5 body, $6 contentType, $7 headers (JSON text, kept as given), $8 now, $9 expiresAt of
 * the remembered ids (NULL: none remembered), $10 maxDepth, $11 stopFanoutAfterMs (NULL: never idle),
 * $12 counter shard, $13 recipient rows created. Returns per recipient: { recipient, outcome, seq } (seq
 * NULL when skipped), each row with { body_ids, body_counts }, the bodies of the entries maxDepth
 * trimmed, for inboxBodiesLock and inboxBodiesRelease.
 */
export const inboxAppendWrite = `
  WITH decided AS (
    SELECT u.recipient, u.repeats, r.head, r.trimmed_through, x.seq AS remembered_seq,
      CASE
        WHEN x.seq IS NOT NULL THEN 'duplicate'
        WHEN $11::bigint IS NOT NULL AND (SELECT max(d.last_seen_at) FROM inbox_devices d
                                         WHERE d.inbox_id = $1 AND d.recipient = u.recipient) <= $8 - $11
          THEN 'skipped'
        ELSE 'appended'
      END AS outcome
    FROM unnest($2::text[], $3::int[]) AS u(recipient, repeats)
    JOIN inbox_recipients r ON r.inbox_id = $1 AND r.recipient = ANY($2::text[]) AND r.recipient = u.recipient
    LEFT JOIN inbox_ids x ON x.inbox_id = $1 AND x.recipient = u.recipient AND x.message_id = $4
      AND x.expires_at > $8
  ),
  appended AS (
    SELECT recipient, head + 1 AS seq, trimmed_through FROM decided WHERE outcome = 'appended'
  ),
  body AS (
    INSERT INTO inbox_bodies (inbox_id, message_id, body, content_type, headers, entries)
    SELECT $1, $4, $5, $6, $7, count(*) FROM appended HAVING count(*) > 0
    RETURNING body_id
  ),
  entries AS (
    INSERT INTO inbox_entries (inbox_id, recipient, seq, body_id, appended_at)
    SELECT $1, a.recipient, a.seq, body.body_id, $8 FROM appended a, body
  ),
  remembered AS (
    INSERT INTO inbox_ids AS x (inbox_id, recipient, message_id, seq, expires_at)
    SELECT $1, a.recipient, $4, a.seq, $9 FROM appended a WHERE $9::bigint IS NOT NULL
    ON CONFLICT (inbox_id, recipient, message_id) DO UPDATE SET seq = excluded.seq, expires_at = excluded.expires_at
  ),
  overflowed AS (
    DELETE FROM inbox_entries e USING appended a
    WHERE e.inbox_id = $1 AND e.recipient = a.recipient AND e.seq > a.trimmed_through AND e.seq <= a.seq - $10
    RETURNING e.body_id
  ),
  heads AS (
    UPDATE inbox_recipients r SET head = a.seq, trimmed_through = greatest(r.trimmed_through, a.seq - $10)
    FROM appended a
    -- = ANY keeps the rows found by index, not by a scan of every recipient of the namespace.
    WHERE r.inbox_id = $1 AND r.recipient = ANY($2::text[]) AND r.recipient = a.recipient
  ),
  skips AS (
    UPDATE inbox_recipients r SET skipped_after = r.head
    FROM decided k
    WHERE r.inbox_id = $1 AND r.recipient = ANY($2::text[]) AND r.recipient = k.recipient
      AND k.outcome = 'skipped'
  ),
  ${releasedBodies("overflowed")},
  counted AS (
    INSERT INTO inbox_counters AS c (inbox_id, shard, appended, duplicates, skipped, overflowed, recipients)
    SELECT $1, $12,
      count(*) FILTER (WHERE outcome = 'appended'),
      -- A repeat of a recipient in the call answers as a duplicate of its first answer, unless skipped.
      count(*) FILTER (WHERE outcome = 'duplicate') + coalesce(sum(repeats) FILTER (WHERE outcome <> 'skipped'), 0),
      count(*) FILTER (WHERE outcome = 'skipped'),
      (SELECT count(*) FROM overflowed), $13
    FROM decided
    ON CONFLICT (inbox_id, shard) DO UPDATE SET
      appended = c.appended + excluded.appended,
      duplicates = c.duplicates + excluded.duplicates,
      skipped = c.skipped + excluded.skipped,
      overflowed = c.overflowed + excluded.overflowed,
      recipients = c.recipients + excluded.recipients
  )
  SELECT recipient, outcome,
    CASE outcome WHEN 'duplicate' THEN remembered_seq WHEN 'appended' THEN head + 1 END AS seq,
    ${releasedColumns}
  FROM decided`;

/** $1 bodyIds (sorted). Locks the bodies in body_id order. Returns: { body_id, entries } of each. */
export const inboxBodiesLock = `
  SELECT body_id::float8 AS body_id, entries FROM inbox_bodies WHERE body_id = ANY($1::bigint[])
  ORDER BY body_id FOR NO KEY UPDATE`;

/** $1 bodyIds to delete (no entry names them any more), $2 bodyIds to keep, $3 their entries left.
 * Run with the bodies locked (inboxBodiesLock), on disjoint rows. */
export const inboxBodiesRelease = `
  WITH gone AS (DELETE FROM inbox_bodies WHERE body_id = ANY($1::bigint[]))
  UPDATE inbox_bodies b SET entries = u.entries
  FROM unnest($2::bigint[], $3::int[]) AS u(body_id, entries) WHERE b.body_id = u.body_id`;

/**
 * Trims a prefix of each target recipient's log, under its lock: deletes its entries in (after,
 * through], sets trimmed_through = through, counts them down from their bodies and adds them to
 * `counter`. `targets` is a query of rows (recipient, after, through) with through > after, using $1
 * inboxId; $2 is the counter shard; further parameters are the targets'. Returns: { trimmed, body_ids,
 * body_counts } (the bodies released, for inboxBodiesLock and inboxBodiesRelease).
 */
const trimStatement = (targets: string, counter: InboxCounterColumn) => `
  WITH t AS (${targets}),
  moved AS (
    UPDATE inbox_recipients r SET trimmed_through = t.through
    FROM t WHERE r.inbox_id = $1 AND r.recipient = t.recipient
  ),
  trimmed AS (
    DELETE FROM inbox_entries e USING t
    WHERE e.inbox_id = $1 AND e.recipient = t.recipient AND e.seq > t.after AND e.seq <= t.through
    RETURNING e.body_id
  ),
  ${releasedBodies("trimmed")},
  counted AS (
    INSERT INTO inbox_counters AS c (inbox_id, shard, ${counter})
    SELECT $1, $2, count(*) FROM trimmed HAVING count(*) > 0
    ON CONFLICT (inbox_id, shard) DO UPDATE SET ${counter} = c.${counter} + excluded.${counter}
  )
  SELECT (SELECT count(*) FROM trimmed)::int AS trimmed, ${releasedColumns}`;

/**
 * $1 inboxId, $2 shard, $3 recipients (locked), $4 now - forgetDeviceAfterMs. Trims, counted as acked,
 * what every active device (last seen after $4) of each recipient has acked: up to the lowest of their
 * cursors. A recipient with no active device keeps its entries (they wait, bounded by maxDepth and
 * maxAgeMs). Returns as trimStatement.
 */
export const inboxTrimAcked = trimStatement(
  `SELECT * FROM (
    SELECT r.recipient, r.trimmed_through AS after,
      least(r.head, (SELECT min(d.cursor) FROM inbox_devices d
                     WHERE d.inbox_id = $1 AND d.recipient = r.recipient AND d.last_seen_at > $4)) AS through
    FROM inbox_recipients r WHERE r.inbox_id = $1 AND r.recipient = ANY($3::text[])
  ) x WHERE x.through > x.after`,
  "acked",
);

/**
 * $1 inboxId, $2 shard, $3 recipients (locked), $4 the seq each is expired through. Trims, counted as
 * expired, each recipient's entries up to its seq (never past its head). Returns as trimStatement.
 */
export const inboxTrimExpired = trimStatement(
  `SELECT * FROM (
    SELECT r.recipient, r.trimmed_through AS after, least(r.head, u.through) AS through
    FROM unnest($3::text[], $4::bigint[]) AS u(recipient, through)
    JOIN inbox_recipients r ON r.inbox_id = $1 AND r.recipient = ANY($3::text[]) AND r.recipient = u.recipient
  ) x WHERE x.through > x.after`,
  "expired",
);

/**
 * $1 inboxId, $2 appendedAtMax (now - maxAgeMs), $3 max. The entries past maxAgeMs, at most `max`,
 * oldest first. Returns: { recipient, through } the highest such seq of each recipient; a recipient's
 * entries are appended in time order, so its expired ones are the prefix up to it.
 */
export const inboxExpiredSelect = `
  SELECT recipient, max(seq) AS through FROM (
    SELECT recipient, seq FROM inbox_entries WHERE inbox_id = $1 AND appended_at <= $2
    ORDER BY appended_at, seq LIMIT $3
  ) x GROUP BY recipient`;

/**
 * $1 inboxId, $2 lastSeenAtMax (now - forgetDeviceAfterMs), $3 max. Returns: { recipient, device } of
 * at most `max` devices unseen since $2, least recently seen first.
 */
export const inboxDevicesUnseenSelect = `
  SELECT recipient, device FROM inbox_devices WHERE inbox_id = $1 AND last_seen_at <= $2
  ORDER BY last_seen_at LIMIT $3`;

/**
 * $1 inboxId, $2 recipients, $3 devices (pairwise), $4 lastSeenAtMax. Forgets those devices still
 * unseen since $4, under their recipients' locks. Returns: { recipient } of each device forgotten.
 */
export const inboxDevicesForget = `
  DELETE FROM inbox_devices d USING unnest($2::text[], $3::text[]) AS u(recipient, device)
  WHERE d.inbox_id = $1 AND d.recipient = ANY($2::text[]) AND d.recipient = u.recipient AND d.device = u.device
    AND d.last_seen_at <= $4
  RETURNING d.recipient`;

/** $1 inboxId, $2 shard, $3 how many: adds to one counter of the namespace (`column`). */
export const inboxCounterAdd = (column: InboxCounterColumn) => `
  INSERT INTO inbox_counters AS c (inbox_id, shard, ${column}) VALUES ($1, $2, $3)
  ON CONFLICT (inbox_id, shard) DO UPDATE SET ${column} = c.${column} + excluded.${column}`;

/** inboxCounterAdd of the devices forgotten and of the recipient rows created outside an append. */
export const inboxCountDevicesForgotten = inboxCounterAdd("devices_forgotten");
export const inboxCountRecipients = inboxCounterAdd("recipients");

/** $1 inboxId, $2 now, $3 max. Forgets up to `max` remembered ids whose window ended; ids an append
 * holds right now are skipped (it may be remembering them anew). The rows are found once and deleted
 * by their ctid, which the row locks keep valid until commit. Returns: rowCount. */
export const inboxIdsForget = `
  DELETE FROM inbox_ids WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM inbox_ids WHERE inbox_id = $1 AND expires_at <= $2
    LIMIT $3 FOR UPDATE SKIP LOCKED))`;

/**
 * $1 inboxId, $2 recipient (locked), $3 device, $4 cursor, $5 now, $6 devicesMax, $7 advance. Records
 * the device as seen at $5 (never earlier than it was), creating it with cursor $4 unless the recipient
 * already has devicesMax devices; an existing device's cursor moves to $4 only when $7 and forward.
 * Returns: { cursor } the device's cursor, or no row when refused for the device limit.
 */
export const inboxDeviceUpsert = `
  INSERT INTO inbox_devices AS d (inbox_id, recipient, device, cursor, last_seen_at)
  SELECT $1, $2, $3, $4, $5
  WHERE EXISTS (SELECT 1 FROM inbox_devices WHERE inbox_id = $1 AND recipient = $2 AND device = $3)
    OR (SELECT count(*) FROM inbox_devices WHERE inbox_id = $1 AND recipient = $2) < $6
  ON CONFLICT (inbox_id, recipient, device) DO UPDATE SET
    cursor = CASE WHEN $7 THEN greatest(d.cursor, excluded.cursor) ELSE d.cursor END,
    last_seen_at = greatest(d.last_seen_at, excluded.last_seen_at)
  RETURNING cursor`;

/** $1 inboxId, $2 recipient (locked), $3 device. Returns: rowCount 1 if it was there. */
export const inboxDeviceDelete = `
  DELETE FROM inbox_devices WHERE inbox_id = $1 AND recipient = $2 AND device = $3`;

/**
 * $1 name, $2 recipient, $3 after, $4 limit. A recipient's position and its entries after `after`, in
 * one statement so from one snapshot: a first row with seq 0 holds the state (head, trimmed_through,
 * skipped_after, devices as JSON, epoch); the rows after it are the entries, at most `limit`, in seq
 * order. No row when the namespace does not exist. A recipient never appended to has head 0.
 */
export const inboxReadStatement = `
  WITH s AS (
    SELECT i.inbox_id, i.epoch, coalesce(r.head, 0) AS head, coalesce(r.trimmed_through, 0) AS trimmed_through,
      r.skipped_after,
      coalesce((SELECT json_agg(json_build_object('device', d.device, 'cursor', d.cursor,
                  'lastSeenAt', d.last_seen_at) ORDER BY d.device COLLATE "C")
                FROM inbox_devices d WHERE d.inbox_id = i.inbox_id AND d.recipient = $2), '[]') AS devices
    FROM inboxes i LEFT JOIN inbox_recipients r ON r.inbox_id = i.inbox_id AND r.recipient = $2
    WHERE i.name = $1
  )
  SELECT 0::bigint AS seq, s.epoch, s.head, s.trimmed_through, s.skipped_after, s.devices,
    NULL::text AS message_id, NULL::bytea AS body, NULL::text AS content_type, NULL::text AS headers,
    NULL::bigint AS appended_at
  FROM s
  UNION ALL
  SELECT e.seq, NULL, NULL, NULL, NULL, NULL, b.message_id, b.body, b.content_type, b.headers, e.appended_at
  FROM s
  -- The page is cut from the primary key's order first; only its entries' bodies are read.
  CROSS JOIN LATERAL (
    SELECT e.seq, e.body_id, e.appended_at FROM inbox_entries e
    WHERE e.inbox_id = s.inbox_id AND e.recipient = $2 AND e.seq > $3
    ORDER BY e.seq LIMIT $4
  ) e
  JOIN inbox_bodies b ON b.body_id = e.body_id`;
