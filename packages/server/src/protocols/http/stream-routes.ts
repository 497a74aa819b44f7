/**
 * The stream routes of API.md "Streams": each validates (by schema), makes one broker call and renders
 * the answer. No semantics live here.
 */
import {
  AppendRecordsBody,
  PartitionParams,
  PutStreamBody,
  StreamParams,
  StreamRecordsQuery,
} from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { StreamBroker } from "../../broker/streams.js";
import { sendBodySpans } from "../wire/body-spans.js";
import { renderItemResult } from "../wire/render.js";
import { renderStream, streamRecordsJson, timeOf } from "../wire/stream-render.js";
import { registerStreamGroupRoutes } from "./stream-group-routes.js";
import { registerStreamShareRoutes } from "./stream-share-routes.js";

type StreamPath = { stream: string };
type PartitionPath = { stream: string; partition: number };

const tags = ["streams"];

/** The stream routes of API.md: streams, appends and reads. */
export function registerStreamRoutes(app: FastifyInstance, streams: StreamBroker): void {
  registerStreamGroupRoutes(app, streams.groups);
  registerStreamShareRoutes(app, streams.shares);
  app.put<{ Params: StreamPath; Body: PutStreamBody | undefined }>(
    "/v1/streams/:stream",
    { schema: { tags, params: StreamParams, body: PutStreamBody } },
    async (request, reply) => {
      const { created, stream } = await streams.putStream(request.params.stream, request.body ?? {});
      return reply.status(created ? 201 : 200).send(renderStream(stream));
    },
  );

  app.get("/v1/streams", { schema: { tags } }, async () => ({
    streams: (await streams.listStreams()).map(renderStream),
  }));

  app.get<{ Params: StreamPath }>(
    "/v1/streams/:stream",
    { schema: { tags, params: StreamParams } },
    async (request) => renderStream(await streams.getStream(request.params.stream)),
  );

  app.delete<{ Params: StreamPath }>(
    "/v1/streams/:stream",
    { schema: { tags, params: StreamParams } },
    async (request, reply) => {
      await streams.deleteStream(request.params.stream);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: StreamPath; Body: AppendRecordsBody }>(
    "/v1/streams/:stream/records",
    { schema: { tags, params: StreamParams, body: AppendRecordsBody } },
    async (request) => {
      // A JSON body is stored as the bytes its producer sent (body-spans.ts), as a queue send's is.
      const bytes = request.bodyBytes;
      const spans = bytes ? (sendBodySpans(bytes, "records") ?? []) : [];
      const sentAs = spans.map((span) => span && bytes?.subarray(span.start, span.end));
      const results = await streams.append(request.params.stream, request.body.records, sentAs);
      return { results: results.map(renderItemResult) };
    },
  );

  app.get<{ Params: PartitionPath; Querystring: StreamRecordsQuery }>(
    "/v1/streams/:stream/partitions/:partition/records",
    { schema: { tags, params: PartitionParams, querystring: StreamRecordsQuery } },
    async (request, reply) => {
      const { from, fromTime, limit } = request.query;
      const read = await streams.read(request.params.stream, request.params.partition, {
        from,
        fromTime: fromTime === undefined ? undefined : timeOf(fromTime),
        limit,
      });
      return reply.type("application/json").send(streamRecordsJson(read));
    },
  );
}
