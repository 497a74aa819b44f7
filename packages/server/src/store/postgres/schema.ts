/**
 * The PostgreSQL schema, as ordered migrations applied under an advisory lock, so that nodes starting
 * together migrate once. Tables live in their own schema (default "hopper"); every connection sets
 * search_path to it, so statements name tables without a schema.
 *
 * Why this shape (details in docs/cluster.md):
 * - messages: one row per message. A lease rewrites the row (visible_at, lease_token), an ack deletes
 *   it. Lease expiry needs no write at all: a row with visible_at <= now is available again.
 * - queue_counters: counters are spread over 16 rows per queue, and each transaction adds to one at
 *   random. One row per queue would serialize every writer of the queue on its row lock until commit;
 *   16 rows make that rare. The columns are not indexed, so the updates are HOT and leave no index
 *   bloat, and the fillfactor leaves room in the page for them. Summed, they give a queue's depth
 *   (store.ts depthOf), which maxDepth is enforced against.
 * - messages.priority: 0–9; a standard queue leases higher priorities first. Only rows above 0 enter
 *   messages_by_priority, so queues that never use priorities pay nothing for it.
 * - messages.dedup_id: the deduplication id the message was stored with, if its queue deduplicates.
 * - messages.group_key (FIFO queues only, NULL in standard ones): the message's group, its key or ""
 *   without one. messages.head (FIFO only): true on the oldest message (lowest seq) of its group, the
 *   only one a lease may take, so a group has at most one message in flight and is delivered in order.
 *   Whatever removes a head makes the group's next message the head in the same transaction. Every
 *   transaction that adds to a group or removes its head first takes the group's advisory lock
 *   (statements.groupLockMany), so that concurrent writers on other nodes agree on which row is the
 *   head; the lock order is written in message-writes.ts.
 * - dedup: per queue, each dedupId with the id of the message stored under it, until its window ends
 *   (expires_at), acked or not. The primary key makes concurrent sends of one dedupId store it once.
 * - inboxes (migration 4; inbox-store.ts has the lock order): a namespace row, its counters spread over
 *   shards as a queue's are, and per recipient one inbox_recipients row (head, trimmed_through, the head
 *   it was last skipped after), locked by every write to that recipient's log. oldest = trimmed_through
 *   + 1 and depth = head - trimmed_through: the retained entries are always that contiguous range. An
 *   append stores its message once in inbox_bodies, whose `entries` counts the entries naming it; the
 *   trim that takes it to 0 deletes it. inbox_ids remembers (recipient, message id) → seq until
 *   expires_at. Inbox tables have no foreign keys: inboxDelete deletes by inbox_id from each, and an
 *   inbox_id is never reused, so nothing of a deleted namespace can show in one created again; the
 *   append's inserts pay for no key checks.
 */
/** Counters are spread over this many rows per queue (queue_counters, above): the schema's, not a limit. */
export const counterShards = 16;

/** Schema names are put into SQL as identifiers, so they are checked against this first. */
export const schemaPattern = /^[a-z_][a-z0-9_]{0,62}$/;

export function checkSchemaName(schema: string): void {
  if (!schemaPattern.test(schema)) throw new Error(`schema "${schema}" must match ${schemaPattern}`);
}

