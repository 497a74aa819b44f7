/**
 * The statements that write messages into a queue: the batch inserts, deduplication, and the
 * one-statement sends (with a wake-up NOTIFY, or a hand-off to waiting consumers).
 */
import { bodyOf, inFlightWhereCeilingBinds, withBodyStarts } from "./fragments.js";

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

/** The send with its wake-up NOTIFY sent separately, after the commit (cluster-link.ts announceCommitted). */
export const queueSendStatement = queueSend(false);

/**
 * The send that NOTIFYs in its own commit: one round trip where the separate NOTIFY takes two. Used
 * only while no other write of the node is in flight, since PostgreSQL serializes the commits of
 * transactions that NOTIFY (queue-send.ts queueSendInOneStatement).
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

/** $1 queue name. Returns: { oldest } the earliest publish time of the queue's messages, or NULL.
 * Names its schema: sendInTransaction runs it on the application's connection. */
export const messageOldestPublishedAtIn = (schema: string) => `
  SELECT min(m.published_at) AS oldest FROM "${schema}".messages m
  JOIN "${schema}".queues q ON q.queue_id = m.queue_id WHERE q.name = $1`;
