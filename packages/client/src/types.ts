// The wire types of Hopper's native API (docs/api.md). Each is the `Static` of a schema in
// @hopper/wire, the schemas the server validates with, so the client's types follow the server's
// contract rather than a copy of it. They are imported as types only: at run time the client loads
// only @hopper/wire/limits, which imports nothing, and never TypeBox (imports.test.ts).

export type {
  Binding,
  BindingTarget,
  DeadLetterPolicy,
  ErrorBody,
  ExchangeInfo,
  ExchangeType,
  ItemError,
  ItemResult,
  OverflowPolicy,
  PeekedMessage,
  PeekState,
  PublishMessage,
  PublishResult,
  QueueAlerts,
  QueueAttributes,
  QueueInfo,
  QueueKind,
  QueueStats,
  QueueSummary,
  ReceivedMessage,
  RedriveOptions,
  RetryPolicy,
  SendMessage,
  SendResult,
  SentMessage,
  Task,
  TaskKind,
  TaskState,
} from "@hopper/wire";

import type { ItemError } from "@hopper/wire";

/**
 * The headers the server sets on a dead-lettered message. `x-dead-letter-reason` is `max_deliveries`
 * (delivered too often), `max_depth` (pushed out by `overflow: "dead-letter-oldest"`), `corrupt`
 * (its body failed its checksum in the store; it stays undeliverable there too), or the reason a nack
 * with `deadLetter: true` gave (`rejected` by default; an UnrecoverableError's `reason`).
 */
export const deadLetterHeaders = {
  reason: "x-dead-letter-reason",
  originalQueue: "x-original-queue",
  deliveryCount: "x-delivery-count",
  originalPublishedAt: "x-original-published-at",
} as const;

/** Tells a failed item of a batch answer from a successful one. */
export function isItemError(result: object): result is ItemError {
  return "error" in result && typeof (result as ItemError).error === "object";
}
