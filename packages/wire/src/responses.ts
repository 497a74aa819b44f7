/**
 * The answers of the native API (docs/api.md), as schemas: what the server renders and what the
 * client reads. The server does not serialize through them (its hot paths write JSON directly); its
 * tests check that what it renders matches them. Times are ISO-8601 strings. Each schema has a type
 * of the same name, its `Static`.
 */
import Type, { type Static } from "typebox";
import { ExchangeType, PutQueueBody, QueueKind, RedriveBody, RetryPolicy } from "./requests.js";

const Timestamp = Type.String({ description: "ISO-8601" });
const Count = Type.Integer({ minimum: 0 });

export const ErrorBody = Type.Object({
  code: Type.String(),
  message: Type.String(),
  details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

/** A failed item of a batch call. */
export const ItemError = Type.Object({ error: ErrorBody });

// Queues.

/**
 * The attributes of a queue as its info shows them: the fields of `PUT /v1/queues/{queue}`, but with
 * the retry policy whole, as the server fills it in.
 */
export const QueueAttributes = Type.Object({
  ...PutQueueBody.properties,
  retry: Type.Optional(RetryPolicy),
});

/** Current depths and counters since the queue was created. */
export const QueueStats = Type.Object({
  available: Count,
  delayed: Count,
  inFlight: Count,
  /**
   * Messages whose body no longer matches the checksum stored with it, kept because the queue has no
   * dead-letter target: never delivered, shown by peek with `corrupt: true`, removed by a purge.
   * Only SQLite ever counts any (docs/reliability.md).
   */
  corrupt: Count,
  oldestMessageAgeMs: Count,
  consumers: Count,
  published: Count,
  delivered: Count,
  acked: Count,
  nacked: Count,
  expired: Count,
  deadLettered: Count,
  purged: Count,
  redelivered: Count,
  /** Messages deleted by `overflow: "drop-oldest"`; `"dead-letter-oldest"` counts in `deadLettered`. */
  dropped: Count,
  /** Messages a redrive moved out of this queue. */
  redriven: Count,
});

/** One entry of `GET /v1/queues`. */
export const QueueSummary = Type.Object({ name: Type.String(), kind: QueueKind, stats: QueueStats });

/** The answer of `GET /v1/queues/{queue}` and of `PUT /v1/queues/{queue}`. */
export const QueueInfo = Type.Object({
  name: Type.String(),
  kind: QueueKind,
  attributes: QueueAttributes,
  stats: QueueStats,
});

// Messages.

export const SentMessage = Type.Object({
  id: Type.String(),
  /** True when the queue already held a message with this dedupId; `id` is then that message's. */
  duplicate: Type.Boolean(),
});

export const SendResult = Type.Union([SentMessage, ItemError]);

export const ItemResult = Type.Union([Type.Object({ ok: Type.Literal(true) }), ItemError]);

/** The fields of a message that a receive and a peek both show. */
const shownFields = {
  id: Type.String(),
  body: Type.Optional(Type.Unknown()),
  bodyBase64: Type.Optional(Type.String()),
  contentType: Type.String(),
  headers: Type.Record(Type.String(), Type.String()),
  key: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  deliveryCount: Type.Integer({ minimum: 0 }),
  publishedAt: Timestamp,
};

export const ReceivedMessage = Type.Object({
  ...shownFields,
  /** Names this lease; ack, nack and extend take it. A receipt from an ended lease is refused. */
  receipt: Type.String(),
  firstDeliveredAt: Timestamp,
});

/** A message read by peek, which takes no lease and so carries no receipt. */
export const PeekedMessage = Type.Object({
  ...shownFields,
  visibleAt: Timestamp,
  firstDeliveredAt: Type.Union([Timestamp, Type.Null()]),
  priority: Type.Integer({ minimum: 0, maximum: 9 }),
  /**
   * The dedupId it was stored under: its own, or its body's SHA-256 with `contentBasedDedup`; null
   * when the queue does not deduplicate (`dedupWindowMs` 0), whatever the message carried.
   */
  dedupId: Type.Union([Type.String(), Type.Null()]),
  /**
   * Present, and true, on a message whose body failed its checksum: it is never delivered, and its
   * stored bytes come as `bodyBase64` whatever its content type, since they may no longer be JSON.
   */
  corrupt: Type.Optional(Type.Literal(true)),
});

// Tasks.

export const TaskKind = Type.Literal("redrive");
export const TaskState = Type.Union([
  Type.Literal("running"),
  Type.Literal("done"),
  Type.Literal("failed"),
  Type.Literal("cancelled"),
]);

/** The options of a redrive: the body of `POST /v1/queues/{queue}/redrive`. */
export const RedriveOptions = RedriveBody;

/** A background job of the server (`/v1/tasks`); kept for an hour after it ends, and lost on restart. */
export const Task = Type.Object({
  id: Type.String(),
  kind: TaskKind,
  state: TaskState,
  moved: Count,
  /** What the task set out to move when it started; `moved` reaches it unless the queue ran dry. */
  total: Count,
  /** The queue the messages move out of. */
  queue: Type.String(),
  /** The queue they move to; null = each message's `x-original-queue`. */
  to: Type.Union([Type.String(), Type.Null()]),
  ratePerSecond: Type.Union([Type.Number(), Type.Null()]),
  /** Why a `failed` task stopped, e.g. `queue_not_found` for a source queue that was deleted. */
  error: Type.Optional(ErrorBody),
  createdAt: Timestamp,
  finishedAt: Type.Union([Timestamp, Type.Null()]),
});

// Exchanges.

/** A binding names exactly one destination. */
export const BindingTarget = Type.Union([
  Type.Object({ queue: Type.String() }),
  Type.Object({ exchange: Type.String() }),
]);

export const Binding = Type.Union([
  Type.Object({ queue: Type.String(), pattern: Type.String() }),
  Type.Object({ exchange: Type.String(), pattern: Type.String() }),
]);

export const ExchangeInfo = Type.Object({
  name: Type.String(),
  type: ExchangeType,
  alternate: Type.Union([Type.String(), Type.Null()]),
  bindings: Type.Array(Binding),
  /** Non-mandatory publishes that reached no queue, since the server process started. */
  stats: Type.Object({ unroutable: Count }),
});

/**
 * `id` is null when the message reached no queue (and was not mandatory), so it was never stored.
 * `duplicate` is true when every queue it reached already held its dedupId; `id` is then the first's.
 */
export const PublishResult = Type.Union([
  Type.Object({ id: Type.Union([Type.String(), Type.Null()]), routed: Count, duplicate: Type.Boolean() }),
  ItemError,
]);

// Inboxes.

/** A namespace's attributes, every one filled in. */
export const InboxAttributes = Type.Object({
  maxAgeMs: Count,
  maxDepth: Type.Integer({ minimum: 1 }),
  forgetDeviceAfterMs: Count,
  /** null: recipients are never skipped. */
  stopFanoutAfterMs: Type.Union([Count, Type.Null()]),
  dedupWindowMs: Count,
});

/** What a namespace holds now, and its counters since it was created. */
export const InboxStats = Type.Object({
  /** Entries held now, over every recipient. */
  entries: Count,
  recipients: Count,
  appended: Count,
  /** Appends of a (recipient, message id) already appended: nothing written. */
  duplicates: Count,
  /** Recipients an append skipped as idle (`stopFanoutAfterMs`). */
  skipped: Count,
  /** Entries trimmed because every active device had acked them. */
  acked: Count,
  /** Entries trimmed by `maxAgeMs`. */
  expired: Count,
  /** Entries trimmed by `maxDepth`. */
  overflowed: Count,
  /** Devices forgotten by `forgetDeviceAfterMs`. */
  devicesForgotten: Count,
});

/** The answer of `PUT`/`GET /v1/inboxes/{ns}`, and each item of `GET /v1/inboxes`. */
export const InboxInfo = Type.Object({
  name: Type.String(),
  /** Changes when the namespace is created again: a cursor from another epoch is a gap. */
  epoch: Type.String(),
  attributes: InboxAttributes,
  stats: InboxStats,
  createdAt: Timestamp,
});

/** One recipient's part of an append, in the order named. */
export const AppendResult = Type.Union([
  Type.Object({
    recipient: Type.String(),
    seq: Type.Integer({ minimum: 1 }),
    /** True when the recipient already had this message id: `seq` is the first append's. */
    duplicate: Type.Boolean(),
  }),
  Type.Object({ recipient: Type.String(), skipped: Type.Literal("idle") }),
]);

export const InboxEntry = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  id: Type.String(),
  body: Type.Optional(Type.Unknown()),
  bodyBase64: Type.Optional(Type.String()),
  contentType: Type.String(),
  headers: Type.Record(Type.String(), Type.String()),
  appendedAt: Timestamp,
});

