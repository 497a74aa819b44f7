export {
  HopperClient,
  type HopperClientOptions,
  type NackOptions,
  type PeekOptions,
  type PutQueueResult,
  type ReceiveOptions,
} from "./client.js";
export { type Clock, type ClockTimer, systemClock } from "./clock.js";
export type { ConsumeOptions, Consumer } from "./consume.js";
export { clientErrorCodes, HopperError, type HopperErrorInit, UnrecoverableError } from "./errors.js";
export {
  type InboxCursor,
  type InboxCursorStore,
  type InboxEntry,
  Inboxes,
  type InboxGap,
  type InboxSubscribeOptions,
  type InboxSubscription,
  localStorageCursor,
  memoryCursor,
} from "./inboxes.js";
export { prefetchMax } from "./limits.js";
export { type SignalListener, type SignalSubscription, Signals, type SignalsOptions } from "./signals.js";
export * from "./types.js";
export {
  createWorker,
  type HandlerContext,
  type MessageHandler,
  type Worker,
  type WorkerOptions,
} from "./worker.js";
