/**
 * The chat API: a Fastify server over the application's SQLite database. It signs people in and
 * issues their device tokens, keeps conversations and messages (sends, history, receipts: see
 * messages.ts), answers the ops strip with figures it reads from Hopper (ops.ts), and serves the web
 * page (static-files.ts). It talks to Hopper only through its public HTTP API, with the API key.
 */
import { randomUUID } from "node:crypto";
import { HopperClient } from "@hopper/client";
import type Database from "better-sqlite3";
import Fastify, { type FastifyInstance } from "fastify";
import { type ChatEnv, limits, names } from "../config.js";
import { type ChatQueries, chatQueries } from "../db.js";
import { HopperInboxes } from "../hopper-inboxes.js";
import { ChatAuth, userNamePattern } from "./auth.js";
import { messageRoutes } from "./messages.js";
import { type OpsDeps, readOps } from "./ops.js";
import { staticRoutes } from "./static-files.js";

export interface ChatApiOptions {
  env: ChatEnv;
  db: Database.Database;
  now?: () => Date;
}

function conversationView(queries: ChatQueries, id: string) {
  const conversation = queries.conversation.get(id);
  if (conversation === undefined) return undefined;
  return { ...conversation, members: queries.members.all(id).map((row) => row.userId) };
}

function conversationRoutes(
  app: FastifyInstance,
  db: Database.Database,
  queries: ChatQueries,
  auth: ChatAuth,
) {
  app.get("/api/conversations", async (request, reply) => {
    const user = auth.userOf(request, reply);
    if (user === undefined) return reply;
    return {
      conversations: queries.conversationsOf.all(user).map((row) => conversationView(queries, row.id)),
    };
  });

  const create = db.transaction((title: string, members: string[], at: string) => {
    const id = randomUUID();
    queries.insertConversation.run(id, title, at);
    for (const member of members) {
      queries.insertUser.run(member, `push-${member}`, at);
      queries.insertMember.run(id, member);
    }
    return id;
  });
  app.post<{ Body: { title?: string; members: string[] } }>(
    "/api/conversations",
    {
      schema: {
        body: {
          type: "object",
          additionalProperties: false,
          required: ["members"],
          properties: {
            title: { type: "string", minLength: 1, maxLength: 100 },
            members: {
              type: "array",
              minItems: 1,
              maxItems: limits.membersMax - 1,
              items: { type: "string", pattern: userNamePattern },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const user = auth.userOf(request, reply);
      if (user === undefined) return reply;
      const members = [...new Set([user, ...request.body.members])].sort();
      const title = request.body.title ?? members.join(", ");
      const id = create.immediate(title, members, new Date().toISOString());
      return reply.code(201).send({ conversation: conversationView(queries, id) });
    },
  );
}

/** Sign-in, a new device token, and the inbox position a device's first load starts from. */
function sessionRoutes(app: FastifyInstance, env: ChatEnv, auth: ChatAuth, inboxes: HopperInboxes): void {
  app.post<{ Body: { name: string } }>(
    "/api/signin",
    {
      schema: {
        body: {
          type: "object",
          additionalProperties: false,
          required: ["name"],
          properties: { name: { type: "string", pattern: userNamePattern } },
        },
      },
    },
    async (request) => {
      const user = request.body.name;
      const session = auth.signIn(user);
      return { user, session, hopperUrl: env.hopperPublicUrl, ...(await auth.deviceToken(user)) };
    },
  );
  app.post("/api/token", async (request, reply) => {
    const user = auth.userOf(request, reply);
    if (user === undefined) return reply;
    return { user, hopperUrl: env.hopperPublicUrl, ...(await auth.deviceToken(user)) };
  });
  // The first load of a page reads its inbox head before history (docs/inboxes.md, "The first load").
  app.get("/api/inbox/position", async (request, reply) => {
    const user = auth.userOf(request, reply);
    if (user === undefined) return reply;
    const { head, epoch } = await inboxes.recipient(user);
    return { head, epoch };
  });
}

/** Search and the ops strip's figures. */
function lookupRoutes(app: FastifyInstance, ops: OpsDeps, auth: ChatAuth): void {
  const { queries } = ops;
  app.get<{ Querystring: { q: string } }>(
    "/api/search",
    {
      schema: {
        querystring: {
          type: "object",
          additionalProperties: false,
          required: ["q"],
          properties: { q: { type: "string", minLength: 1, maxLength: 200 } },
        },
      },
    },
    async (request, reply) => {
      const user = auth.userOf(request, reply);
      if (user === undefined) return reply;
      // Each word as a quoted FTS5 string, so the user's text is never read as query syntax.
      const words = request.query.q.split(/\s+/).filter((word) => word !== "");
      const match = words.map((word) => `"${word.replaceAll('"', '""')}"`).join(" ");
      return { results: queries.search.all(match, user, limits.searchResultsMax) };
    },
  );
  app.get("/api/ops", async (request, reply) => {
    const user = auth.userOf(request, reply);
    if (user === undefined) return reply;
    return readOps(ops);
  });
}

export async function buildChatApi(options: ChatApiOptions): Promise<FastifyInstance> {
  const { env, db } = options;
  const now = options.now ?? (() => new Date());
  const queries = chatQueries(db);
  const auth = new ChatAuth(queries, env.jwtSecret, now);
  const hopperAccess = { url: env.hopperUrl, apiKey: env.hopperApiKey };
  const hopper = new HopperClient(hopperAccess);
  const inboxes = new HopperInboxes(hopperAccess, names.inbox);
  const app = Fastify({ logger: false });
  app.addHook("onClose", async () => hopper.close());
  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, _request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 500) console.error("chat api:", error);
    const code = status >= 500 ? "internal" : (error.code ?? "invalid_request");
    return reply.code(status).send({ error: { code, message: error.message } });
  });

  sessionRoutes(app, env, auth, inboxes);
  lookupRoutes(
    app,
    { hopper, hopperUrl: env.hopperUrl, hopperApiKey: env.hopperApiKey, inboxes, db, queries },
    auth,
  );
  conversationRoutes(app, db, queries, auth);
  messageRoutes(app, { env, db, queries, auth, inboxes, now });
  staticRoutes(app);
  return app;
}
