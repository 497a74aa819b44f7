/**
 * The frames a WebSocket client may send (API.md "WebSocket"), as TypeBox schemas: one JSON object per
 * frame, an `op` naming its schema, unknown ops and unknown fields refused. `parseFrame` turns a text
 * frame into a checked frame or the catalog error to answer with, so a bad frame changes nothing.
 */
import { NackBody, Receipts, SendBody } from "@hopper/wire";
import Type, { type Static, type TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import { describeErrors } from "../wire/validation-errors.js";
import { type InboxClientFrame, inboxFrameSchemas } from "./inbox-frames.js";
import { type StreamClientFrame, streamFrameSchemas } from "./stream-frames.js";

const strict = { additionalProperties: false } as const;

/** Echoed in the answer so a client can match it to its frame. */
const Ref = Type.Union([Type.String({ maxLength: limits.wsRefLengthMax }), Type.Number()]);
const Name = Type.String({ pattern: limits.namePattern });
/** Subscription ids are small decimal numbers handed out per connection. */
const Sub = Type.String({ minLength: 1, maxLength: limits.wsSubLengthMax });

const frameSchemas = {
  consume: Type.Object(
    {
      op: Type.Literal("consume"),
      ref: Type.Optional(Ref),
      queue: Name,
      prefetch: Type.Integer({ minimum: 1, maximum: limits.prefetchMax }),
      /** Hopper's extension of API.md: each lease's messages in one `deliver` frame, as `messages`. */
      batch: Type.Optional(Type.Boolean()),
    },
    strict,
  ),
  ack: Type.Object({ op: Type.Literal("ack"), ref: Type.Optional(Ref), receipts: Receipts }, strict),
  /** As `POST /v1/queues/{queue}/nack`'s body: retry after a delay, or dead-letter at once. */
  nack: Type.Object({ op: Type.Literal("nack"), ref: Type.Optional(Ref), ...NackBody.properties }, strict),
  cancel: Type.Object({ op: Type.Literal("cancel"), ref: Type.Optional(Ref), sub: Sub }, strict),
  /** Hopper's extension of API.md: the consumer is given no more messages, and keeps those it holds. */
  drain: Type.Object({ op: Type.Literal("drain"), ref: Type.Optional(Ref), sub: Sub }, strict),
  /** Hopper's extension of API.md: a send over the socket, as `POST /v1/queues/{queue}/messages`. */
  send: Type.Object(
    {
      op: Type.Literal("send"),
      ref: Type.Optional(Ref),
      queue: Name,
      messages: SendBody.properties.messages,
    },
    strict,
  ),
  "signal.subscribe": Type.Object(
    { op: Type.Literal("signal.subscribe"), ref: Type.Optional(Ref), channel: Name },
    strict,
  ),
  "signal.unsubscribe": Type.Object(
    { op: Type.Literal("signal.unsubscribe"), ref: Type.Optional(Ref), channel: Name },
    strict,
  ),
  "signal.publish": Type.Object(
    { op: Type.Literal("signal.publish"), ref: Type.Optional(Ref), channel: Name, data: Type.Unknown() },
    strict,
  ),
  ...inboxFrameSchemas,
  ...streamFrameSchemas,
} as const;

export type ConsumeFrame = Static<(typeof frameSchemas)["consume"]>;
export type AckFrame = Static<(typeof frameSchemas)["ack"]>;
export type NackFrame = Static<(typeof frameSchemas)["nack"]>;

/** A nack frame's options for the broker: its fields but the op, ref and receipts. */
export function nackOptionsOf(frame: NackFrame): Omit<NackFrame, "op" | "ref" | "receipts"> {
  const { op: _op, ref: _ref, receipts: _receipts, ...options } = frame;
  return options;
}
export type CancelFrame = Static<(typeof frameSchemas)["cancel"]>;
export type DrainFrame = Static<(typeof frameSchemas)["drain"]>;
export type SendFrame = Static<(typeof frameSchemas)["send"]>;
export type SignalSubscribeFrame = Static<(typeof frameSchemas)["signal.subscribe"]>;
export type SignalUnsubscribeFrame = Static<(typeof frameSchemas)["signal.unsubscribe"]>;
export type SignalPublishFrame = Static<(typeof frameSchemas)["signal.publish"]>;
export type ClientFrame =
  | ConsumeFrame
  | AckFrame
  | NackFrame
  | CancelFrame
  | DrainFrame
  | SendFrame
  | SignalSubscribeFrame
  | SignalUnsubscribeFrame
  | SignalPublishFrame
  | InboxClientFrame
  | StreamClientFrame;
export type Ref = Static<typeof Ref>;

type Op = keyof typeof frameSchemas;
const validators = Object.fromEntries(
  Object.entries(frameSchemas).map(([op, schema]) => [op, Compile(schema as TSchema)]),
) as Record<Op, ReturnType<typeof Compile>>;
const refValidator = Compile(Ref);

/** Fields that hold a name: a bad one is invalid_name, as in a path. */
const namedPaths = new Set([
  "/queue",
  "/channel",
  "/ns",
  "/device",
  "/recipient",
  "/stream",
  "/group",
  "/member",
]);

export type ParsedFrame = { frame: ClientFrame } | { error: HopperError; ref?: Ref };

/** Checks one text frame against its op's schema. */
export function parseFrame(text: string): ParsedFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return {
      error: new HopperError("invalid_json", `The frame is not valid JSON: ${(error as Error).message}`),
    };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: new HopperError("invalid_request", "A frame is one JSON object.") };
  }
  const fields = value as Record<string, unknown>;
  // The ref is echoed even when the rest of the frame is refused, so the client can tell which failed.
  const ref = refValidator.Check(fields.ref) ? (fields.ref as Ref) : undefined;
  const withRef = (error: HopperError): ParsedFrame => (ref === undefined ? { error } : { error, ref });
  const op = fields.op;
  if (typeof op !== "string" || !Object.hasOwn(frameSchemas, op)) {
    const known = Object.keys(frameSchemas).join(", ");
    return withRef(
      new HopperError("invalid_request", `Unknown op ${JSON.stringify(op)}; the ops are ${known}.`, {
        ops: Object.keys(frameSchemas),
      }),
    );
  }
  const validator = validators[op as Op];
  if (validator.Check(value)) return { frame: value as ClientFrame };
  const raw = validator.Errors(value);
  const errors = describeErrors(raw);
  const first = errors[0];
  const code = raw.some((e) => namedPaths.has(e.instancePath))
    ? "invalid_name"
    : raw.some((e) => e.keyword === "maxItems" && e.instancePath === "/receipts")
      ? "batch_too_large"
      : "invalid_request";
  return withRef(new HopperError(code, `Invalid ${op} frame: ${first?.path} ${first?.message}`, { errors }));
}
