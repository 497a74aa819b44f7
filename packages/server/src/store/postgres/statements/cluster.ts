/**
 * The statements of the link between nodes: NOTIFY, the housekeeping leader's lock, the migration lock.
 */
/** $1 channel, $2 payload. Queued by PostgreSQL and delivered to listeners only if the transaction
 * commits. */
export const notify = `SELECT pg_notify($1, $2)`;

/**
 * $1 lock class, $2 schema. Returns: { locked } whether this session now holds the housekeeping lock
 * of the nodes that share `schema`. The two-key form keys the lock by schema, so deployments that
 * share a database but not a schema each have their own leader.
 */
export const leaderTryLock = `SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked`;

/** $1 lock class, $2 schema. Serializes migrations of one schema until the transaction ends. */
export const migrationLock = `SELECT pg_advisory_xact_lock($1, hashtext($2))`;
