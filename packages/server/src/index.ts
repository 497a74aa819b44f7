/** The server as a library: start a broker in-process, or enqueue from an application's transaction. */
export { QueueBroker } from "./broker/queues.js";
export { type Clock, FakeClock, systemClock } from "./clock.js";
export { errorCatalog, HopperError } from "./errors.js";
export { limits, queueDefaults } from "./limits.js";
export { type Random, seededRandom, systemRandom } from "./random.js";
export { type RunningServer, type ServerOptions, startServer } from "./server.js";
export { LogStore } from "./store/log/log-store.js";
export { PostgresStore } from "./store/postgres/postgres-store.js";
export {
  type SendInTransactionOptions,
  sendInTransaction,
  type TransactionalMessage,
} from "./store/postgres/send-in-transaction.js";
export { SqliteStore } from "./store/sqlite/sqlite-store.js";
export type { Store } from "./store/store.js";
