/**
 * The share-group routes of API.md "Streams": each validates (by schema), makes one broker call and
 * renders the answer. No semantics live here.
 */
import {
  AckBody,
  ExtendBody,
  GroupParams,
  PutShareBody,
  ShareNackBody,
  SharePendingQuery,
  ShareReceiveBody,
} from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { StreamShareBroker } from "../../broker/stream-shares.js";
import type { ShareInfo } from "../../model/stream-share.js";
import type { ShareRecord } from "../../store/stream-store.js";
import { renderItemResult } from "../wire/render.js";
import { streamRecordJson } from "../wire/stream-render.js";
import { abortOnClose } from "./abort-on-close.js";

type GroupPath = { stream: string; group: string };

const tags = ["streams"];

function renderShare(share: ShareInfo): Record<string, unknown> {
  return { ...share, createdAt: new Date(share.createdAt).toISOString() };
}

/** A delivered record: the record's fields, its receipt and how often it was delivered. */
function deliveryJson(record: ShareRecord): string {
  return `{"receipt":${JSON.stringify(record.receipt)},"deliveryCount":${record.deliveries},${streamRecordJson(record).slice(1)}`;
}

/** Share groups of a stream: create or update, receive, ack, nack, extend, pending. */
export function registerStreamShareRoutes(app: FastifyInstance, shares: StreamShareBroker): void {
  const path = "/v1/streams/:stream/shares/:group";
  app.put<{ Params: GroupPath; Body: PutShareBody | undefined }>(
    path,
    { schema: { tags, params: GroupParams, body: PutShareBody } },
    async (request, reply) => {
      const { created, share } = await shares.putShare(
        request.params.stream,
        request.params.group,
        request.body ?? {},
      );
      return reply.status(created ? 201 : 200).send(renderShare(share));
    },
  );

  app.post<{ Params: GroupPath; Body: ShareReceiveBody | undefined }>(
    `${path}/receive`,
    { schema: { tags, params: GroupParams, body: ShareReceiveBody } },
    async (request, reply) => {
      const { max, waitMs, visibilityTimeoutMs } = request.body ?? {};
      const records = await shares.receive(request.params.stream, request.params.group, {
        max,
        waitMs,
        visibilityTimeoutMs,
        signal: abortOnClose(reply.raw),
      });
      return reply.type("application/json").send(`{"messages":[${records.map(deliveryJson).join(",")}]}`);
    },
  );

  registerShareReceiptRoutes(app, shares, path);
  app.get<{ Params: GroupPath; Querystring: SharePendingQuery }>(
    `${path}/pending`,
    { schema: { tags, params: GroupParams, querystring: SharePendingQuery } },
    async (request) => {
      const { share, pending } = await shares.pending(
        request.params.stream,
        request.params.group,
        request.query.limit,
      );
      return {
        ...renderShare(share),
        pending: pending.map((item) => ({ ...item, visibleAt: new Date(item.visibleAt).toISOString() })),
      };
    },
  );
}

/** Ack, nack and extend by receipt. */
function registerShareReceiptRoutes(app: FastifyInstance, shares: StreamShareBroker, path: string): void {
  app.post<{ Params: GroupPath; Body: AckBody }>(
    `${path}/ack`,
    { schema: { tags, params: GroupParams, body: AckBody } },
    async (request) => ({
      results: (await shares.ack(request.params.stream, request.params.group, request.body.receipts)).map(
        renderItemResult,
      ),
    }),
  );

  app.post<{ Params: GroupPath; Body: ShareNackBody }>(
    `${path}/nack`,
    { schema: { tags, params: GroupParams, body: ShareNackBody } },
    async (request) => {
      const { receipts, delayMs } = request.body;
      return {
        results: (await shares.nack(request.params.stream, request.params.group, receipts, delayMs)).map(
          renderItemResult,
        ),
      };
    },
  );

  app.post<{ Params: GroupPath; Body: ExtendBody }>(
    `${path}/extend`,
    { schema: { tags, params: GroupParams, body: ExtendBody } },
    async (request) => {
      const { receipts, visibilityTimeoutMs } = request.body;
      const results = await shares.extend(
        request.params.stream,
        request.params.group,
        receipts,
        visibilityTimeoutMs,
      );
      return { results: results.map(renderItemResult) };
    },
  );
}
