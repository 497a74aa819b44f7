/**
 * The statements on streams and their partitions' logs (schema.ts migration 5 has the tables;
 * stream-store.ts the lock order every transaction keeps). Partitions are always locked in partition
 * order, dedupIds inserted in byte order (`COLLATE "C"`), the same on every node.
 */

/** A stream with its partitions (JSON, in partition order) and its counters summed over them. */
const streamWithPartitions = `
  SELECT s.stream_id, s.name, s.attributes, s.partitions, s.created_at,
    coalesce(sum(p.appended), 0)::float8 AS appended,
    coalesce(sum(p.appended_bytes), 0)::float8 AS appended_bytes,
    coalesce(sum(p.duplicates), 0)::float8 AS duplicates,
    coalesce(sum(p.expired), 0)::float8 AS expired,
    coalesce(json_agg(json_build_object('partition', p.partition, 'oldest', p.oldest, 'next', p.next,
      'bytes', p.bytes) ORDER BY p.partition) FILTER (WHERE p.partition IS NOT NULL), '[]') AS heads
  FROM streams s LEFT JOIN stream_partitions p USING (stream_id)`;

/** $1 name. Returns: the stream with its partitions, or no row. */
export const streamSelectByName = `${streamWithPartitions} WHERE s.name = $1 GROUP BY s.stream_id`;

/** Returns: every stream with its partitions, by name (byte order). */
export const streamSelectAll = `${streamWithPartitions} GROUP BY s.stream_id ORDER BY s.name COLLATE "C"`;

/** Returns: { n } the number of streams. */
export const streamCount = `SELECT count(*)::int AS n FROM streams`;

/** $1 name. Returns: { stream_id, partitions } locked against appends, deletes and other upserts. */
export const streamLockForUpdate = `SELECT stream_id, partitions FROM streams WHERE name = $1 FOR UPDATE`;

/** $1 name. Returns: { stream_id, attributes, partitions } locked against deletion and growth until
 * commit (an upsert that grows the stream waits for the appends in flight). */
export const streamLockShared = `
  SELECT stream_id, attributes, partitions FROM streams WHERE name = $1 FOR KEY SHARE`;

/** $1 name, $2 attributes (JSON), $3 partitions, $4 createdAt. Returns: { stream_id }, or no row if a
 * concurrent create took the name. */
export const streamInsert = `
  INSERT INTO streams (name, attributes, partitions, created_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO NOTHING RETURNING stream_id`;

/** $1 streamId, $2 attributes (JSON), $3 partitions. */
export const streamUpdate = `UPDATE streams SET attributes = $2, partitions = $3 WHERE stream_id = $1`;

/** $1 streamId, $2 from, $3 to. Adds the empty partitions from..to-1. */
export const streamPartitionsInsert = `
  INSERT INTO stream_partitions (stream_id, partition)
  SELECT $1, n FROM generate_series($2::int, $3::int - 1) AS n`;

/** $1 streamId. Deletes the stream and every row of it. Returns: { removed } the records it held. */
export const streamDeleteAll = `
  WITH records AS (DELETE FROM stream_records WHERE stream_id = $1),
  dedup AS (DELETE FROM stream_dedup WHERE stream_id = $1),
  groups AS (DELETE FROM stream_groups WHERE stream_id = $1),
  shares AS (DELETE FROM stream_shares WHERE stream_id = $1),
  partitions AS (DELETE FROM stream_partitions WHERE stream_id = $1 RETURNING next - oldest AS held),
  stream AS (DELETE FROM streams WHERE stream_id = $1)
  SELECT coalesce(sum(held), 0)::float8 AS removed FROM partitions`;

/** $1 streamId, $2 dedupIds, $3 now. Forgets the given dedupIds whose window ended, so that they may
 * be remembered again. */
export const streamDedupDeleteEnded = `
  DELETE FROM stream_dedup WHERE stream_id = $1 AND dedup_id = ANY($2::text[]) AND expires_at <= $3`;

/**
 * $1 streamId, $2 dedupIds (distinct), $3 expiresAt. Remembers each id not remembered yet, in byte
 * order, at a place the append fills in (streamDedupPlace); a concurrent append of the same id waits
 * here until the first commits, then finds it. Returns: { dedup_id } of the ids remembered now.
 */
export const streamDedupClaim = `
  INSERT INTO stream_dedup (stream_id, dedup_id, partition, record_offset, expires_at)
  SELECT $1, d, -1, -1, $3 FROM unnest($2::text[]) AS d ORDER BY d COLLATE "C"
  ON CONFLICT (stream_id, dedup_id) DO NOTHING RETURNING dedup_id`;

