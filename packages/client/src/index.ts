export {
  HopperClient,
  type HopperClientOptions,
  type NackOptions,
  type PeekOptions,
  type PutQueueResult,
  type ReceiveOptions,
} from "./client.js";
export { type Clock, type ClockTimer, systemClock } from "./clock.js";
export { clientErrorCodes, HopperError, type HopperErrorInit } from "./errors.js";
export * from "./types.js";
export {
  createWorker,
  type HandlerContext,
  type MessageHandler,
  type Worker,
  type WorkerOptions,
} from "./worker.js";
