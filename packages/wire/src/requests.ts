/**
 * The request schemas of the native API (docs/api.md): the bodies, parameters and queries of the HTTP
 * routes, whose message fields the WebSocket frames reuse. They check shapes and types at the edge,
 * reject unknown fields, and feed the OpenAPI document; the server's broker checks values again.
 * Each schema has a type of the same name, its `Static`, which the server's routes and the client use.
 */
import Type, { type Static } from "typebox";
import { wireLimits as limits } from "./limits.js";

const strict = { additionalProperties: false } as const;

export const Name = Type.String({ pattern: limits.namePattern, description: "[A-Za-z0-9_.:-]{1,128}" });
const Ms = (max: number, description?: string) =>
  Type.Integer({ minimum: 0, maximum: max, ...(description ? { description } : {}) });

export const QueueParams = Type.Object({ queue: Name }, strict);
export const ExchangeParams = Type.Object({ exchange: Name }, strict);
export const TaskParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: limits.taskIdLengthMax }) },
  strict,
);

// Queues.

export const QueueKind = Type.Union([Type.Literal("standard"), Type.Literal("fifo")]);
export const OverflowPolicy = Type.Union([
  Type.Literal("reject"),
  Type.Literal("drop-oldest"),
  Type.Literal("dead-letter-oldest"),
]);

const MaxDeliveries = Type.Integer({ minimum: 1, maximum: limits.maxDeliveriesMax });
const RoutingKey = Type.String({ maxLength: limits.routingKeyLengthMax });

/** A dead-letter queue, or a dead-letter exchange that routes with `routingKey` (default: the queue's name). */
export const DeadLetterPolicy = Type.Union([
  Type.Object({ queue: Name, maxDeliveries: MaxDeliveries }, strict),
  Type.Object(
    { exchange: Name, routingKey: Type.Optional(RoutingKey), maxDeliveries: MaxDeliveries },
    strict,
  ),
]);

/** A queue's retry policy as the server answers it, every field set; a request may give any of them. */
export const RetryPolicy = Type.Object(
  {
    initialDelayMs: Ms(limits.retryDelayMsMax),
    multiplier: Type.Number({ minimum: 1, maximum: limits.retryMultiplierMax }),
    maxDelayMs: Ms(limits.retryDelayMsMax),
    jitter: Type.Union([Type.Literal("full"), Type.Literal("none")]),
  },
  strict,
);

export const QueueAlerts = Type.Object(
  {
    oldestAgeMs: Type.Optional(Type.Integer({ minimum: 1 })),
    deadLetterDepth: Type.Optional(Type.Integer({ minimum: 1 })),
    silentForMs: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  strict,
);

/** The body of `PUT /v1/queues/{queue}`: every attribute optional, those left out keep their value. */
export const PutQueueBody = Type.Object(
  {
    kind: Type.Optional(QueueKind),
    visibilityTimeoutMs: Type.Optional(Ms(limits.visibilityTimeoutMsMax, "Lease length")),
    retentionMs: Type.Optional(Ms(limits.retentionMsMax)),
    delayMs: Type.Optional(Ms(limits.retentionMsMax, "Default delay per message")),
    receiveWaitMs: Type.Optional(Ms(limits.waitMsMax, "Default long-poll wait")),
    maxMessageBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.messageBytesMax })),
    /** The server answers null when the queue has no dead-letter target. */
    deadLetter: Type.Optional(Type.Union([...DeadLetterPolicy.anyOf, Type.Null()])),
    retry: Type.Optional(Type.Partial(RetryPolicy, strict)),
    /** The most messages the queue holds, in every state; null = no bound. */
    maxDepth: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.maxDepthMax }), Type.Null()]),
    ),
    /** What a send into a queue at `maxDepth` does: refuse (429 `queue_full`), or make room. */
    overflow: Type.Optional(OverflowPolicy),
    /** How long a dedupId is remembered; 0 = no deduplication. FIFO queues default to 300000. */
    dedupWindowMs: Type.Optional(Ms(limits.dedupWindowMsMax, "How long a dedupId is remembered; 0 = off")),
    /** A message without a dedupId is deduplicated by its body's SHA-256; needs `dedupWindowMs` above 0. */
    contentBasedDedup: Type.Optional(Type.Boolean({ description: "Deduplicate by the body's SHA-256" })),
    pushbackDepth: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.maxDepthMax }), Type.Null()]),
    ),
    pushbackAgeMs: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.retentionMsMax }), Type.Null()]),
    ),
    alerts: Type.Optional(QueueAlerts),
  },
  strict,
);

