/**
 * The request schemas of the native HTTP API (API.md "Queues"). They check shapes and types at the
 * edge, reject unknown fields, and feed the OpenAPI document; the broker checks values again.
 */
import Type, { type Static } from "typebox";
import { limits } from "../../limits.js";

const strict = { additionalProperties: false } as const;

export const Name = Type.String({ pattern: limits.namePattern, description: "[A-Za-z0-9_.:-]{1,128}" });
const Ms = (max: number, description?: string) =>
  Type.Integer({ minimum: 0, maximum: max, ...(description ? { description } : {}) });

export const QueueParams = Type.Object({ queue: Name }, strict);
export const ExchangeParams = Type.Object({ exchange: Name }, strict);

const MaxDeliveries = Type.Integer({ minimum: 1, maximum: limits.maxDeliveriesMax });
const RoutingKey = Type.String({ maxLength: limits.routingKeyLengthMax });

export const PutQueueBody = Type.Object(
  {
    kind: Type.Optional(Type.Union([Type.Literal("standard"), Type.Literal("fifo")])),
    visibilityTimeoutMs: Type.Optional(Ms(limits.visibilityTimeoutMsMax, "Lease length")),
    retentionMs: Type.Optional(Ms(limits.retentionMsMax)),
    delayMs: Type.Optional(Ms(limits.retentionMsMax, "Default delay per message")),
    receiveWaitMs: Type.Optional(Ms(limits.waitMsMax, "Default long-poll wait")),
    maxMessageBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.messageBytesMax })),
    deadLetter: Type.Optional(
      Type.Union([
        Type.Object({ queue: Name, maxDeliveries: MaxDeliveries }, strict),
        Type.Object(
          { exchange: Name, routingKey: Type.Optional(RoutingKey), maxDeliveries: MaxDeliveries },
          strict,
        ),
        Type.Null(),
      ]),
    ),
    retry: Type.Optional(
      Type.Object(
        {
          initialDelayMs: Type.Optional(Ms(limits.retryDelayMsMax)),
          multiplier: Type.Optional(Type.Number({ minimum: 1, maximum: 10 })),
          maxDelayMs: Type.Optional(Ms(limits.retryDelayMsMax)),
          jitter: Type.Optional(Type.Union([Type.Literal("full"), Type.Literal("none")])),
        },
        strict,
      ),
    ),
    maxDepth: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.maxDepthMax }), Type.Null()]),
    ),
    overflow: Type.Optional(
      Type.Union([Type.Literal("reject"), Type.Literal("drop-oldest"), Type.Literal("dead-letter-oldest")]),
    ),
    dedupWindowMs: Type.Optional(Ms(limits.dedupWindowMsMax, "How long a dedupId is remembered; 0 = off")),
    contentBasedDedup: Type.Optional(Type.Boolean({ description: "Deduplicate by the body's SHA-256" })),
    pushbackDepth: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.maxDepthMax }), Type.Null()]),
    ),
    pushbackAgeMs: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: limits.retentionMsMax }), Type.Null()]),
    ),
    alerts: Type.Optional(
      Type.Object(
        {
          oldestAgeMs: Type.Optional(Type.Integer({ minimum: 1 })),
          deadLetterDepth: Type.Optional(Type.Integer({ minimum: 1 })),
          silentForMs: Type.Optional(Type.Integer({ minimum: 1 })),
        },
        strict,
      ),
    ),
  },
  strict,
);

const Headers = Type.Record(
  Type.String({ pattern: `^[A-Za-z0-9_.:-]{1,${limits.headerNameLengthMax}}$` }),
  Type.String({ maxLength: limits.headerValueLengthMax }),
  { maxProperties: limits.headersCountMax, additionalProperties: false },
);

/** The fields of a message that every way of sending shares. */
const messageFields = {
  body: Type.Optional(Type.Unknown({ description: "Any JSON value; stored as its JSON text" })),
  bodyBase64: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9+/]*={0,2}$" })),
  contentType: Type.Optional(Type.String({ minLength: 1, maxLength: limits.contentTypeLengthMax })),
  headers: Type.Optional(Headers),
  key: Type.Optional(Type.String({ minLength: 1, maxLength: limits.keyLengthMax })),
  dedupId: Type.Optional(Type.String({ minLength: 1, maxLength: limits.dedupIdLengthMax })),
};

export const SendBody = Type.Object(
  {
    messages: Type.Array(
      Type.Object(
        {
          ...messageFields,
          delayMs: Type.Optional(Ms(limits.retentionMsMax)),
          priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 9 })),
        },
        strict,
      ),
      { minItems: 1, maxItems: limits.batchSizeMax },
    ),
  },
  strict,
);

export const PutExchangeBody = Type.Object(
  {
    type: Type.Union([Type.Literal("fanout"), Type.Literal("direct"), Type.Literal("topic")]),
    alternate: Type.Optional(Type.Union([Name, Type.Null()])),
  },
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

export const PublishBody = Type.Object(
  {
    messages: Type.Array(Type.Object({ routingKey: RoutingKey, ...messageFields }, strict), {
      minItems: 1,
      maxItems: limits.batchSizeMax,
    }),
    mandatory: Type.Optional(Type.Boolean()),
  },
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

export const RedriveBody = Type.Object(
  {
    to: Type.Optional(Name),
    max: Type.Optional(Type.Integer({ minimum: 1 })),
    ratePerSecond: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: limits.redriveRateMax })),
  },
  strict,
);

export const TaskParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) }, strict);

const Receipts = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  minItems: 1,
  maxItems: limits.batchSizeMax,
});

export const AckBody = Type.Object({ receipts: Receipts }, strict);
export const NackBody = Type.Object(
  { receipts: Receipts, delayMs: Type.Optional(Ms(limits.retryDelayMsMax)) },
  strict,
);
export const ExtendBody = Type.Object(
  { receipts: Receipts, visibilityTimeoutMs: Ms(limits.visibilityTimeoutMsMax) },
  strict,
);

export const PeekQuery = Type.Object(
  {
    state: Type.Optional(
      Type.Union([Type.Literal("available"), Type.Literal("delayed"), Type.Literal("in-flight")]),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.peekMax })),
  },
  strict,
);

export type PutQueueBody = Static<typeof PutQueueBody>;
export type SendBody = Static<typeof SendBody>;
export type ReceiveBody = Static<typeof ReceiveBody>;
export type AckBody = Static<typeof AckBody>;
export type NackBody = Static<typeof NackBody>;
export type ExtendBody = Static<typeof ExtendBody>;
export type PeekQuery = Static<typeof PeekQuery>;
export type RedriveBody = Static<typeof RedriveBody>;
export type PutExchangeBody = Static<typeof PutExchangeBody>;
export type BindingBody = Static<typeof BindingBody>;
export type PublishBody = Static<typeof PublishBody>;
