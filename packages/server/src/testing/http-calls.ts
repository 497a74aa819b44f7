/**
 * Plain HTTP calls against a real server process, and snapshots of what it holds, for end-to-end
 * tests that check a refused request changed nothing.
 */
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import type { ServerProcess } from "./server-process.js";

export const requestTimeoutMs = 10_000;
export const mebibyte = 1024 * 1024;
export const hourMs = 3_600_000;

export interface Answer {
  status: number;
  body: unknown;
  /** The response's headers (call() only). */
  headers?: Headers;
}

export interface WireError {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export interface RequestOptions {
  /** Sent as is, instead of the JSON text of `body`: text, or bytes that need not be UTF-8. */
  raw?: string | Uint8Array<ArrayBuffer>;
  headers?: Record<string, string>;
  /** How long the answer may take (default requestTimeoutMs). */
  timeoutMs?: number;
}

/** One HTTP call; the answer's body is parsed JSON, or undefined when there is none. */
export async function call(
  server: ServerProcess,
  method: string,
  path: string,
  body?: unknown,
  options: RequestOptions = {},
): Promise<Answer> {
  const text = options.raw ?? (body === undefined ? undefined : JSON.stringify(body));
  const headers: Record<string, string> = {
    ...(text !== undefined && { "content-type": "application/json" }),
    ...options.headers,
  };
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(text !== undefined && { body: text }),
    signal: AbortSignal.timeout(options.timeoutMs ?? requestTimeoutMs),
  });
  const answer = await response.text();
  return {
    status: response.status,
    body: answer === "" ? undefined : JSON.parse(answer),
    headers: response.headers,
  };
}

/**
 * Sends only the headers of a POST that announces `contentLength` bytes of JSON, and resolves with
 * the answer the server gives before any of the body arrives. Uploading the body would race the
 * server's early answer (see the 413 test below).
 */
export function announceBody(server: ServerProcess, path: string, contentLength: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(new URL(path, server.url), {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(contentLength) },
      timeout: requestTimeoutMs,
    });
    request.on("timeout", () => request.destroy(new Error("no answer before the body was sent")));
    request.on("error", reject);
    request.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        text += chunk;
      });
      response.on("end", () => {
        request.destroy();
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) });
      });
    });
    request.flushHeaders();
  });
}

export function queuePath(name: string, rest = ""): string {
  return `/v1/queues/${encodeURIComponent(name)}${rest}`;
}

/** The `{"error": {...}}` of an answer, checked for the catalog's shape. */
export function wireError(body: unknown): WireError {
  const error = (body as { error?: WireError } | undefined)?.error;
  assert.ok(error && typeof error === "object", `expected {"error": {...}}, got ${JSON.stringify(body)}`);
  assert.equal(typeof error.code, "string", JSON.stringify(body));
  assert.equal(typeof error.message, "string", JSON.stringify(body));
  return error;
}

export function assertError(answer: Answer, status: number, code: string): WireError {
  assert.equal(answer.status, status, `status of ${JSON.stringify(answer.body)}`);
  const error = wireError(answer.body);
  assert.equal(error.code, code, JSON.stringify(answer.body));
  return error;
}

/** The per-item results of a 200 batch answer. */
export function results(answer: Answer): unknown[] {
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const items = (answer.body as { results?: unknown[] }).results;
  assert.ok(Array.isArray(items), JSON.stringify(answer.body));
  return items;
}

export function itemErrorCode(item: unknown): string {
  return wireError(item).code;
}

export function sentId(item: unknown): string {
  const id = (item as { id?: unknown }).id;
  assert.equal(typeof id, "string", `expected a sent message's id, got ${JSON.stringify(item)}`);
  return id as string;
}

/** Stats without the one field that moves with the clock alone. */
export function withoutAge(queue: unknown): unknown {
  const { stats, ...rest } = queue as { stats: Record<string, unknown> };
  const { oldestMessageAgeMs: _age, ...steady } = stats;
  return { ...rest, stats: steady };
}

export const peekStates = ["available", "delayed", "in-flight"] as const;

/** Everything a client could observe about the server's queues, minus the passage of time. */
export async function snapshot(server: ServerProcess, watched: readonly string[]): Promise<unknown> {
  const list = await call(server, "GET", "/v1/queues");
  assert.equal(list.status, 200, JSON.stringify(list.body));
  const queues = (list.body as { queues: unknown[] }).queues.map(withoutAge);
  const details = await Promise.all(
    watched.map(async (name) => {
      const info = await call(server, "GET", queuePath(name));
      if (info.status !== 200) return { name, status: info.status, body: info.body };
      const peeks = await Promise.all(
        peekStates.map(async (state) => {
          const peek = await call(server, "GET", queuePath(name, `/messages?state=${state}&limit=1000`));
          assert.equal(peek.status, 200, JSON.stringify(peek.body));
          return [state, peek.body];
        }),
      );
      return { name, info: withoutAge(info.body), peeks: Object.fromEntries(peeks) };
    }),
  );
  return { queues, details };
}

/** Runs `action` and asserts that nothing observable about `watched` (or the queue list) changed. */
export async function unchanged<T>(
  server: ServerProcess,
  watched: readonly string[],
  action: () => Promise<T>,
): Promise<T> {
  const earlier = await snapshot(server, watched);
  const outcome = await action();
  assert.deepEqual(await snapshot(server, watched), earlier, "a rejected request changed the server's state");
  return outcome;
}

export async function stats(server: ServerProcess, name: string): Promise<Record<string, number>> {
  const info = await call(server, "GET", queuePath(name));
  assert.equal(info.status, 200, JSON.stringify(info.body));
  return (info.body as { stats: Record<string, number> }).stats;
}

export async function peekAvailable(
  server: ServerProcess,
  name: string,
): Promise<{ id: string; body: unknown }[]> {
  const peek = await call(server, "GET", queuePath(name, "/messages?state=available&limit=1000"));
  assert.equal(peek.status, 200, JSON.stringify(peek.body));
  return (peek.body as { messages: { id: string; body: unknown }[] }).messages;
}

export async function putQueue(server: ServerProcess, name: string, attributes: object = {}): Promise<void> {
  const answer = await call(server, "PUT", queuePath(name), attributes);
  assert.ok(answer.status === 201 || answer.status === 200, JSON.stringify(answer.body));
}

export async function send(server: ServerProcess, name: string, messages: object[]): Promise<string[]> {
  return results(await call(server, "POST", queuePath(name, "/messages"), { messages })).map(sentId);
}

export async function receive(server: ServerProcess, name: string, max: number): Promise<string[]> {
  const answer = await call(server, "POST", queuePath(name, "/receive"), {
    max,
    visibilityTimeoutMs: hourMs,
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return (answer.body as { messages: { receipt: string }[] }).messages.map((message) => message.receipt);
}
