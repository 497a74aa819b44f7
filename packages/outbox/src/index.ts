export {
  dropFailed,
  type MigrateOptions,
  migrate,
  type OutboxStatus,
  outboxStatus,
  retryFailed,
} from "./admin.js";
export { type OutboxClock, type RandomFloat, systemClock, systemRandom } from "./clock.js";
export type { FailedRow, OutboxDatabase, OutboxStats } from "./driver.js";
export {
  type Destination,
  type OutboxEvent,
  type OutboxRow,
  outboxIdHeader,
  type RowState,
} from "./event.js";
export { outboxLimits } from "./limits.js";
export {
  type IdentifiedMessage,
  type ProcessOnceHandlerOptions,
  type ProcessOnceOptions,
  type ProcessOnceResult,
  processedMessageId,
  processOnce,
} from "./process-once.js";
export type { RecordedError } from "./publish-errors.js";
export { type Relay, type RelayMetrics, type RelayOptions, runRelay } from "./relay.js";
export type { TableOptions, WalNames, WalOptions } from "./tables.js";
export { uuid7 } from "./uuid7.js";
export type { WalSetup } from "./wal-setup.js";
export { type WriteOutboxOptions, type WrittenEvent, writeOutbox } from "./write-outbox.js";
