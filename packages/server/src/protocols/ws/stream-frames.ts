/**
 * The stream frames of `/v1/ws` (API.md "WebSocket", docs/websocket.md "Streams"): their schemas, which
 * frames.ts checks with the others.
 */
import { Receipts } from "@hopper/wire";
import Type, { type Static } from "typebox";
import { limits } from "../../limits.js";

const strict = { additionalProperties: false } as const;

/** Echoed in the answer; as frames.ts's. */
const Ref = Type.Union([Type.String({ maxLength: 128 }), Type.Number()]);
const Name = Type.String({ pattern: limits.namePattern });
const Sub = Type.String({ minLength: 1, maxLength: 20 });
const Prefetch = Type.Integer({ minimum: 1, maximum: limits.prefetchMax });

export const streamFrameSchemas = {
  "stream.consume": Type.Object(
    {
      op: Type.Literal("stream.consume"),
      ref: Type.Optional(Ref),
      stream: Name,
      group: Name,
      member: Name,
      /** Records delivered and not yet committed that the member may hold. */
      prefetch: Prefetch,
      start: Type.Optional(Type.Union([Type.Literal("earliest"), Type.Literal("latest")])),
    },
    strict,
  ),
  "stream.commit": Type.Object(
    {
      op: Type.Literal("stream.commit"),
      ref: Type.Optional(Ref),
      sub: Sub,
      offsets: Type.Array(
        Type.Object(
          { partition: Type.Integer({ minimum: 0 }), offset: Type.Integer({ minimum: 0 }) },
          strict,
        ),
        { minItems: 1, maxItems: limits.streamPartitionsMax },
      ),
    },
    strict,
  ),
  "stream.cancel": Type.Object(
    { op: Type.Literal("stream.cancel"), ref: Type.Optional(Ref), sub: Sub },
    strict,
  ),
  "share.consume": Type.Object(
    {
      op: Type.Literal("share.consume"),
      ref: Type.Optional(Ref),
      stream: Name,
      group: Name,
      /** Records leased and not yet acked or nacked that the consumer may hold. */
      prefetch: Prefetch,
    },
    strict,
  ),
  "share.ack": Type.Object(
    { op: Type.Literal("share.ack"), ref: Type.Optional(Ref), sub: Sub, receipts: Receipts },
    strict,
  ),
  "share.nack": Type.Object(
    {
      op: Type.Literal("share.nack"),
      ref: Type.Optional(Ref),
      sub: Sub,
      receipts: Receipts,
      delayMs: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.retryDelayMsMax })),
    },
    strict,
  ),
} as const;

export type StreamConsumeFrame = Static<(typeof streamFrameSchemas)["stream.consume"]>;
export type StreamCommitFrame = Static<(typeof streamFrameSchemas)["stream.commit"]>;
export type StreamCancelFrame = Static<(typeof streamFrameSchemas)["stream.cancel"]>;
export type ShareConsumeFrame = Static<(typeof streamFrameSchemas)["share.consume"]>;
export type ShareAckFrame = Static<(typeof streamFrameSchemas)["share.ack"]>;
export type ShareNackFrame = Static<(typeof streamFrameSchemas)["share.nack"]>;
export type StreamClientFrame =
  | StreamConsumeFrame
  | StreamCommitFrame
  | StreamCancelFrame
  | ShareConsumeFrame
  | ShareAckFrame
  | ShareNackFrame;
