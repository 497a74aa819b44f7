/**
 * Every SQL statement the PostgreSQL store runs, one named constant each, kept in one file per entity
 * beside this one, each with what it does, its parameters ($n, in order) and what it returns. Batches
 * travel as arrays and are expanded with unnest(), so one statement handles a whole batch in one round
 * trip; a batch's bodies travel as one bytea with their lengths instead (fragments.ts bodyOf). A
 * parameter documented as "groups (NULL: any)" restricts a statement to FIFO groups whose advisory
 * locks the transaction holds. Callers import this module as `sql` and name a statement `sql.name`.
 */
export * from "./cluster.js";
export * from "./exchanges.js";
export * from "./inboxes.js";
export * from "./leases.js";
export * from "./messages.js";
export * from "./queues.js";
export * from "./receipts.js";
export * from "./sends.js";
export * from "./streams.js";