export const migrations: readonly string[] = [
  `
  CREATE TABLE queues (
    queue_id   bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    kind       text NOT NULL,
    attributes jsonb NOT NULL,
    created_at bigint NOT NULL
  );

  CREATE TABLE queue_counters (
    queue_id      bigint NOT NULL REFERENCES queues ON DELETE CASCADE,
    shard         smallint NOT NULL,
    published     bigint NOT NULL DEFAULT 0,
    delivered     bigint NOT NULL DEFAULT 0,
    redelivered   bigint NOT NULL DEFAULT 0,
    acked         bigint NOT NULL DEFAULT 0,
    nacked        bigint NOT NULL DEFAULT 0,
    expired       bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    purged        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, shard)
  ) WITH (fillfactor = 50);

  CREATE TABLE messages (
    seq                bigserial PRIMARY KEY,
    queue_id           bigint NOT NULL,
    id                 text NOT NULL,
    body               bytea NOT NULL,
    content_type       text NOT NULL,
    headers            text,
    key                text,
    published_at       bigint NOT NULL,
    visible_at         bigint NOT NULL,
    delivery_count     integer NOT NULL DEFAULT 0,
    first_delivered_at bigint,
    lease_token        bigint
  );

  -- Leasing scans this in visibility order; SKIP LOCKED lets concurrent nodes take different rows.
  CREATE INDEX messages_by_visibility ON messages (queue_id, visible_at);
  -- The oldest message's age and the retention sweep read this.
  CREATE INDEX messages_by_publish ON messages (queue_id, published_at);
  -- Counting in-flight messages (for the in-flight ceiling) reads only rows that were ever leased.
  CREATE INDEX messages_leased ON messages (queue_id, visible_at) WHERE lease_token IS NOT NULL;
  `,
  `
  CREATE TABLE exchanges (
    exchange_id bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    type        text NOT NULL,
    alternate   text,
    created_at  bigint NOT NULL
  );

  -- A binding routes from an exchange to a queue or another exchange. Destinations are kept by name:
  -- deleting a queue or exchange deletes the bindings to it in the same transaction.
  CREATE TABLE bindings (
    exchange_id      bigint NOT NULL REFERENCES exchanges ON DELETE CASCADE,
    destination_kind text NOT NULL,
    destination      text NOT NULL,
    pattern          text NOT NULL,
    PRIMARY KEY (exchange_id, destination_kind, destination, pattern)
  );
  CREATE INDEX bindings_by_destination ON bindings (destination_kind, destination);
  `,
  `
  ALTER TABLE queue_counters
    ADD COLUMN dropped bigint NOT NULL DEFAULT 0,
    ADD COLUMN redriven bigint NOT NULL DEFAULT 0;

  ALTER TABLE messages
    ADD COLUMN priority smallint NOT NULL DEFAULT 0,
    ADD COLUMN dedup_id text,
    ADD COLUMN group_key text,
    ADD COLUMN head boolean NOT NULL DEFAULT false;

  -- Messages above priority 0 are leased first; the common case, priority 0, adds no index entry.
  CREATE INDEX messages_by_priority ON messages (queue_id, priority DESC, visible_at) WHERE priority > 0;
  -- A FIFO group's messages in order: whether a group is empty, and which message is next.
  CREATE INDEX messages_by_group ON messages (queue_id, group_key, seq) WHERE group_key IS NOT NULL;
  -- What a FIFO queue can lease: its heads, in visibility order.
  CREATE INDEX messages_heads ON messages (queue_id, visible_at) WHERE head;

  -- Messages stored in FIFO queues before groups existed join them: each group's oldest is its head.
  UPDATE messages m SET group_key = coalesce(m.key, '')
  FROM queues q WHERE q.queue_id = m.queue_id AND q.kind = 'fifo';
  UPDATE messages SET head = true WHERE seq IN (
    SELECT min(seq) FROM messages WHERE group_key IS NOT NULL GROUP BY queue_id, group_key);

  CREATE TABLE dedup (
    queue_id   bigint NOT NULL REFERENCES queues ON DELETE CASCADE,
    dedup_id   text NOT NULL,
    message_id text NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (queue_id, dedup_id)
  );
  -- The retention sweep forgets the dedupIds whose window ended.
  CREATE INDEX dedup_by_expiry ON dedup (queue_id, expires_at);
  `,
  `
  CREATE TABLE inboxes (
    inbox_id   bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    epoch      text NOT NULL,
    attributes jsonb NOT NULL,
    created_at bigint NOT NULL
  );

  CREATE TABLE inbox_counters (
    inbox_id          bigint NOT NULL,
    shard             smallint NOT NULL,
    appended          bigint NOT NULL DEFAULT 0,
    duplicates        bigint NOT NULL DEFAULT 0,
    skipped           bigint NOT NULL DEFAULT 0,
    acked             bigint NOT NULL DEFAULT 0,
    expired           bigint NOT NULL DEFAULT 0,
    overflowed        bigint NOT NULL DEFAULT 0,
    devices_forgotten bigint NOT NULL DEFAULT 0,
    recipients        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (inbox_id, shard)
  ) WITH (fillfactor = 50);

  -- Rewritten by every append to the recipient: room in the page keeps the updates HOT.
  CREATE TABLE inbox_recipients (
    inbox_id        bigint NOT NULL,
    recipient       text NOT NULL,
    head            bigint NOT NULL DEFAULT 0,
    trimmed_through bigint NOT NULL DEFAULT 0,
    skipped_after   bigint,
    PRIMARY KEY (inbox_id, recipient)
  ) WITH (fillfactor = 70);

  CREATE TABLE inbox_bodies (
    body_id      bigserial PRIMARY KEY,
    inbox_id     bigint NOT NULL,
    message_id   text NOT NULL,
    body         bytea NOT NULL,
    content_type text NOT NULL,
    headers      text NOT NULL,
    entries      integer NOT NULL
  );
  CREATE INDEX inbox_bodies_by_inbox ON inbox_bodies (inbox_id);

  CREATE TABLE inbox_entries (
    inbox_id    bigint NOT NULL,
    recipient   text NOT NULL,
    seq         bigint NOT NULL,
    body_id     bigint NOT NULL,
    appended_at bigint NOT NULL,
    PRIMARY KEY (inbox_id, recipient, seq)
  );
  -- The maxAgeMs sweep finds the oldest entries of a namespace here.
  CREATE INDEX inbox_entries_by_age ON inbox_entries (inbox_id, appended_at);

  CREATE TABLE inbox_devices (
    inbox_id     bigint NOT NULL,
    recipient    text NOT NULL,
    device       text NOT NULL,
    cursor       bigint NOT NULL,
    last_seen_at bigint NOT NULL,
    PRIMARY KEY (inbox_id, recipient, device)
  );
  -- The sweep finds the devices unseen for forgetDeviceAfterMs here.
  CREATE INDEX inbox_devices_by_last_seen ON inbox_devices (inbox_id, last_seen_at);

  CREATE TABLE inbox_ids (
    inbox_id   bigint NOT NULL,
    recipient  text NOT NULL,
    message_id text NOT NULL,
    seq        bigint NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (inbox_id, recipient, message_id)
  );
  -- The sweep forgets the ids whose window ended.
  CREATE INDEX inbox_ids_by_expiry ON inbox_ids (inbox_id, expires_at);
  `,
  `
  -- Streams (migration 5; stream-store.ts has the lock order): a stream row, one row per partition
  -- (its range [oldest, next), bytes, last timestamp and counters), locked FOR UPDATE by every append
  -- to the partition until commit, so that offsets commit in order; the records; the dedupIds
  -- remembered for the window.
  CREATE TABLE streams (
    stream_id  bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    attributes jsonb NOT NULL,
    partitions integer NOT NULL,
    created_at bigint NOT NULL
  );

  -- Rewritten by every append to the partition: room in the page keeps the updates HOT.
  CREATE TABLE stream_partitions (
    stream_id      bigint NOT NULL,
    partition      integer NOT NULL,
    oldest         bigint NOT NULL DEFAULT 0,
    next           bigint NOT NULL DEFAULT 0,
    bytes          bigint NOT NULL DEFAULT 0,
    last_timestamp bigint NOT NULL DEFAULT 0,
    appended       bigint NOT NULL DEFAULT 0,
    appended_bytes bigint NOT NULL DEFAULT 0,
    duplicates     bigint NOT NULL DEFAULT 0,
    expired        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (stream_id, partition)
  ) WITH (fillfactor = 70);

  CREATE TABLE stream_records (
    stream_id     bigint NOT NULL,
    partition     integer NOT NULL,
    record_offset bigint NOT NULL,
    timestamp     bigint NOT NULL,
    key           text,
    content_type  text NOT NULL,
    headers       text NOT NULL,
    body          bytea NOT NULL,
    bytes         integer NOT NULL,
    PRIMARY KEY (stream_id, partition, record_offset)
  );
  -- Reads from a time; timestamps never go back within a partition, so this is offset order too.
  CREATE INDEX stream_records_by_time ON stream_records (stream_id, partition, timestamp);

  CREATE TABLE stream_dedup (
    stream_id     bigint NOT NULL,
    dedup_id      text NOT NULL,
    partition     integer NOT NULL,
    record_offset bigint NOT NULL,
    expires_at    bigint NOT NULL,
    PRIMARY KEY (stream_id, dedup_id)
  );
  -- The sweep forgets the dedupIds whose window ended.
  CREATE INDEX stream_dedup_by_expiry ON stream_dedup (stream_id, expires_at);
  `,
  `
  -- A stream's consumer groups (migration 6, stream-groups.ts): each group's state as one jsonb value
  -- (model/stream-group.ts GroupState), locked FOR UPDATE by every group call, which reads and writes
  -- it whole, so group calls on any node apply one after another.
  CREATE TABLE stream_groups (
    stream_id bigint NOT NULL,
    name      text NOT NULL,
    state     jsonb NOT NULL,
    PRIMARY KEY (stream_id, name)
  );
  -- Share groups (stream-shares.ts), each one jsonb state (model/stream-share.ts), kept as groups are.
  CREATE TABLE stream_shares (
    stream_id bigint NOT NULL,
    name      text NOT NULL,
    state     jsonb NOT NULL,
    PRIMARY KEY (stream_id, name)
  );
  `,
];
