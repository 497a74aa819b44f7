/**
 * The inbox routes of API.md "Inboxes": each validates (by schema), makes one broker call and renders
 * the answer. No semantics live here.
 */
import {
  AppendBody,
  DeviceParams,
  InboxAckBody,
  InboxEntriesQuery,
  InboxParams,
  PutInboxBody,
  RecipientParams,
} from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { InboxBroker } from "../../broker/inboxes.js";
import { appendBodySpan } from "../wire/body-spans.js";
import { inboxEntriesJson, renderInbox, renderRecipient } from "../wire/inbox-render.js";
import { abortOnClose } from "./abort-on-close.js";

type InboxPath = { ns: string };
type RecipientPath = { ns: string; recipient: string };
type DevicePath = RecipientPath & { device: string };

const tags = ["inboxes"];

/** The inbox routes of API.md: namespaces, and each recipient's log and devices. */
export function registerInboxRoutes(app: FastifyInstance, inboxes: InboxBroker): void {
  registerNamespaceRoutes(app, inboxes);
  registerRecipientRoutes(app, inboxes);
}

/** Create or update, list, read and delete namespaces, and append to them. */
function registerNamespaceRoutes(app: FastifyInstance, inboxes: InboxBroker): void {
  app.put<{ Params: InboxPath; Body: PutInboxBody | undefined }>(
    "/v1/inboxes/:ns",
    { schema: { tags, params: InboxParams, body: PutInboxBody } },
    async (request, reply) => {
      const { created, inbox } = await inboxes.putInbox(request.params.ns, request.body ?? {});
      return reply.status(created ? 201 : 200).send(renderInbox(inbox));
    },
  );

  app.get("/v1/inboxes", { schema: { tags } }, async () => ({
    inboxes: (await inboxes.listInboxes()).map(renderInbox),
  }));

  app.get<{ Params: InboxPath }>(
    "/v1/inboxes/:ns",
    { schema: { tags, params: InboxParams } },
    async (request) => renderInbox(await inboxes.getInbox(request.params.ns)),
  );

  app.delete<{ Params: InboxPath }>(
    "/v1/inboxes/:ns",
    { schema: { tags, params: InboxParams } },
    async (request, reply) => {
      await inboxes.deleteInbox(request.params.ns);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: InboxPath; Body: AppendBody }>(
    "/v1/inboxes/:ns/append",
    { schema: { tags, params: InboxParams, body: AppendBody } },
    async (request) => {
      // A JSON body is stored as the bytes its producer sent (body-spans.ts), as a queue send's is.
      const bytes = request.bodyBytes;
      const span = bytes && appendBodySpan(bytes);
      const sentAs = span && bytes?.subarray(span.start, span.end);
      return { results: await inboxes.append(request.params.ns, request.body, sentAs) };
    },
  );
}

/** Read a recipient's entries, ack for a device, show the recipient, forget a device. */
function registerRecipientRoutes(app: FastifyInstance, inboxes: InboxBroker): void {
  app.get<{ Params: RecipientPath; Querystring: InboxEntriesQuery }>(
    "/v1/inboxes/:ns/recipients/:recipient/entries",
    { schema: { tags, params: RecipientParams, querystring: InboxEntriesQuery } },
    async (request, reply) => {
      const { after = 0, epoch, limit, waitMs } = request.query;
      const read = await inboxes.read(request.params.ns, request.params.recipient, {
        after,
        epoch,
        limit,
        waitMs,
        signal: abortOnClose(reply.raw),
      });
      return reply.type("application/json").send(inboxEntriesJson(read));
    },
  );

  app.post<{ Params: RecipientPath; Body: InboxAckBody }>(
    "/v1/inboxes/:ns/recipients/:recipient/ack",
    { schema: { tags, params: RecipientParams, body: InboxAckBody } },
    (request) => {
      const { ns, recipient } = request.params;
      return inboxes.ack(ns, recipient, request.body.device, request.body.seq);
    },
  );

  app.get<{ Params: RecipientPath }>(
    "/v1/inboxes/:ns/recipients/:recipient",
    { schema: { tags, params: RecipientParams } },
    async (request) => {
      const { ns, recipient } = request.params;
      return renderRecipient(recipient, await inboxes.recipient(ns, recipient));
    },
  );

  app.delete<{ Params: DevicePath }>(
    "/v1/inboxes/:ns/recipients/:recipient/devices/:device",
    { schema: { tags, params: DeviceParams } },
    async (request, reply) => {
      const { ns, recipient, device } = request.params;
      await inboxes.deleteDevice(ns, recipient, device);
      return reply.status(204).send();
    },
  );
}
