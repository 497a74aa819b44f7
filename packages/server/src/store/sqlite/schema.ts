/**
 * The SQLite schema, as an ordered list of migrations. `PRAGMA user_version` records how many have
 * been applied; each runs in its own transaction, so a crash mid-migration leaves the last version.
 *
 * messages row layout (one row per message in a queue):
 *
 *   seq            rowid; arrival order, and the first half of a receipt
 *   queue_id       the owning queue
 *   id             UUIDv7 given at publish; kept when the message is dead-lettered
 *   body           the bytes as published
 *   visible_at     when it can next be leased: publish time + delay, a lease's expiry, or a nack's retry
 *   lease_token    NULL, or the random token of the latest lease (the second half of the receipt).
 *                  visible_at > now with a token = in flight; without a token = delayed.
 *                  A lease that expires needs no write: once visible_at <= now the row is available
 *                  again, and its token still accepts a late ack until someone else leases it.
 *   priority       0–9; a standard queue leases higher priorities first
 *   dedup_id       the deduplication id it was stored with, if the queue deduplicates
 *   group_key      FIFO queues only: its group, the key or "" without one; NULL in a standard queue
 *   head           FIFO queues only: 1 on the oldest message (lowest seq) of its group. Only heads are
 *                  leased, so a group has at most one message in flight and is delivered in order;
 *                  whatever removes a head makes the next message of its group the head in the same
 *                  transaction. (One writer, so no lock is needed to keep this true.)
 *   body_crc       the CRC-32 of body as stored, checked whenever the body leaves the store: SQLite keeps no
 *                  page checksums, so a byte changed on disk would otherwise be delivered as the message.
 *                  NULL on a row stored before the column existed, which is not checked. A dead-letter
 *                  copy keeps its original's, so a damaged body stays detectable wherever it goes.
 *   corrupt        1 on a message whose body failed that check and that had no dead-letter target: it is
 *                  never leased again (its visible_at is in the past and its lease_token NULL, so it
 *                  counts in no other state) and waits for a purge.
 *
 * dedup remembers, per queue, each dedupId until its window ends (expires_at), acked or not.
 *
 * commit_count holds one row: the number of group commits made, bumped inside each one. The same
 * number is written to a side file after each commit (commit-count.ts), so that a start can tell when
 * the WAL lost committed transactions (docs/reliability.md).
 */
