/**
 * Who is calling the chat API, and what their devices may do in Hopper. A sign-in (a name, with no
 * password: this is a demonstration) opens a session; the session's bearer token authenticates every
 * later call. The API then issues the device JWT Hopper checks on `/v1/ws?token=`: `sub` is the user,
 * `hopper.inboxes` the `chat` namespace, `hopper.signals` the typing channels of the user's
 * conversations. The browser never sees Hopper's API key.
 */
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { SignJWT } from "jose";
import { limits, names, typingChannel } from "../config.js";
import type { ChatQueries } from "../db.js";

/** A user name is also their Hopper recipient name, so it keeps to a subset of Hopper's names. */
export const userNamePattern = "^[a-z0-9_-]{1,32}$";

export interface DeviceToken {
  token: string;
  expiresAt: string;
}

export class ChatAuth {
  private readonly key: Uint8Array;

  constructor(
    private readonly queries: ChatQueries,
    jwtSecret: string,
    private readonly now: () => Date,
  ) {
    this.key = new TextEncoder().encode(jwtSecret);
  }

  /** Creates the user on first sign-in (with a push token the stand-in vendor knows) and a session. */
  signIn(user: string): string {
    const at = this.now().toISOString();
    this.queries.insertUser.run(user, `push-${user}`, at);
    const session = randomUUID();
    this.queries.insertSession.run(session, user, at);
    return session;
  }

  /** The user of the request's session, or a 401 answer sent. */
  userOf(request: FastifyRequest, reply: FastifyReply): string | undefined {
    const header = request.headers.authorization ?? "";
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const row = match?.[1] === undefined ? undefined : this.queries.sessionUser.get(match[1]);
    if (row === undefined) {
      void reply.code(401).send({ error: { code: "unauthorized", message: "Sign in first." } });
      return undefined;
    }
    return row.userId;
  }

  /** A device token for `user`: their inbox, and the typing channels of their conversations now. */
  async deviceToken(user: string): Promise<DeviceToken> {
    const channels = this.queries.conversationsOf
      .all(user)
      .slice(-limits.tokenChannelsMax)
      .map((conversation) => typingChannel(conversation.id));
    const issuedAt = Math.floor(this.now().getTime() / 1000);
    const expiresAtSeconds = issuedAt + limits.deviceTokenTtlSeconds;
    const token = await new SignJWT({ hopper: { inboxes: [names.inbox], signals: channels } })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(user)
      .setIssuedAt(issuedAt)
      .setExpirationTime(expiresAtSeconds)
      .sign(this.key);
    return { token, expiresAt: new Date(expiresAtSeconds * 1000).toISOString() };
  }
}