// Messages.

const Headers = Type.Record(
  Type.String({ pattern: `^[A-Za-z0-9_.:-]{1,${limits.headerNameLengthMax}}$` }),
  Type.String({ maxLength: limits.headerValueLengthMax }),
  { maxProperties: limits.headersCountMax, additionalProperties: false },
);

/** The fields of a message that every way of sending shares. */
const messageFields = {
  /** Any JSON value. Use `bodyBase64` instead for bytes. */
  body: Type.Optional(Type.Unknown({ description: "Any JSON value; stored as its JSON text" })),
  bodyBase64: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9+/]*={0,2}$" })),
  contentType: Type.Optional(Type.String({ minLength: 1, maxLength: limits.contentTypeLengthMax })),
  headers: Type.Optional(Headers),
  /** The ordering key: the message group of a FIFO queue. */
  key: Type.Optional(Type.String({ minLength: 1, maxLength: limits.keyLengthMax })),
  /** A publish idempotency key: a second send with it inside the dedup window is answered `duplicate`. */
  dedupId: Type.Optional(Type.String({ minLength: 1, maxLength: limits.dedupIdLengthMax })),
};

/** One message of a send. */
export const SendMessage = Type.Object(
  {
    ...messageFields,
    delayMs: Type.Optional(Ms(limits.retentionMsMax)),
    /** 0–9, higher first; standard queues only (a FIFO queue refuses the item). Default 0. */
    priority: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.priorityMax })),
  },
  strict,
);

export const SendBody = Type.Object(
  { messages: Type.Array(SendMessage, { minItems: 1, maxItems: limits.batchSizeMax }) },
  strict,
);

export const ReceiveBody = Type.Object(
  {
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.receiveMax })),
    waitMs: Type.Optional(Ms(limits.waitMsMax)),
    visibilityTimeoutMs: Type.Optional(Ms(limits.visibilityTimeoutMsMax)),
    autoAck: Type.Optional(
      Type.Boolean({ description: "At most once: delete on delivery; lost if the consumer fails" }),
    ),
  },
  strict,
);

export const Receipts = Type.Array(Type.String({ minLength: 1, maxLength: limits.receiptLengthMax }), {
  minItems: 1,
  maxItems: limits.batchSizeMax,
});

export const AckBody = Type.Object({ receipts: Receipts }, strict);
export const NackBody = Type.Object(
  {
    receipts: Receipts,
    /** When to deliver again; without it the queue's retry policy decides. Not with `deadLetter`. */
    delayMs: Type.Optional(Ms(limits.retryDelayMsMax)),
    /** Rejected for good: the messages go to the queue's dead-letter target now, not retried. */
    deadLetter: Type.Optional(Type.Boolean({ description: "Move to the dead-letter target now" })),
    /** The dead letters' `x-dead-letter-reason` (default `rejected`); only with `deadLetter: true`. */
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: limits.deadLetterReasonLengthMax })),
  },
  strict,
);
export const ExtendBody = Type.Object(
  { receipts: Receipts, visibilityTimeoutMs: Ms(limits.visibilityTimeoutMsMax) },
  strict,
);

export const PeekState = Type.Union([
  Type.Literal("available"),
  Type.Literal("delayed"),
  Type.Literal("in-flight"),
]);
export const PeekQuery = Type.Object(
  {
    state: Type.Optional(PeekState),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.peekMax })),
  },
  strict,
);

export const RedriveBody = Type.Object(
  {
    /** Defaults to each message's source queue (its `x-original-queue` header). */
    to: Type.Optional(Name),
    /** Move at most this many; without it, every message not in flight when the task starts. */
    max: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Messages per second, above 0; without it, messages move as fast as the store allows. */
    ratePerSecond: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: limits.redriveRateMax })),
  },
  strict,
);

// Exchanges.

export const ExchangeType = Type.Union([
  Type.Literal("fanout"),
  Type.Literal("direct"),
  Type.Literal("topic"),
]);

export const PutExchangeBody = Type.Object(
  { type: ExchangeType, alternate: Type.Optional(Type.Union([Name, Type.Null()])) },
  strict,
);

export const BindingBody = Type.Object(
  {
    queue: Type.Optional(Name),
    exchange: Type.Optional(Name),
    stream: Type.Optional(Name),
    pattern: RoutingKey,
  },
  strict,
);

/** One message of a publish: a send's fields without delay or priority, and a routing key. */
export const PublishMessage = Type.Object({ routingKey: RoutingKey, ...messageFields }, strict);