export const migrations: readonly string[] = [
  `
  CREATE TABLE queues (
    queue_id      INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL,
    attributes    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    published     INTEGER NOT NULL DEFAULT 0,
    delivered     INTEGER NOT NULL DEFAULT 0,
    redelivered   INTEGER NOT NULL DEFAULT 0,
    acked         INTEGER NOT NULL DEFAULT 0,
    nacked        INTEGER NOT NULL DEFAULT 0,
    expired       INTEGER NOT NULL DEFAULT 0,
    dead_lettered INTEGER NOT NULL DEFAULT 0,
    purged        INTEGER NOT NULL DEFAULT 0
  ) STRICT;

  CREATE TABLE messages (
    seq                INTEGER PRIMARY KEY,
    queue_id           INTEGER NOT NULL,
    id                 TEXT NOT NULL,
    body               BLOB NOT NULL,
    content_type       TEXT NOT NULL,
    headers            TEXT,
    key                TEXT,
    published_at       INTEGER NOT NULL,
    visible_at         INTEGER NOT NULL,
    delivery_count     INTEGER NOT NULL DEFAULT 0,
    first_delivered_at INTEGER,
    lease_token        INTEGER
  ) STRICT;

  -- Leasing scans this in visibility order; lease_token is in the key so that counting in-flight
  -- versus delayed messages reads the index alone.
  CREATE INDEX messages_by_visibility ON messages (queue_id, visible_at, lease_token);
  -- The oldest message's age and the retention sweep read this.
  CREATE INDEX messages_by_publish ON messages (queue_id, published_at);
  `,
  `
  CREATE TABLE exchanges (
    exchange_id INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    alternate   TEXT,
    created_at  INTEGER NOT NULL
  ) STRICT;

  -- A binding routes from an exchange to a queue or another exchange. Destinations are kept by name:
  -- deleting a queue or exchange deletes the bindings to it in the same transaction.
  CREATE TABLE bindings (
    exchange_id      INTEGER NOT NULL REFERENCES exchanges ON DELETE CASCADE,
    destination_kind TEXT NOT NULL,
    destination      TEXT NOT NULL,
    pattern          TEXT NOT NULL,
    PRIMARY KEY (exchange_id, destination_kind, destination, pattern)
  ) STRICT;
  CREATE INDEX bindings_by_destination ON bindings (destination_kind, destination);
  `,
  `
  ALTER TABLE queues ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE queues ADD COLUMN redriven INTEGER NOT NULL DEFAULT 0;

  ALTER TABLE messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE messages ADD COLUMN dedup_id TEXT;
  ALTER TABLE messages ADD COLUMN group_key TEXT;
  ALTER TABLE messages ADD COLUMN head INTEGER NOT NULL DEFAULT 0;

  -- Messages above priority 0 are leased first; the common case, priority 0, adds no index entry.
  CREATE INDEX messages_by_priority ON messages (queue_id, priority DESC, visible_at) WHERE priority > 0;
  -- A FIFO group's messages in order: the next head is the first of these.
  CREATE INDEX messages_by_group ON messages (queue_id, group_key, seq) WHERE group_key IS NOT NULL;
  -- What a FIFO queue can lease: the heads, in visibility order.
  CREATE INDEX messages_heads ON messages (queue_id, visible_at) WHERE head = 1;

  CREATE TABLE dedup (
    queue_id   INTEGER NOT NULL,
    dedup_id   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue_id, dedup_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX dedup_by_expiry ON dedup (queue_id, expires_at);
  `,
  `
  ALTER TABLE messages ADD COLUMN body_crc INTEGER;
  ALTER TABLE messages ADD COLUMN corrupt INTEGER NOT NULL DEFAULT 0;
  -- Counting a queue's corrupt messages reads this, empty unless something was damaged.
  CREATE INDEX messages_corrupt ON messages (queue_id) WHERE corrupt = 1;

  CREATE TABLE commit_count (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    commits INTEGER NOT NULL
  ) STRICT;
  INSERT INTO commit_count (id, commits) VALUES (1, 0);
  `,
  `
  -- Inboxes (store/embedded/inboxes.ts): a namespace, its recipients' logs, each append's body once,
  -- device cursors, and the message ids remembered for duplicates. A recipient's retained entries are
  -- the contiguous range [oldest, head] (the engine's invariant), so its oldest is MIN(seq).
  CREATE TABLE inboxes (
    inbox_id          INTEGER PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    attributes        TEXT NOT NULL,
    epoch             TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    appended          INTEGER NOT NULL DEFAULT 0,
    duplicates        INTEGER NOT NULL DEFAULT 0,
    skipped           INTEGER NOT NULL DEFAULT 0,
    acked             INTEGER NOT NULL DEFAULT 0,
    expired           INTEGER NOT NULL DEFAULT 0,
    overflowed        INTEGER NOT NULL DEFAULT 0,
    devices_forgotten INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  CREATE TABLE inbox_recipients (
    inbox_id      INTEGER NOT NULL REFERENCES inboxes ON DELETE CASCADE,
    recipient     TEXT NOT NULL,
    head          INTEGER NOT NULL,
    skipped_after INTEGER,
    PRIMARY KEY (inbox_id, recipient)
  ) STRICT, WITHOUT ROWID;
  -- body_crc: the CRC-32 of body, checked when an entry is read (SQLite keeps no page checksums).
  CREATE TABLE inbox_bodies (
    body_id      INTEGER PRIMARY KEY,
    inbox_id     INTEGER NOT NULL REFERENCES inboxes ON DELETE CASCADE,
    message_id   TEXT NOT NULL,
    body         BLOB NOT NULL,
    body_crc     INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    headers      TEXT
  ) STRICT;
  CREATE TABLE inbox_entries (
    inbox_id    INTEGER NOT NULL REFERENCES inboxes ON DELETE CASCADE,
    recipient   TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    body_id     INTEGER NOT NULL,
    appended_at INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, recipient, seq)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX inbox_entries_by_body ON inbox_entries (body_id);
  CREATE INDEX inbox_entries_by_age ON inbox_entries (inbox_id, appended_at);
  CREATE TABLE inbox_devices (
    inbox_id     INTEGER NOT NULL REFERENCES inboxes ON DELETE CASCADE,
    recipient    TEXT NOT NULL,
    device       TEXT NOT NULL,
    cursor       INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, recipient, device)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX inbox_devices_by_seen ON inbox_devices (inbox_id, last_seen_at);
  CREATE TABLE inbox_ids (
    inbox_id   INTEGER NOT NULL REFERENCES inboxes ON DELETE CASCADE,
    recipient  TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, recipient, message_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX inbox_ids_by_expiry ON inbox_ids (inbox_id, expires_at);
  `,
  `
  -- Inbox appends without an index row per entry. An append's body row now carries what entries'
  -- secondary indexes and the per-entry id rows gave: refs (its entries still held: the body goes at
  -- 0), appended_at (expiry by age walks bodies, not entries), recipients (its [recipient, seq]
  -- pairs, which expiry deletes and duplicate checks read) and ids_expire_at (its message id is
  -- remembered for each of its recipients until then; NULL: not remembered). So an entry is one row in
  -- one B-tree; inbox_ids holds only the ids of entries trimmed before their window ended (copied
  -- at the trim) and those of bodies stored before this migration.
  ALTER TABLE inbox_bodies ADD COLUMN refs INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE inbox_bodies ADD COLUMN appended_at INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE inbox_bodies ADD COLUMN recipients TEXT NOT NULL DEFAULT '[]';
  ALTER TABLE inbox_bodies ADD COLUMN ids_expire_at INTEGER;
  UPDATE inbox_bodies SET
    refs = (SELECT count(*) FROM inbox_entries e WHERE e.body_id = inbox_bodies.body_id),
    appended_at = coalesce(
      (SELECT min(e.appended_at) FROM inbox_entries e WHERE e.body_id = inbox_bodies.body_id), 0),
    recipients = coalesce(
      (SELECT json_group_array(json_array(e.recipient, e.seq)) FROM inbox_entries e
       WHERE e.body_id = inbox_bodies.body_id), '[]');
  DROP INDEX inbox_entries_by_body;
  DROP INDEX inbox_entries_by_age;
  CREATE INDEX inbox_bodies_by_message ON inbox_bodies (inbox_id, message_id);
  CREATE INDEX inbox_bodies_by_age ON inbox_bodies (inbox_id, appended_at);
  `,
  `
  -- Streams (store/embedded/streams.ts): a stream, one head row per partition, its records, and the
  -- dedupIds remembered for its window. A partition's retained records are the contiguous range
  -- [oldest, next) (the engine's invariant); bytes is the sum of their body sizes.
  CREATE TABLE streams (
    stream_id      INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    attributes     TEXT NOT NULL,
    partitions     INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    appended       INTEGER NOT NULL DEFAULT 0,
    appended_bytes INTEGER NOT NULL DEFAULT 0,
    duplicates     INTEGER NOT NULL DEFAULT 0,
    expired        INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  CREATE TABLE stream_partitions (
    stream_id      INTEGER NOT NULL REFERENCES streams ON DELETE CASCADE,
    partition      INTEGER NOT NULL,
    oldest         INTEGER NOT NULL,
    next           INTEGER NOT NULL,
    bytes          INTEGER NOT NULL,
    last_timestamp INTEGER NOT NULL,
    PRIMARY KEY (stream_id, partition)
  ) STRICT, WITHOUT ROWID;
  -- A rowid table: its rows hold bodies of up to 1 MiB, which WITHOUT ROWID tables store badly.
  -- body_crc: the CRC-32 of body, checked when a record is read (SQLite keeps no page checksums).
  CREATE TABLE stream_records (
    stream_id     INTEGER NOT NULL REFERENCES streams ON DELETE CASCADE,
    partition     INTEGER NOT NULL,
    record_offset INTEGER NOT NULL,
    timestamp     INTEGER NOT NULL,
    key           TEXT,
    content_type  TEXT NOT NULL,
    headers       TEXT,
    body          BLOB NOT NULL,
    body_crc      INTEGER NOT NULL,
    bytes         INTEGER NOT NULL
  ) STRICT;
  CREATE UNIQUE INDEX stream_records_by_offset ON stream_records (stream_id, partition, record_offset);
  -- Timestamps never go back within a partition, so this index is in offset order too.
  CREATE INDEX stream_records_by_time ON stream_records (stream_id, partition, timestamp);
  CREATE TABLE stream_dedup (
    stream_id     INTEGER NOT NULL REFERENCES streams ON DELETE CASCADE,
    dedup_id      TEXT NOT NULL,
    partition     INTEGER NOT NULL,
    record_offset INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (stream_id, dedup_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX stream_dedup_by_expiry ON stream_dedup (stream_id, expires_at);
  `,
  `
  -- A stream's consumer groups (store/embedded/stream-groups.ts): each group's state as one JSON
  -- value (model/stream-group.ts GroupState), which every group call reads and writes whole.
  CREATE TABLE stream_groups (
    stream_id INTEGER NOT NULL REFERENCES streams ON DELETE CASCADE,
    name      TEXT NOT NULL,
    state     TEXT NOT NULL,
    PRIMARY KEY (stream_id, name)
  ) STRICT, WITHOUT ROWID;
  -- A stream's share groups (store/embedded/stream-shares.ts), each one JSON state as groups are
  -- (model/stream-share.ts ShareState).
  CREATE TABLE stream_shares (
    stream_id INTEGER NOT NULL REFERENCES streams ON DELETE CASCADE,
    name      TEXT NOT NULL,
    state     TEXT NOT NULL,
    PRIMARY KEY (stream_id, name)
  ) STRICT, WITHOUT ROWID;
  `,
];
