/**
 * The queue routes of API.md: each validates (by schema), makes one broker call and renders the
 * answer. No semantics live here.
 */
import {
  AckBody,
  ExtendBody,
  NackBody,
  PeekQuery,
  PutQueueBody,
  QueueParams,
  ReceiveBody,
  RedriveBody,
  SendBody,
  TaskParams,
} from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { QueueBroker } from "../../broker/queues.js";
import { limits } from "../../limits.js";
import { decodeMessages } from "../wire/messages.js";
import { leasedListJson, renderItemResult, renderStored, renderTask } from "../wire/render.js";

type QueuePath = { queue: string };

/** Aborts when the client goes away before the answer is sent, so a long poll stops waiting. */
function abortOnClose(raw: import("node:http").ServerResponse): AbortSignal {
  const controller = new AbortController();
  raw.on("close", () => {
    if (!raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The queue routes of API.md: a queue's own, its messages', and the redrive tasks'. */
export function registerQueueRoutes(app: FastifyInstance, broker: QueueBroker): void {
  registerQueueAdminRoutes(app, broker);
  registerMessageRoutes(app, broker);
  registerTaskRoutes(app, broker);
}

const tags = ["queues"];

/** Create or update, list, read and delete queues. */
function registerQueueAdminRoutes(app: FastifyInstance, broker: QueueBroker): void {
  app.put<{ Params: QueuePath; Body: PutQueueBody | undefined }>(
    "/v1/queues/:queue",
    { schema: { tags, params: QueueParams, body: PutQueueBody } },
    async (request, reply) => {
      const { created, queue } = await broker.putQueue(request.params.queue, request.body ?? {});
      return reply.status(created ? 201 : 200).send(queue);
    },
  );

  app.get("/v1/queues", { schema: { tags } }, async () => {
    const queues = await broker.listQueues();
    return { queues: queues.map(({ name, kind, stats }) => ({ name, kind, stats })) };
  });

  app.get<{ Params: QueuePath }>("/v1/queues/:queue", { schema: { tags, params: QueueParams } }, (request) =>
    broker.getQueue(request.params.queue),
  );

  app.delete<{ Params: QueuePath }>(
    "/v1/queues/:queue",
    { schema: { tags, params: QueueParams } },
    async (request, reply) => {
      await broker.deleteQueue(request.params.queue);
      return reply.status(204).send();
    },
  );
}

/** Send, receive, ack, nack, extend, peek and purge a queue's messages. */
function registerMessageRoutes(app: FastifyInstance, broker: QueueBroker): void {
  app.post<{ Params: QueuePath; Body: SendBody }>(
    "/v1/queues/:queue/messages",
    { schema: { tags, params: QueueParams, body: SendBody } },
    async (request) => {
      const messages = decodeMessages(request.body.messages, request.bodyBytes);
      const results = await broker.send(request.params.queue, messages);
      return { results: results.map(renderItemResult) };
    },
  );

  app.post<{ Params: QueuePath; Body: ReceiveBody | undefined }>(
    "/v1/queues/:queue/receive",
    { schema: { tags, params: QueueParams, body: ReceiveBody } },
    async (request, reply) => {
      const body = request.body ?? {};
      const messages = await broker.receive(request.params.queue, {
        ...body,
        signal: abortOnClose(reply.raw),
      });
      return reply.type("application/json").send(leasedListJson(`{"messages":[`, messages, "]}"));
    },
  );

  app.post<{ Params: QueuePath; Body: AckBody }>(
    "/v1/queues/:queue/ack",
    { schema: { tags, params: QueueParams, body: AckBody } },
    async (request) => {
      const results = await broker.ack(request.params.queue, request.body.receipts);
      return { results: results.map(renderItemResult) };
    },
  );

  app.post<{ Params: QueuePath; Body: NackBody }>(
    "/v1/queues/:queue/nack",
    { schema: { tags, params: QueueParams, body: NackBody } },
    async (request) => {
      const { receipts, ...options } = request.body;
      const results = await broker.nack(request.params.queue, receipts, options);
      return { results: results.map(renderItemResult) };
    },
  );

  app.post<{ Params: QueuePath; Body: ExtendBody }>(
    "/v1/queues/:queue/extend",
    { schema: { tags, params: QueueParams, body: ExtendBody } },
    async (request) => {
      const { receipts, visibilityTimeoutMs } = request.body;
      const results = await broker.extend(request.params.queue, receipts, visibilityTimeoutMs);
      return { results: results.map(renderItemResult) };
    },
  );

  app.get<{ Params: QueuePath; Querystring: PeekQuery }>(
    "/v1/queues/:queue/messages",
    { schema: { tags, params: QueueParams, querystring: PeekQuery } },
    async (request) => {
      const { state = "available", limit = limits.peekLimitDefault } = request.query;
      const messages = await broker.peek(request.params.queue, state, limit);
      return { messages: messages.map(renderStored) };
    },
  );

  app.post<{ Params: QueuePath }>(
    "/v1/queues/:queue/purge",
    { schema: { tags, params: QueueParams } },
    (request) => broker.purge(request.params.queue),
  );
}

/** Start a redrive, and read or cancel the tasks that redrives run. */
function registerTaskRoutes(app: FastifyInstance, broker: QueueBroker): void {
  app.post<{ Params: QueuePath; Body: RedriveBody | undefined }>(
    "/v1/queues/:queue/redrive",
    { schema: { tags, params: QueueParams, body: RedriveBody } },
    async (request, reply) => {
      const task = await broker.redrive(request.params.queue, request.body ?? {});
      return reply.status(202).send({ task: renderTask(task) });
    },
  );

  app.get("/v1/tasks", { schema: { tags: ["tasks"] } }, () => ({
    tasks: broker.listTasks().map(renderTask),
  }));

  app.get<{ Params: { id: string } }>(
    "/v1/tasks/:id",
    { schema: { tags: ["tasks"], params: TaskParams } },
    (request) => renderTask(broker.task(request.params.id)),
  );

  app.post<{ Params: { id: string } }>(
    "/v1/tasks/:id/cancel",
    { schema: { tags: ["tasks"], params: TaskParams } },
    (request) => renderTask(broker.cancelTask(request.params.id)),
  );
}
