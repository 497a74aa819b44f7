/** What the inbox end-to-end tests share: a device token for a recipient, and JSON over HTTP. */
import assert from "node:assert/strict";
import { SignJWT } from "jose";
import type { ServerProcess } from "./server-process.js";

/** An HS256 device token for `sub`, allowed the namespace "chat", signed with `secret`. */
export function deviceToken(secret: string, sub: string): Promise<string> {
  return new SignJWT({ hopper: { inboxes: ["chat"] } })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(sub)
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode(secret));
}

/** One JSON request to the server; asserts a 2xx and answers the parsed body. */
export async function httpJson(
  server: ServerProcess,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}
