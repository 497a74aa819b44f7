/**
 * Every PostgreSQL statement of the outbox, one named entry each, built from the application's table
 * names (checked by resolveTables, so quoting them is safe). Parameters are `$n`; each comment says what
 * a statement does and what it takes. sqlite-queries.ts has the same names; where they differ, both say
 * why.
 *
 * The outbox row, in both databases:
 *
 *   seq             insertion order (identity / rowid); the relay's order within a key
 *   id              UUIDv7, sent as the header x-outbox-id and as the dedupId
 *   destination_*   kind 'queue' or 'exchange', its name, and the routing key of an exchange publish
 *   order_key       the row's key, or '' for keyless rows (a Hopper key is never empty): one order each
 *   body            JSON text, or base64 when body_encoding is 'base64'
 *   state           'pending' → 'sent' (after the broker's confirm), or 'failed' (refused; key waits)
 */
import type { Tables, WalNames } from "./tables.js";

export const outboxColumns =
  "seq, id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, state, created_at, sent_at, failed_at, error";

/** The migrations, in order; version n is entry n - 1. Each runs in one transaction. */
export function postgresMigrations(t: Tables): string[] {
  const rowColumns = `
    id text NOT NULL UNIQUE,
    destination_kind text NOT NULL CHECK (destination_kind IN ('queue', 'exchange')),
    destination_name text NOT NULL,
    routing_key text,
    order_key text NOT NULL,
    body text NOT NULL,
    body_encoding text NOT NULL CHECK (body_encoding IN ('json', 'base64')),
    content_type text,
    headers text,
    created_at bigint NOT NULL`;
  const notifyFunction = `"${t.schema}"."${t.prefix}outbox_notify"`;
  return [
    `CREATE TABLE ${t.outbox} (
       seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,${rowColumns},
       state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
       sent_at bigint,
       failed_at bigint,
       error text
     );
     -- The relay's claim reads the first unsent row of each key; sent rows wait only for pruning.
     CREATE INDEX ${t.index("outbox_unsent")} ON ${t.outbox} (order_key, seq) WHERE state <> 'sent';
     CREATE INDEX ${t.index("outbox_sent")} ON ${t.outbox} (sent_at) WHERE state = 'sent';
     CREATE TABLE ${t.processed} (
       consumer text NOT NULL,
       message_id text NOT NULL,
       processed_at bigint NOT NULL,
       PRIMARY KEY (consumer, message_id)
     );
     CREATE INDEX ${t.index("processed_at")} ON ${t.processed} (processed_at);
     -- Where the WAL relay keeps the events the broker refused (its outbox table stays empty).
     CREATE TABLE ${t.outboxFailed} (
       seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,${rowColumns},
       failed_at bigint NOT NULL,
       error text NOT NULL
     );
     -- One notification per inserting statement wakes every listening relay on commit, never before.
     CREATE FUNCTION ${notifyFunction}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM pg_notify('${t.channel}', ''); RETURN NULL; END $$;
     CREATE TRIGGER "${t.prefix}outbox_notify" AFTER INSERT ON ${t.outbox}
       FOR EACH STATEMENT EXECUTE FUNCTION ${notifyFunction}();`,
  ];
}

