/**
 * The SQLite store's statements over the stream tables (schema.ts, migrations 7 and 8), one named constant
 * each, with what it takes and answers. Every bound LIMIT is written `LIMIT :limit + 0` (see
 * statements.ts: a bare parameter makes SQLite prepare the statement again at each bind).
 */

/** Params: name. Returns: the stream row. */
export const streamSelectByName = "SELECT * FROM streams WHERE name = :name";

/** Returns: every stream row, by name. */
export const streamSelectAll = "SELECT * FROM streams ORDER BY name";

/** Returns: { n } the streams. */
export const streamCount = "SELECT count(*) AS n FROM streams";

/** Params: name, attributes (JSON), partitions, createdAt. Returns: the new stream_id (lastInsertRowid). */
export const streamInsert = `
  INSERT INTO streams (name, attributes, partitions, created_at)
  VALUES (:name, :attributes, :partitions, :createdAt)`;

/** Params: streamId, attributes (JSON), partitions. */
export const streamUpdate =
  "UPDATE streams SET attributes = :attributes, partitions = :partitions WHERE stream_id = :streamId";

/** Params: streamId, from, to. Adds empty partitions from..to-1. */
export const partitionsInsert = `
  WITH RECURSIVE p(n) AS (SELECT :from UNION ALL SELECT n + 1 FROM p WHERE n + 1 < :to)
  INSERT INTO stream_partitions (stream_id, partition, oldest, next, bytes, last_timestamp)
  SELECT :streamId, n, 0, 0, 0, 0 FROM p WHERE n < :to`;

/** Params: streamId. Returns: { records } retained in every partition. */
export const streamRecordsHeld =
  "SELECT coalesce(sum(next - oldest), 0) AS records FROM stream_partitions WHERE stream_id = :streamId";

/** Params: streamId. Deletes the stream; its rows in every stream table go by cascade. */
export const streamDelete = "DELETE FROM streams WHERE stream_id = :streamId";

/** Params: streamId and every counter's delta. */
export const streamAddCounters = `
  UPDATE streams SET appended = appended + :appended, appended_bytes = appended_bytes + :appendedBytes,
    duplicates = duplicates + :duplicates, expired = expired + :expired
  WHERE stream_id = :streamId`;

/** Params: streamId. Returns: { partition, oldest, next, bytes, last_timestamp } by partition. */
export const partitionSelectAll = `
  SELECT partition, oldest, next, bytes, last_timestamp FROM stream_partitions
  WHERE stream_id = :streamId ORDER BY partition`;

/** Params: streamId, partition. Returns: { oldest, next, bytes, last_timestamp }. */
export const partitionSelect = `
  SELECT oldest, next, bytes, last_timestamp FROM stream_partitions
  WHERE stream_id = :streamId AND partition = :partition`;

/** Params: streamId, partition, oldest, next, bytes, lastTimestamp. */
export const partitionUpdate = `
  UPDATE stream_partitions SET oldest = :oldest, next = :next, bytes = :bytes, last_timestamp = :lastTimestamp
  WHERE stream_id = :streamId AND partition = :partition`;

/** Params: streamId, partition, offset, timestamp, key, contentType, headers (JSON or NULL), body,
 * bodyCrc, bytes. */
export const recordInsert = `
  INSERT INTO stream_records
    (stream_id, partition, record_offset, timestamp, key, content_type, headers, body, body_crc, bytes)
  VALUES (:streamId, :partition, :offset, :timestamp, :key, :contentType, :headers, :body, :bodyCrc, :bytes)`;

/** Params: streamId, partition, from, limit. Returns: records from `from`, in offset order. */
export const recordSelectFrom = `
  SELECT record_offset, timestamp, key, content_type, headers, body, body_crc, bytes FROM stream_records
  WHERE stream_id = :streamId AND partition = :partition AND record_offset >= :from
  ORDER BY record_offset LIMIT :limit + 0`;

/** Params: streamId, partition, time. Returns: { found } the first offset at or after `time`, or NULL. */
export const recordOffsetAtTime = `
  SELECT min(record_offset) AS found FROM stream_records
  WHERE stream_id = :streamId AND partition = :partition AND timestamp >= :time`;

/** Params: streamId, partition, limit. Returns: { record_offset, timestamp, bytes } oldest first. */
export const recordSelectOldestSizes = `
  SELECT record_offset, timestamp, bytes FROM stream_records
  WHERE stream_id = :streamId AND partition = :partition ORDER BY record_offset LIMIT :limit + 0`;

/** Params: streamId, partition, offset. Deletes the records below `offset`. */
export const recordDeleteBefore = `
  DELETE FROM stream_records WHERE stream_id = :streamId AND partition = :partition AND record_offset < :offset`;

/** Params: streamId, dedupId, now. Returns: { partition, record_offset } while remembered. */
export const dedupSelect = `
  SELECT partition, record_offset FROM stream_dedup
  WHERE stream_id = :streamId AND dedup_id = :dedupId AND expires_at > :now`;

/** Params: streamId, dedupId, partition, offset, expiresAt. Replaces an expired entry of the same id. */
export const dedupUpsert = `
  INSERT OR REPLACE INTO stream_dedup (stream_id, dedup_id, partition, record_offset, expires_at)
  VALUES (:streamId, :dedupId, :partition, :offset, :expiresAt)`;

/** Params: streamId, now, limit. Deletes up to `limit` dedupIds whose window ended. */
export const dedupDeleteExpired = `
  DELETE FROM stream_dedup WHERE stream_id = :streamId AND dedup_id IN (SELECT dedup_id FROM stream_dedup
    WHERE stream_id = :streamId AND expires_at <= :now LIMIT :limit + 0)`;

/** Params: streamId, name. Returns: { state } (JSON) of the group. */
export const groupSelect = "SELECT state FROM stream_groups WHERE stream_id = :streamId AND name = :name";

/** Params: streamId, name, state (JSON). */
export const groupUpsert = `
  INSERT INTO stream_groups (stream_id, name, state) VALUES (:streamId, :name, :state)
  ON CONFLICT (stream_id, name) DO UPDATE SET state = excluded.state`;

/** Params: streamId, name. */
export const groupDelete = "DELETE FROM stream_groups WHERE stream_id = :streamId AND name = :name";

/** Params: streamId. Returns: { name } of every group, by name. */
export const groupSelectNames = "SELECT name FROM stream_groups WHERE stream_id = :streamId ORDER BY name";

/** Params: streamId, name. Returns: { state } (JSON) of the share group. */
export const shareSelect = "SELECT state FROM stream_shares WHERE stream_id = :streamId AND name = :name";

/** Params: streamId, name, state (JSON). */
export const shareUpsert = `
  INSERT INTO stream_shares (stream_id, name, state) VALUES (:streamId, :name, :state)
  ON CONFLICT (stream_id, name) DO UPDATE SET state = excluded.state`;