/** $1 streamId, $2 dedupIds. Returns: { dedup_id, partition, record_offset } of those remembered. */
export const streamDedupSelect = `
  SELECT dedup_id, partition, record_offset FROM stream_dedup
  WHERE stream_id = $1 AND dedup_id = ANY($2::text[])`;

/** $1 streamId, $2 dedupIds, $3 partitions, $4 offsets: where each id claimed now was appended. */
export const streamDedupPlace = `
  UPDATE stream_dedup d SET partition = u.partition, record_offset = u.record_offset
  FROM unnest($2::text[], $3::int[], $4::bigint[]) AS u(dedup_id, partition, record_offset)
  WHERE d.stream_id = $1 AND d.dedup_id = u.dedup_id`;

/** $1 streamId, $2 partitions. Locks their heads in partition order, the lock that orders offsets.
 * Returns: { partition, oldest, next, bytes, last_timestamp } as locked. */
export const streamPartitionsLock = `
  SELECT partition, oldest, next, bytes, last_timestamp FROM stream_partitions
  WHERE stream_id = $1 AND partition = ANY($2::int[]) ORDER BY partition FOR UPDATE`;

/**
 * $1 streamId, $2 partitions, $3 offsets, $4 timestamps, $5 keys, $6 contentTypes, $7 headers (JSON
 * text), $8 body lengths, $9 bodies (one bytea, one after the other). Inserts the records.
 */
export const streamRecordsInsert = `
  INSERT INTO stream_records
    (stream_id, partition, record_offset, timestamp, key, content_type, headers, body, bytes)
  SELECT $1, m.partition, m.record_offset, m.timestamp, m.key, m.content_type, m.headers,
    substring($9::bytea FROM m.body_start + 1 FOR m.body_length), m.body_length
  FROM (
    SELECT u.*, (sum(u.body_length) OVER (ORDER BY u.ord) - u.body_length)::int AS body_start
    FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::int[])
      WITH ORDINALITY AS u(partition, record_offset, timestamp, key, content_type, headers, body_length, ord)
  ) m`;

/**
 * $1 streamId, $2 partitions, $3 nexts, $4 added bytes, $5 last timestamps, $6 appended, $7 duplicates.
 * Moves each locked head after an append and adds to its counters.
 */
export const streamPartitionsAdvance = `
  UPDATE stream_partitions p SET next = u.next, bytes = p.bytes + u.bytes, last_timestamp = u.last_timestamp,
    appended = p.appended + u.appended, appended_bytes = p.appended_bytes + u.bytes,
    duplicates = p.duplicates + u.duplicates
  FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
    AS u(partition, next, bytes, last_timestamp, appended, duplicates)
  WHERE p.stream_id = $1 AND p.partition = u.partition`;

/**
 * One read of a partition, from one snapshot. $1 name, $2 partition, $3 from offset (NULL: from the
 * time $4), $4 time, $5 limit, $6 bytesMax. The first row (record_offset -1) is the state: the
 * stream's partitions, the partition's oldest and next (NULL when it has no such partition) and the
 * offset the read starts from; no row when the stream does not exist. Then the records from there (if
 * it is within [oldest, next)), in offset order, at most $5, cut once $6 bytes of bodies are passed
 * (the first always comes).
 */
export const streamRead = `
  WITH s AS (SELECT stream_id, partitions FROM streams WHERE name = $1),
  p AS (SELECT p.oldest, p.next FROM stream_partitions p, s WHERE p.stream_id = s.stream_id AND p.partition = $2),
  f AS (
    SELECT coalesce($3::bigint, (
      SELECT min(r.record_offset) FROM stream_records r, s, p
      WHERE r.stream_id = s.stream_id AND r.partition = $2 AND r.timestamp >= $4::bigint
        AND r.record_offset >= p.oldest
    ), (SELECT next FROM p)) AS from_offset
  ),
  r AS (
    SELECT r.record_offset, r.timestamp, r.key, r.content_type, r.headers, r.body, r.bytes
    FROM stream_records r, s, p, f
    WHERE r.stream_id = s.stream_id AND r.partition = $2 AND r.record_offset >= f.from_offset
      AND f.from_offset >= p.oldest AND r.record_offset < p.next
    ORDER BY r.record_offset LIMIT $5
  ),
  cut AS (
    SELECT r.*, sum(r.bytes) OVER (ORDER BY r.record_offset) - r.bytes AS before,
      row_number() OVER (ORDER BY r.record_offset) AS n
    FROM r
  )
  SELECT -1::float8 AS record_offset, s.partitions, p.oldest, p.next, f.from_offset,
    NULL::bigint AS timestamp, NULL::text AS key, NULL::text AS content_type, NULL::text AS headers,
    NULL::bytea AS body
  FROM s LEFT JOIN p ON true, f
  UNION ALL
  (SELECT c.record_offset, NULL, NULL, NULL, NULL, c.timestamp, c.key, c.content_type, c.headers, c.body
   FROM cut c WHERE c.n = 1 OR c.before + c.bytes <= $6 ORDER BY c.record_offset)`;