/** Where a recipient's log stands: `head` the last sequence given (0: none), `oldest` the first kept. */
const positionFields = { head: Count, oldest: Type.Integer({ minimum: 1 }), epoch: Type.String() };

/** The answer of `GET /v1/inboxes/{ns}/recipients/{recipient}/entries`. */
export const InboxEntries = Type.Object({ entries: Type.Array(InboxEntry), ...positionFields });

export const InboxAckResult = Type.Object({ cursor: Count });

export const DeviceCursor = Type.Object({
  device: Type.String(),
  /** The highest sequence the device acked (0: none). */
  cursor: Count,
  lastSeenAt: Timestamp,
});

/** The answer of `GET /v1/inboxes/{ns}/recipients/{recipient}`. */
export const RecipientInfo = Type.Object({
  recipient: Type.String(),
  /** Entries held for the recipient now. */
  depth: Count,
  ...positionFields,
  /** The head when an append last skipped the recipient as idle; null: never. */
  skippedAfter: Type.Union([Count, Type.Null()]),
  devices: Type.Array(DeviceCursor),
  /** Devices with a live subscription on the node that answers. */
  connected: Type.Array(Type.String()),
});

export type ErrorBody = Static<typeof ErrorBody>;
export type ItemError = Static<typeof ItemError>;
export type QueueAttributes = Static<typeof QueueAttributes>;
export type QueueStats = Static<typeof QueueStats>;
export type QueueSummary = Static<typeof QueueSummary>;
export type QueueInfo = Static<typeof QueueInfo>;
export type SentMessage = Static<typeof SentMessage>;
export type SendResult = Static<typeof SendResult>;
export type ItemResult = Static<typeof ItemResult>;
export type ReceivedMessage = Static<typeof ReceivedMessage>;
export type PeekedMessage = Static<typeof PeekedMessage>;
export type TaskKind = Static<typeof TaskKind>;
export type TaskState = Static<typeof TaskState>;
export type RedriveOptions = Static<typeof RedriveOptions>;
export type Task = Static<typeof Task>;
export type BindingTarget = Static<typeof BindingTarget>;
export type Binding = Static<typeof Binding>;
export type ExchangeInfo = Static<typeof ExchangeInfo>;
export type PublishResult = Static<typeof PublishResult>;
export type InboxAttributes = Static<typeof InboxAttributes>;
export type InboxStats = Static<typeof InboxStats>;
export type InboxInfo = Static<typeof InboxInfo>;
export type AppendResult = Static<typeof AppendResult>;
export type InboxEntry = Static<typeof InboxEntry>;
export type InboxEntries = Static<typeof InboxEntries>;
export type InboxAckResult = Static<typeof InboxAckResult>;
export type DeviceCursor = Static<typeof DeviceCursor>;
export type RecipientInfo = Static<typeof RecipientInfo>;
