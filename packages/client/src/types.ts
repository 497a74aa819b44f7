// The wire types of Hopper's native API, section "Queues" of API.md. Field names are the wire's.

export type QueueKind = "standard" | "fifo";

export type OverflowPolicy = "reject" | "drop-oldest" | "dead-letter-oldest";

/** A dead-letter queue, or a dead-letter exchange that routes with `routingKey` (default: the queue's name). */
export type DeadLetterPolicy =
  | { queue: string; maxDeliveries: number }
  | { exchange: string; routingKey?: string; maxDeliveries: number };

export interface RetryPolicy {
  initialDelayMs: number;
  multiplier: number;
  maxDelayMs: number;
  jitter: "full" | "none";
}

export interface QueueAlerts {
  oldestAgeMs?: number;
  deadLetterDepth?: number;
  silentForMs?: number;
}

/** The body of `PUT /v1/queues/{queue}`, and the `attributes` of a queue's info. */
export interface QueueAttributes {
  kind?: QueueKind;
  visibilityTimeoutMs?: number;
  retentionMs?: number;
  delayMs?: number;
  receiveWaitMs?: number;
  maxMessageBytes?: number;
  /** The server answers null when the queue has no dead-letter queue. */
  deadLetter?: DeadLetterPolicy | null;
  retry?: RetryPolicy;
  maxDepth?: number;
  overflow?: OverflowPolicy;
  dedupWindowMs?: number;
  pushbackDepth?: number;
  pushbackAgeMs?: number;
  alerts?: QueueAlerts;
}

/** Current depths and counters since the queue was created. */
export interface QueueStats {
  available: number;
  delayed: number;
  inFlight: number;
  oldestMessageAgeMs: number;
  consumers: number;
  published: number;
  delivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
  purged?: number;
  redelivered?: number;
}

/** One entry of `GET /v1/queues`. */
export interface QueueSummary {
  name: string;
  kind: QueueKind;
  stats: QueueStats;
}

/** The answer of `GET /v1/queues/{queue}` and of `PUT /v1/queues/{queue}`. */
export interface QueueInfo {
  name: string;
  kind: QueueKind;
  attributes: QueueAttributes;
  stats: QueueStats;
}

export interface SendMessage {
  /** Any JSON value. Use `bodyBase64` instead for bytes. */
  body?: unknown;
  bodyBase64?: string;
  contentType?: string;
  headers?: Record<string, string>;
  /** The ordering key: the message group of a FIFO queue. */
  key?: string;
  /** A publish idempotency key: a second send with it inside the dedup window is answered `duplicate`. */
  dedupId?: string;
  delayMs?: number;
  priority?: number;
}

export interface ErrorBody {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

/** A failed item of a batch call. */
export interface ItemError {
  error: ErrorBody;
}

export interface SentMessage {
  id: string;
  duplicate: boolean;
}

export type SendResult = SentMessage | ItemError;

export type ItemResult = { ok: true } | ItemError;

export interface ReceivedMessage {
  id: string;
  /** Names this lease; ack, nack and extend take it. A receipt from an ended lease is refused. */
  receipt: string;
  body?: unknown;
  bodyBase64?: string;
  contentType: string;
  headers: Record<string, string>;
  key?: string | null;
  deliveryCount: number;
  publishedAt: string;
  firstDeliveredAt: string;
}

/** A message read by peek, which takes no lease and so carries no receipt. */
export type PeekedMessage = Omit<ReceivedMessage, "receipt" | "firstDeliveredAt"> & {
  visibleAt?: string;
  firstDeliveredAt?: string | null;
};

export type PeekState = "available" | "delayed" | "in-flight";

export interface RedriveOptions {
  /** Defaults to each message's source queue. */
  to?: string;
  max?: number;
  /** Without it, messages move as fast as the store allows. */
  ratePerSecond?: number;
}

export type TaskState = "running" | "done" | "failed" | "cancelled";

export interface Task {
  id: string;
  kind?: string;
  state: TaskState;
  moved: number;
  total: number;
}

/** Tells a failed item of a batch answer from a successful one. */
export function isItemError(result: object): result is ItemError {
  return "error" in result && typeof (result as ItemError).error === "object";
}

// Exchanges (API.md "Exchanges").

export type ExchangeType = "fanout" | "direct" | "topic";

/** A binding names exactly one destination. */
export type BindingTarget = { queue: string } | { exchange: string };

export type Binding = BindingTarget & { pattern: string };

export interface ExchangeInfo {
  name: string;
  type: ExchangeType;
  alternate: string | null;
  bindings: Binding[];
  /** Non-mandatory publishes that reached no queue, since the server process started. */
  stats: { unroutable: number };
}

export interface PublishMessage extends Omit<SendMessage, "delayMs" | "priority"> {
  routingKey: string;
}

/** `id` is null when the message reached no queue (and was not mandatory), so it was never stored. */
export type PublishResult = { id: string | null; routed: number } | ItemError;
