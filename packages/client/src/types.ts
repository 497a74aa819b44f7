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
  /** The most messages the queue holds, in every state; null = no bound. */
  maxDepth?: number | null;
  /** What a send into a queue at `maxDepth` does: refuse (429 `queue_full`), or make room. */
  overflow?: OverflowPolicy;
  /** How long a dedupId is remembered; 0 = no deduplication. FIFO queues default to 300000. */
  dedupWindowMs?: number;
  /** A message without a dedupId is deduplicated by its body's SHA-256; needs `dedupWindowMs` above 0. */
  contentBasedDedup?: boolean;
  pushbackDepth?: number | null;
  pushbackAgeMs?: number | null;
  alerts?: QueueAlerts;
}

/** Current depths and counters since the queue was created. */
export interface QueueStats {
  available: number;
  delayed: number;
  inFlight: number;
  /**
   * Messages whose body no longer matches the checksum stored with it, kept because the queue has no
   * dead-letter target: never delivered, shown by peek with `corrupt: true`, removed by a purge.
   * Only SQLite ever counts any (docs/reliability.md).
   */
  corrupt: number;
  oldestMessageAgeMs: number;
  consumers: number;
  published: number;
  delivered: number;
  acked: number;
  nacked: number;
  expired: number;
  deadLettered: number;
  purged: number;
  redelivered: number;
  /** Messages deleted by `overflow: "drop-oldest"`; `"dead-letter-oldest"` counts in `deadLettered`. */
  dropped: number;
  /** Messages a redrive moved out of this queue. */
  redriven: number;
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
  /** 0–9, higher first; standard queues only (a FIFO queue refuses the item). Default 0. */
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
  /** True when the queue already held a message with this dedupId; `id` is then that message's. */
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
  visibleAt: string;
  firstDeliveredAt: string | null;
  priority: number;
  /**
   * The dedupId it was stored under: its own, or its body's SHA-256 with `contentBasedDedup`; null
   * when the queue does not deduplicate (`dedupWindowMs` 0), whatever the message carried.
   */
  dedupId: string | null;
  /**
   * Present, and true, on a message whose body failed its checksum: it is never delivered, and its
   * stored bytes come as `bodyBase64` whatever its content type, since they may no longer be JSON.
   */
  corrupt?: true;
};

/**
 * The headers the server sets on a dead-lettered message. `x-dead-letter-reason` is `max_deliveries`
 * (delivered too often), `max_depth` (pushed out by `overflow: "dead-letter-oldest"`) or `corrupt`
 * (its body failed its checksum in the store; it stays undeliverable there too).
 */
export const deadLetterHeaders = {
  reason: "x-dead-letter-reason",
  originalQueue: "x-original-queue",
  deliveryCount: "x-delivery-count",
  originalPublishedAt: "x-original-published-at",
} as const;

export type PeekState = "available" | "delayed" | "in-flight";

export interface RedriveOptions {
  /** Defaults to each message's source queue (its `x-original-queue` header). */
  to?: string;
  /** Move at most this many; without it, every message not in flight when the task starts. */
  max?: number;
  /** Messages per second, above 0; without it, messages move as fast as the store allows. */
  ratePerSecond?: number;
}

export type TaskKind = "redrive";

export type TaskState = "running" | "done" | "failed" | "cancelled";

/** A background job of the server (`/v1/tasks`); kept for an hour after it ends, and lost on restart. */
export interface Task {
  id: string;
  kind: TaskKind;
  state: TaskState;
  moved: number;
  /** What the task set out to move when it started; `moved` reaches it unless the queue ran dry. */
  total: number;
  /** The queue the messages move out of. */
  queue: string;
  /** The queue they move to; null = each message's `x-original-queue`. */
  to: string | null;
  ratePerSecond: number | null;
  /** Why a `failed` task stopped, e.g. `queue_not_found` for a source queue that was deleted. */
  error?: ErrorBody;
  createdAt: string;
  finishedAt: string | null;
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

/**
 * `id` is null when the message reached no queue (and was not mandatory), so it was never stored.
 * `duplicate` is true when every queue it reached already held its dedupId; `id` is then the first's.
 */
export type PublishResult = { id: string | null; routed: number; duplicate: boolean } | ItemError;