export function postgresQueries(t: Tables) {
  // Over 80 lines: one object of named statements, each short and documented where it stands.
  return {
    /** Creates the schema and the migrations table if missing. No parameters. */
    migrationsPrepare: `CREATE SCHEMA IF NOT EXISTS "${t.schema}";
      CREATE TABLE IF NOT EXISTS ${t.migrations} (version integer PRIMARY KEY, applied_at bigint NOT NULL)`,
    /** Serializes concurrent migrate calls on this schema and prefix until commit. $1: a lock name. */
    migrationsLock: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
    /** The versions applied. Returns rows { version }. */
    migrationsApplied: `SELECT version FROM ${t.migrations}`,
    /** Records version $1 as applied at $2 (ms). */
    migrationsRecord: `INSERT INTO ${t.migrations} (version, applied_at) VALUES ($1, $2)`,

    /**
     * Serializes the writers of one key until they commit, so that seq order within a key is commit
     * order: otherwise a transaction that took seq 10 and commits after the one that took seq 11 would
     * let the relay publish 11 first. (SQLite has one writer at a time, so it needs no lock.) $1: the
     * lock name (tables and key).
     */
    outboxKeyLock: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
    /** Inserts one pending row. $1 id … $10 created_at (ms), in column order. Returns nothing. */
    outboxInsert: `INSERT INTO ${t.outbox}
      (id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    /**
     * Claims up to $1 rows, each the first unsent row of its key, in seq order, skipping destinations
     * in $2 (`kind:name`, paused). The row locks last until the claim's transaction ends: another relay
     * skips them, and since its snapshot still sees them unsent, it takes no later row of their keys
     * either. `o.state = 'pending'` is checked again on a row that another relay updated while this one
     * waited (READ COMMITTED re-reads it), so a row just marked sent is not taken.
     */
    outboxClaimHeads: `SELECT ${outboxColumns.replace(/(\w+)/g, "o.$1")} FROM ${t.outbox} o
      JOIN (SELECT min(seq) AS seq FROM ${t.outbox} WHERE state <> 'sent' GROUP BY order_key) heads
        ON heads.seq = o.seq
      WHERE o.state = 'pending' AND NOT ((o.destination_kind || ':' || o.destination_name) = ANY ($2::text[]))
      ORDER BY o.seq LIMIT $1
      FOR UPDATE OF o SKIP LOCKED`,
    /** Marks rows $1 (seqs) sent at $2 (ms). */
    outboxMarkSent: `UPDATE ${t.outbox} SET state = 'sent', sent_at = $2 WHERE seq = ANY ($1::bigint[])`,
    /** Marks row $1 failed at $2 (ms) with error $3 (JSON). */
    outboxMarkFailed: `UPDATE ${t.outbox} SET state = 'failed', failed_at = $2, error = $3 WHERE seq = $1`,
    /** Counts pending and failed rows (the failed table's too) and the oldest pending row's
     * created_at. One row. */
    outboxStats: `SELECT count(*) FILTER (WHERE state = 'pending') AS pending_rows,
        count(*) FILTER (WHERE state = 'failed') + (SELECT count(*) FROM ${t.outboxFailed}) AS failed_rows,
        min(created_at) FILTER (WHERE state = 'pending') AS oldest_pending_created_at
      FROM ${t.outbox} WHERE state <> 'sent'`,
    /**
     * Up to $1 failed rows: the outbox table's in seq order, each with the count of unsent rows of its
     * key behind it, then the WAL relay's failed table (nothing waits behind those: in WAL mode the
     * key goes on).
     */
    outboxFailedList: `SELECT * FROM (
        SELECT ${outboxColumns.replace(/(\w+)/g, "f.$1")},
          (SELECT count(*) FROM ${t.outbox} w
            WHERE w.order_key = f.order_key AND w.seq > f.seq AND w.state <> 'sent') AS waiting_behind,
          0 AS from_wal
        FROM ${t.outbox} f WHERE f.state = 'failed'
        UNION ALL
        SELECT ${outboxColumns.replace("state", "'failed' AS state").replace("sent_at", "NULL::bigint AS sent_at")},
          0 AS waiting_behind, 1 AS from_wal
        FROM ${t.outboxFailed}
      ) failed ORDER BY from_wal, seq LIMIT $1`,
    /** Makes failed rows pending again: those with ids in $1, or all when $1 is null. Returns the count. */
    outboxRetry: `UPDATE ${t.outbox} SET state = 'pending', failed_at = NULL, error = NULL
      WHERE state = 'failed' AND ($1::text[] IS NULL OR id = ANY ($1::text[]))`,
    /** Deletes the failed rows with ids in $1; the rows behind them in their keys go on. */
    outboxDrop: `DELETE FROM ${t.outbox} WHERE state = 'failed' AND id = ANY ($1::text[])`,
    /**
     * Retry of the WAL relay's failed events, with the ids in $1 (or all when null), one transaction
     * of three statements: copy them into the outbox, delete them from it again (the WAL mode's
     * insert-and-delete, so the relay reads them from the slot as new events), and from the failed
     * table.
     */
    outboxFailedRequeue: `INSERT INTO ${t.outbox}
      (id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, created_at)
      SELECT id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, created_at
      FROM ${t.outboxFailed} WHERE ($1::text[] IS NULL OR id = ANY ($1::text[])) ORDER BY seq`,
    outboxFailedRequeueDelete: `DELETE FROM ${t.outbox} WHERE id IN
      (SELECT id FROM ${t.outboxFailed} WHERE ($1::text[] IS NULL OR id = ANY ($1::text[])))`,
    /** Deletes the WAL relay's failed events with ids in $1 (or all when $1 is null). */
    outboxFailedDelete: `DELETE FROM ${t.outboxFailed} WHERE ($1::text[] IS NULL OR id = ANY ($1::text[]))`,
    /** WAL mode's write: deletes the row $1 (id) that the same transaction just inserted. */
    outboxDeleteInserted: `DELETE FROM ${t.outbox} WHERE id = $1`,
    /** Deletes up to $2 rows sent before $1 (ms). */
    outboxPruneSent: `DELETE FROM ${t.outbox} WHERE seq IN
      (SELECT seq FROM ${t.outbox} WHERE state = 'sent' AND sent_at < $1 LIMIT $2)`,
    /** Inserts the WAL relay's refused event. $1 id … $10 created_at as outboxInsert, $11 failed_at,
     * $12 error. A second refusal of the same event (read again after a restart) adds nothing. */
    outboxFailedInsert: `INSERT INTO ${t.outboxFailed}
      (id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, created_at, failed_at, error)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`,

    /**
     * Claims (consumer $1, message $2) at $3 (ms). rowCount 1: claimed, run the effect; 0: another
     * transaction claimed it. A concurrent claim of the same pair waits here for the first to end.
     */
    processedClaim: `INSERT INTO ${t.processed} (consumer, message_id, processed_at) VALUES ($1, $2, $3)
      ON CONFLICT DO NOTHING`,
    /** Deletes up to $2 claims made before $1 (ms). */
    processedPrune: `DELETE FROM ${t.processed} WHERE (consumer, message_id) IN
      (SELECT consumer, message_id FROM ${t.processed} WHERE processed_at < $1 LIMIT $2)`,
  };
}

/**
 * The WAL mode's statements on the replication slot and the publication (names checked by
 * resolveWalNames). The publication carries inserts only: the deletes of the insert-and-delete
 * pattern are not worth decoding.
 */
export function walQueries(t: Tables, names: WalNames) {
  return {
    /** One row { wal_level, max_slot_wal_keep_size }: what the setup checks and warns about. */
    walSettings:
      "SELECT current_setting('wal_level') AS wal_level, current_setting('max_slot_wal_keep_size') AS max_slot_wal_keep_size",
    /** One row when the publication exists. */
    walPublicationFind: `SELECT 1 FROM pg_publication WHERE pubname = '${names.publication}'`,
    walPublicationCreate: `CREATE PUBLICATION "${names.publication}" FOR TABLE ${t.outbox} WITH (publish = 'insert')`,
    /** One row { tgenabled } of the insert trigger: 'O' when it fires, 'D' when off. */
    walNotifyState: `SELECT tgenabled FROM pg_trigger
      WHERE tgrelid = '${t.outbox}'::regclass AND tgname = '${t.prefix}outbox_notify'`,
    /** Turns off the insert trigger's NOTIFY: no relay listens in WAL mode, and a NOTIFY takes a
     * lock that serializes the commits of every notifying transaction. */
    walNotifyOff: `ALTER TABLE ${t.outbox} DISABLE TRIGGER "${t.prefix}outbox_notify"`,
    /** The slot, if any: its plugin, database, confirmed position, and the WAL it holds (bytes). */
    walSlotFind: `SELECT plugin, database, wal_status, confirmed_flush_lsn,
        pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) AS lag_bytes
      FROM pg_replication_slots WHERE slot_name = '${names.slot}'`,
    /** Creates the slot in this database; it keeps WAL from now on, so events written after it are
     * never missed. */
    walSlotCreate: `SELECT pg_create_logical_replication_slot('${names.slot}', 'pgoutput')`,
    walDatabase: "SELECT current_database() AS database",
    /**
     * A non-transactional logical message with prefix $1: it passes through the slot at once, so an
     * idle relay that reads it may confirm the slot up to there (past other tables' WAL).
     */
    walTick: "SELECT pg_logical_emit_message(false, $1, '')",
  };
}

export type PostgresQueries = ReturnType<typeof postgresQueries>;
