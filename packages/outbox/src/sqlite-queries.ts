/**
 * Every SQLite statement of the outbox, with the names of postgres-queries.ts (where the row layout is
 * drawn). Parameters are `?` in order. Differences, and why:
 *
 * - `seq` is the rowid: SQLite has one writer at a time, so rowid order is commit order and no key
 *   lock is needed (PostgreSQL takes one per key).
 * - Arrays come as JSON text read with json_each, since SQLite has no array parameters.
 * - No row locks and no NOTIFY: one relay per database file, which polls.
 */
import { outboxColumns } from "./postgres-queries.js";
import type { Tables } from "./tables.js";

export function sqliteMigrations(t: Tables): string[] {
  const rowColumns = `
    id TEXT NOT NULL UNIQUE,
    destination_kind TEXT NOT NULL CHECK (destination_kind IN ('queue', 'exchange')),
    destination_name TEXT NOT NULL,
    routing_key TEXT,
    order_key TEXT NOT NULL,
    body TEXT NOT NULL,
    body_encoding TEXT NOT NULL CHECK (body_encoding IN ('json', 'base64')),
    content_type TEXT,
    headers TEXT,
    created_at INTEGER NOT NULL`;
  return [
    `CREATE TABLE ${t.outbox} (
       seq INTEGER PRIMARY KEY,${rowColumns},
       state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
       sent_at INTEGER,
       failed_at INTEGER,
       error TEXT
     );
     CREATE INDEX ${t.index("outbox_unsent")} ON ${t.outbox} (order_key, seq) WHERE state <> 'sent';
     CREATE INDEX ${t.index("outbox_sent")} ON ${t.outbox} (sent_at) WHERE state = 'sent';
     CREATE TABLE ${t.processed} (
       consumer TEXT NOT NULL,
       message_id TEXT NOT NULL,
       processed_at INTEGER NOT NULL,
       PRIMARY KEY (consumer, message_id)
     );
     CREATE INDEX ${t.index("processed_at")} ON ${t.processed} (processed_at);
     CREATE TABLE ${t.outboxFailed} (
       seq INTEGER PRIMARY KEY,${rowColumns},
       failed_at INTEGER NOT NULL,
       error TEXT NOT NULL
     );`,
  ];
}

export function sqliteQueries(t: Tables) {
  return {
    /** Creates the migrations table if missing. */
    migrationsPrepare: `CREATE TABLE IF NOT EXISTS ${t.migrations} (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
    migrationsApplied: `SELECT version FROM ${t.migrations}`,
    /** Records version ? as applied at ? (ms). */
    migrationsRecord: `INSERT INTO ${t.migrations} (version, applied_at) VALUES (?, ?)`,

    /** Inserts one pending row: id … created_at, in column order. */
    outboxInsert: `INSERT INTO ${t.outbox}
      (id, destination_kind, destination_name, routing_key, order_key, body, body_encoding, content_type, headers, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    /** Up to ? rows, each the first unsent row of its key, in seq order, skipping the destinations in
     * the JSON array ? (`kind:name`, paused). Parameters: excluded, limit. */
    outboxClaimHeads: `SELECT ${outboxColumns.replace(/(\w+)/g, "o.$1")} FROM ${t.outbox} o
      JOIN (SELECT min(seq) AS seq FROM ${t.outbox} WHERE state <> 'sent' GROUP BY order_key) heads
        ON heads.seq = o.seq
      WHERE o.state = 'pending'
        AND (o.destination_kind || ':' || o.destination_name) NOT IN (SELECT value FROM json_each(?))
      ORDER BY o.seq LIMIT ?`,
    /** Marks the rows of the JSON array ? (seqs) sent at ? (ms). Parameters: sent_at, seqs. */
    outboxMarkSent: `UPDATE ${t.outbox} SET state = 'sent', sent_at = ? WHERE seq IN (SELECT value FROM json_each(?))`,
    /** Marks a row failed. Parameters: failed_at, error (JSON), seq. */
    outboxMarkFailed: `UPDATE ${t.outbox} SET state = 'failed', failed_at = ?, error = ? WHERE seq = ?`,
    outboxStats: `SELECT count(*) FILTER (WHERE state = 'pending') AS pending_rows,
        count(*) FILTER (WHERE state = 'failed') AS failed_rows,
        min(created_at) FILTER (WHERE state = 'pending') AS oldest_pending_created_at
      FROM ${t.outbox} WHERE state <> 'sent'`,
    /** Up to ? failed rows with the count of unsent rows of their key behind them. */
    outboxFailedList: `SELECT ${outboxColumns.replace(/(\w+)/g, "f.$1")},
        (SELECT count(*) FROM ${t.outbox} w
          WHERE w.order_key = f.order_key AND w.seq > f.seq AND w.state <> 'sent') AS waiting_behind
      FROM ${t.outbox} f WHERE f.state = 'failed' ORDER BY f.seq LIMIT ?`,
    /** Failed rows back to pending: ids in the JSON array ?, or all when it is null (given twice). */
    outboxRetry: `UPDATE ${t.outbox} SET state = 'pending', failed_at = NULL, error = NULL
      WHERE state = 'failed' AND (? IS NULL OR id IN (SELECT value FROM json_each(?)))`,
    /** Deletes the failed rows with ids in the JSON array ?. */
    outboxDrop: `DELETE FROM ${t.outbox} WHERE state = 'failed' AND id IN (SELECT value FROM json_each(?))`,
    /** Deletes up to ? rows sent before ? (ms). Parameters: sent_before, limit. */
    outboxPruneSent: `DELETE FROM ${t.outbox} WHERE seq IN
      (SELECT seq FROM ${t.outbox} WHERE state = 'sent' AND sent_at < ? LIMIT ?)`,

    /** Claims (consumer, message) at ? (ms); changes 1: claimed; 0: claimed before. */
    processedClaim: `INSERT INTO ${t.processed} (consumer, message_id, processed_at) VALUES (?, ?, ?)
      ON CONFLICT DO NOTHING`,
    /** Deletes up to ? claims made before ? (ms). Parameters: processed_before, limit. */
    processedPrune: `DELETE FROM ${t.processed} WHERE rowid IN
      (SELECT rowid FROM ${t.processed} WHERE processed_at < ? LIMIT ?)`,
  };
}
