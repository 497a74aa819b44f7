/**
 * The consumer-group routes of API.md "Streams": each validates (by schema), makes one broker call and
 * renders the answer. No semantics live here.
 */
import { CommitBody, FetchBody, GroupParams, LeaveBody, ResetBody, StreamParams } from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { StreamGroupBroker } from "../../broker/stream-groups.js";
import type { GroupInfo, GroupResetTarget } from "../../model/stream-group.js";
import { renderItemResult } from "../wire/render.js";
import { streamRecordJson, timeOf } from "../wire/stream-render.js";
import { abortOnClose } from "./abort-on-close.js";

type StreamPath = { stream: string };
type GroupPath = { stream: string; group: string };

const tags = ["streams"];

function renderGroup(group: GroupInfo): Record<string, unknown> {
  return {
    ...group,
    createdAt: new Date(group.createdAt).toISOString(),
    lastActiveAt: new Date(group.lastActiveAt).toISOString(),
    members: group.members.map((member) => ({
      ...member,
      lastSeenAt: new Date(member.lastSeenAt).toISOString(),
    })),
  };
}

/** The consumer groups of a stream: fetch, commit, leave, list, show, delete, reset. */
export function registerStreamGroupRoutes(app: FastifyInstance, groups: StreamGroupBroker): void {
  app.post<{ Params: GroupPath; Body: FetchBody }>(
    "/v1/streams/:stream/groups/:group/fetch",
    { schema: { tags, params: GroupParams, body: FetchBody } },
    async (request, reply) => {
      const { member, max, waitMs, start } = request.body;
      const { stream, group } = request.params;
      const fetched = await groups.fetch(stream, group, member, {
        max,
        waitMs,
        start,
        signal: abortOnClose(reply.raw),
      });
      return reply
        .type("application/json")
        .send(
          `{"generation":${fetched.generation},"records":[${fetched.records.map(streamRecordJson).join(",")}]}`,
        );
    },
  );

  app.post<{ Params: GroupPath; Body: CommitBody }>(
    "/v1/streams/:stream/groups/:group/commit",
    { schema: { tags, params: GroupParams, body: CommitBody } },
    async (request) => {
      const { member, generation, offsets } = request.body;
      const results = await groups.commit(
        request.params.stream,
        request.params.group,
        member,
        generation,
        offsets,
      );
      return { results: results.map(renderItemResult) };
    },
  );

  app.post<{ Params: GroupPath; Body: LeaveBody }>(
    "/v1/streams/:stream/groups/:group/leave",
    { schema: { tags, params: GroupParams, body: LeaveBody } },
    (request) => groups.leave(request.params.stream, request.params.group, request.body.member),
  );

  app.get<{ Params: StreamPath }>(
    "/v1/streams/:stream/groups",
    { schema: { tags, params: StreamParams } },
    async (request) => ({ groups: (await groups.listGroups(request.params.stream)).map(renderGroup) }),
  );

  app.get<{ Params: GroupPath }>(
    "/v1/streams/:stream/groups/:group",
    { schema: { tags, params: GroupParams } },
    async (request) => renderGroup(await groups.getGroup(request.params.stream, request.params.group)),
  );

  app.delete<{ Params: GroupPath }>(
    "/v1/streams/:stream/groups/:group",
    { schema: { tags, params: GroupParams } },
    async (request, reply) => {
      await groups.deleteGroup(request.params.stream, request.params.group);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: GroupPath; Body: ResetBody }>(
    "/v1/streams/:stream/groups/:group/reset",
    { schema: { tags, params: GroupParams, body: ResetBody } },
    async (request) => {
      const { to, force = false } = request.body;
      const target: GroupResetTarget =
        typeof to === "object" && "time" in to
          ? { time: typeof to.time === "number" ? to.time : timeOf(to.time) }
          : to;
      return renderGroup(await groups.resetGroup(request.params.stream, request.params.group, target, force));
    },
  );
}
