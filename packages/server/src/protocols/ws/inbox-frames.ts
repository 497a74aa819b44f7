/**
 * The inbox and device-auth frames of `/v1/ws` (API.md "WebSocket", docs/websocket.md "Inboxes"): their
 * schemas, which frames.ts checks with the others, and how inbox entries are written into frames.
 */
import Type, { type Static } from "typebox";
import { limits } from "../../limits.js";
import type { InboxEntry } from "../../model/inbox.js";
import { inboxEntryJson } from "../wire/inbox-render.js";

const strict = { additionalProperties: false } as const;

/** Echoed in the answer; as frames.ts's. */
const Ref = Type.Union([Type.String({ maxLength: 128 }), Type.Number()]);
const Name = Type.String({ pattern: limits.namePattern });
const Sub = Type.String({ minLength: 1, maxLength: 20 });
/** An epoch is the server's opaque string; the HTTP read takes the same. */
const Epoch = Type.String({ minLength: 1, maxLength: 64 });

export const inboxFrameSchemas = {
  "inbox.subscribe": Type.Object(
    {
      op: Type.Literal("inbox.subscribe"),
      ref: Type.Optional(Ref),
      ns: Name,
      device: Name,
      /** The device's cursor: entries after this sequence come (0: from the first retained). */
      after: Type.Integer({ minimum: 0 }),
      /** The epoch the cursor was read in; required when `after` is above 0. */
      epoch: Type.Optional(Epoch),
      /** Whose inbox: required on a service connection; on a device connection, its own (the token's sub). */
      recipient: Type.Optional(Name),
    },
    strict,
  ),
  "inbox.ack": Type.Object(
    {
      op: Type.Literal("inbox.ack"),
      ref: Type.Optional(Ref),
      sub: Sub,
      seq: Type.Integer({ minimum: 0 }),
    },
    strict,
  ),
  "inbox.unsubscribe": Type.Object(
    { op: Type.Literal("inbox.unsubscribe"), ref: Type.Optional(Ref), sub: Sub },
    strict,
  ),
  "auth.refresh": Type.Object(
    {
      op: Type.Literal("auth.refresh"),
      ref: Type.Optional(Ref),
      token: Type.String({ minLength: 1, maxLength: limits.deviceTokenLengthMax }),
    },
    strict,
  ),
} as const;

export type InboxSubscribeFrame = Static<(typeof inboxFrameSchemas)["inbox.subscribe"]>;
export type InboxAckFrame = Static<(typeof inboxFrameSchemas)["inbox.ack"]>;
export type InboxUnsubscribeFrame = Static<(typeof inboxFrameSchemas)["inbox.unsubscribe"]>;
export type AuthRefreshFrame = Static<(typeof inboxFrameSchemas)["auth.refresh"]>;
export type InboxClientFrame = InboxSubscribeFrame | InboxAckFrame | InboxUnsubscribeFrame | AuthRefreshFrame;

/** The frame `{ op: "inbox.entry", sub, entries }`: each entry as the HTTP read renders it (wire/inbox-render.ts). */
export function inboxEntryFrame(sub: string, entries: readonly InboxEntry[]): string {
  return `{"op":"inbox.entry","sub":${JSON.stringify(sub)},"entries":[${entries.map(inboxEntryJson).join(",")}]}`;
}