export const PublishBody = Type.Object(
  {
    messages: Type.Array(PublishMessage, { minItems: 1, maxItems: limits.batchSizeMax }),
    mandatory: Type.Optional(Type.Boolean()),
  },
  strict,
);

// Inboxes.

export const InboxParams = Type.Object({ ns: Name }, strict);
export const RecipientParams = Type.Object({ ns: Name, recipient: Name }, strict);
export const DeviceParams = Type.Object({ ns: Name, recipient: Name, device: Name }, strict);

/**
 * The body of `PUT /v1/inboxes/{ns}`: every attribute optional, those left out keep their value (or
 * take the default on create). The server checks the ranges (400 `invalid_attribute`).
 */
export const PutInboxBody = Type.Object(
  {
    /** Entries older than this are trimmed, read or not. */
    maxAgeMs: Type.Optional(Ms(limits.retentionMsMax, "Entries older than this are trimmed")),
    /** The most entries a recipient holds; older ones are trimmed. */
    maxDepth: Type.Optional(Type.Integer({ minimum: 1 })),
    /** A device unseen this long no longer holds entries back. */
    forgetDeviceAfterMs: Type.Optional(Ms(limits.retentionMsMax, "A device unseen this long is forgotten")),
    /** A recipient whose devices have all been unseen this long is skipped at append; null = never. */
    stopFanoutAfterMs: Type.Optional(Type.Union([Ms(limits.retentionMsMax), Type.Null()])),
    /** How long (recipient, message id) is remembered, so that a repeated append is a duplicate. */
    dedupWindowMs: Type.Optional(Ms(limits.retentionMsMax, "How long a message id is remembered")),
  },
  strict,
);

/** The message of an inbox append: stored once, whatever the number of recipients. */
export const InboxMessage = Type.Object(
  {
    /** The application's id of the message: appends are idempotent on (recipient, id). */
    id: Type.String({ minLength: 1, maxLength: limits.inboxMessageIdLengthMax }),
    body: messageFields.body,
    bodyBase64: messageFields.bodyBase64,
    contentType: messageFields.contentType,
    headers: messageFields.headers,
  },
  strict,
);

export const AppendBody = Type.Object(
  {
    /** Each recipient gets the message once, with its own next sequence number; all or nothing. */
    recipients: Type.Array(Name, { minItems: 1, maxItems: limits.inboxRecipientsMax }),
    message: InboxMessage,
  },
  strict,
);

export const InboxEntriesQuery = Type.Object(
  {
    /** The cursor: entries after this sequence (default 0, from the first retained). */
    after: Type.Optional(Type.Integer({ minimum: 0 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.inboxReadLimitMax })),
    /** The epoch the cursor was read in; required when `after` is above 0. */
    epoch: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    /** A long poll: with nothing after the cursor, wait up to this long for an append. */
    waitMs: Type.Optional(Ms(limits.waitMsMax)),
  },
  strict,
);

export const InboxAckBody = Type.Object(
  {
    device: Name,
    /** The highest sequence the device has processed; the cursor never moves back. */
    seq: Type.Integer({ minimum: 0 }),
  },
  strict,
);

export type QueueKind = Static<typeof QueueKind>;
export type OverflowPolicy = Static<typeof OverflowPolicy>;
export type DeadLetterPolicy = Static<typeof DeadLetterPolicy>;
export type RetryPolicy = Static<typeof RetryPolicy>;
export type QueueAlerts = Static<typeof QueueAlerts>;
export type PutQueueBody = Static<typeof PutQueueBody>;
export type SendMessage = Static<typeof SendMessage>;
export type SendBody = Static<typeof SendBody>;
export type ReceiveBody = Static<typeof ReceiveBody>;
export type AckBody = Static<typeof AckBody>;
export type NackBody = Static<typeof NackBody>;
export type ExtendBody = Static<typeof ExtendBody>;
export type PeekState = Static<typeof PeekState>;
export type PeekQuery = Static<typeof PeekQuery>;
export type RedriveBody = Static<typeof RedriveBody>;
export type ExchangeType = Static<typeof ExchangeType>;
export type PutExchangeBody = Static<typeof PutExchangeBody>;
export type BindingBody = Static<typeof BindingBody>;
export type PublishMessage = Static<typeof PublishMessage>;
export type PublishBody = Static<typeof PublishBody>;
export type PutInboxBody = Static<typeof PutInboxBody>;
export type InboxMessage = Static<typeof InboxMessage>;
export type AppendBody = Static<typeof AppendBody>;
export type InboxEntriesQuery = Static<typeof InboxEntriesQuery>;
export type InboxAckBody = Static<typeof InboxAckBody>;