/** $1 streamId, $2 partition. Locks the head for a sweep. Returns: { oldest, next, bytes }. */
export const streamPartitionLock = `
  SELECT oldest, next, bytes FROM stream_partitions WHERE stream_id = $1 AND partition = $2 FOR UPDATE`;

/** $1 streamId, $2 partition, $3 limit. Returns: { record_offset, timestamp, bytes } oldest first. */
export const streamOldestSizes = `
  SELECT record_offset, timestamp, bytes FROM stream_records
  WHERE stream_id = $1 AND partition = $2 ORDER BY record_offset LIMIT $3`;

/**
 * $1 streamId, $2 partition, $3 cut (the new oldest). Deletes the records below it and moves the head.
 * Returns: { expired } the records deleted.
 */
export const streamPartitionTrim = `
  WITH gone AS (
    DELETE FROM stream_records WHERE stream_id = $1 AND partition = $2 AND record_offset < $3
    RETURNING bytes
  ),
  moved AS (
    UPDATE stream_partitions SET oldest = $3,
      bytes = bytes - (SELECT coalesce(sum(bytes), 0) FROM gone),
      expired = expired + (SELECT count(*) FROM gone)
    WHERE stream_id = $1 AND partition = $2
  )
  SELECT count(*)::float8 AS expired FROM gone`;

/** $1 streamId, $2 now, $3 limit. Forgets up to $3 dedupIds whose window ended. */
export const streamDedupForget = `
  DELETE FROM stream_dedup WHERE stream_id = $1 AND dedup_id IN (
    SELECT dedup_id FROM stream_dedup WHERE stream_id = $1 AND expires_at <= $2 LIMIT $3)`;

/** $1 streamId. Returns: { partition, oldest, next } of every partition, in partition order. */
export const streamHeads = `
  SELECT partition, oldest, next FROM stream_partitions WHERE stream_id = $1 ORDER BY partition`;

/** $1 streamId, $2 time. Returns: { partition, found } the first offset of each partition appended at
 * or after $2 (NULL: none). */
export const streamOffsetsAtTime = `
  SELECT p.partition, (SELECT min(r.record_offset) FROM stream_records r
    WHERE r.stream_id = $1 AND r.partition = p.partition AND r.timestamp >= $2 AND r.record_offset >= p.oldest)
    AS found
  FROM stream_partitions p WHERE p.stream_id = $1 ORDER BY p.partition`;

/** $1 streamId, $2 group, $3 state (JSON). Creates the group unless it exists. */
export const streamGroupEnsure = `
  INSERT INTO stream_groups (stream_id, name, state) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`;

/** $1 streamId, $2 group. Returns: { state } locked until commit: group calls apply one at a time. */
export const streamGroupLock = `SELECT state FROM stream_groups WHERE stream_id = $1 AND name = $2 FOR UPDATE`;

/** $1 streamId, $2 group, $3 state (JSON). */
export const streamGroupSave = `UPDATE stream_groups SET state = $3 WHERE stream_id = $1 AND name = $2`;

/** $1 streamId, $2 group. Returns: the rows deleted. */
export const streamGroupDelete = `DELETE FROM stream_groups WHERE stream_id = $1 AND name = $2`;

/** $1 name. Returns: { name, state } of each group of the stream, by name (byte order). */
export const streamGroupSelectAll = `
  SELECT g.name, g.state FROM stream_groups g JOIN streams s USING (stream_id)
  WHERE s.name = $1 ORDER BY g.name COLLATE "C"`;

/** $1 streamId, $2 group, $3 state (JSON). Creates the share group, or replaces its state. Returns:
 * { created }. */
export const streamShareUpsert = `
  INSERT INTO stream_shares (stream_id, name, state) VALUES ($1, $2, $3)
  ON CONFLICT (stream_id, name) DO UPDATE SET state = excluded.state RETURNING (xmax = 0) AS created`;

/** $1 streamId, $2 group. Returns: { state } locked until commit. */
export const streamShareLock = `SELECT state FROM stream_shares WHERE stream_id = $1 AND name = $2 FOR UPDATE`;

/** $1 streamId, $2 group, $3 state (JSON). */
export const streamShareSave = `UPDATE stream_shares SET state = $3 WHERE stream_id = $1 AND name = $2`;
