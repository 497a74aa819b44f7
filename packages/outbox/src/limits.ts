/**
 * Every bound of the outbox relay and of processOnce, in one place. Units come last in each name; each
 * value says why it is what it is.
 */

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;

export const outboxLimits = {
  /** Rows per claim, and so per publish: Hopper's batch limit (batchSizeMax), one request at most. */
  claimRowsMax: 100,
  /** A request with no answer by then is a network failure, retried; short, so a stalled broker does
   * not hold a PostgreSQL claim (its row locks) open for long. */
  publishTimeoutMs: 10 * second,
  /** First back-off after a failed publish; doubles per failure, with full jitter. */
  backoffBaseMs: 100,
  /** The longest back-off between tries, retryable failures and pauses alike. */
  backoffMaxMs: 30 * second,
  /** A `Retry-After` longer than this is cut to it: a broker should not park the relay for hours. */
  retryAfterMsMax: 5 * minute,
  /** SQLite has no notifications: how often an idle relay looks for new rows. 50 ms keeps the
   * commit-to-publish latency near one poll while costing one indexed read per poll. */
  sqlitePollIntervalMs: 50,
  /** PostgreSQL wakes the relay by NOTIFY; it still looks this often in case a notification was lost
   * (its listening session reconnecting). */
  postgresSafetyPollIntervalMs: 5 * second,
  /** How long sent rows are kept (for `status` and debugging) before the relay deletes them. */
  sentRetentionMsDefault: day,
  /** How long processOnce remembers a (consumer, message) claim. It must outlive every redelivery and
   * every double publish of the message: a week is far beyond Hopper's default retention (4 days). */
  processedRetentionMsDefault: 7 * day,
  /** How often the relay deletes expired sent rows, and processOnce's handler expired claims. */
  pruneIntervalMs: minute,
  /** Rows deleted per prune statement, so a prune never holds locks or a write transaction for long. */
  pruneRowsMax: 5000,
  /** Failed rows listed by `status`. */
  statusRowsMax: 1000,
  /** Table prefix and schema names: a PostgreSQL identifier is at most 63 bytes, and the longest
   * derived name (`<prefix>outbox_migrations`) must fit. */
  prefixLengthMax: 40,
  schemaLengthMax: 63,
  /** A replication slot's or publication's name: PostgreSQL's identifier limit. */
  walNameLengthMax: 63,
  /** WAL mode: events read from the slot and not yet published that the relay keeps in memory; at
   * this many it stops reading (the slot keeps the rest), so a Hopper outage costs WAL on the
   * database server, bounded by max_slot_wal_keep_size, and not the relay's memory. */
  walBufferedRowsMax: 10_000,
  /** WAL mode: how often the relay tells the server its confirmed position (a standby status
   * update), well inside wal_sender_timeout (60 s by default), so a relay waiting for Hopper is not
   * disconnected; and how often an idle relay moves its slot past other tables' WAL. */
  walFeedbackIntervalMs: 10 * second,
} as const;
