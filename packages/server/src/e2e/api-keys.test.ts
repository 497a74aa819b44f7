/**
 * API keys through the real server process (DESIGN.md §1.6): with --api-key every route but the health
 * checks needs `Authorization: Bearer <key>`, and a request without the right key changes nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { assertError, call, queuePath, requestTimeoutMs } from "../testing/http-calls.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

describe("authentication with --api-key", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let dir: TempDir;
  let server: ServerProcess;

  before(async () => {
    dir = createTempDir();
    server = await startServerProcess({ dataFile: dir.file("hopper.db"), apiKeys: ["secret1"] });
  });

  after(async () => {
    const exit = await server?.stop();
    dir?.remove();
    assert.deepEqual(exit, { code: 0, signal: null }, `graceful stop; stderr:\n${server?.stderr()}`);
  });

  const withKey = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });

  test("no Authorization header is 401 unauthorized, and the queue is not created", async () => {
    assertError(await call(server, "PUT", queuePath("secured"), {}), 401, "unauthorized");
    assertError(await call(server, "GET", "/v1/queues"), 401, "unauthorized");
    assertError(
      await call(server, "GET", queuePath("secured"), undefined, withKey("secret1")),
      404,
      "queue_not_found",
    );
  });

  test("a wrong key, or the right key in the wrong scheme, is 401 unauthorized", async () => {
    assertError(await call(server, "PUT", queuePath("secured"), {}, withKey("secret2")), 401, "unauthorized");
    assertError(
      await call(server, "PUT", queuePath("secured"), {}, withKey("secret1x")),
      401,
      "unauthorized",
    );
    const basic = { headers: { authorization: "Basic secret1" } };
    assertError(await call(server, "PUT", queuePath("secured"), {}, basic), 401, "unauthorized");
    assertError(
      await call(server, "GET", queuePath("secured"), undefined, withKey("secret1")),
      404,
      "queue_not_found",
    );
  });

  test("the right key is served", async () => {
    const put = await call(server, "PUT", queuePath("secured"), {}, withKey("secret1"));
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const list = await call(server, "GET", "/v1/queues", undefined, withKey("secret1"));
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(
      (list.body as { queues: { name: string }[] }).queues.map((queue) => queue.name),
      ["secured"],
    );
  });

  test("/metrics needs the key, and with it is Prometheus text with each queue's depth", async () => {
    const scrape = (init: RequestInit = {}) =>
      fetch(`${server.url}/metrics`, { ...init, signal: AbortSignal.timeout(requestTimeoutMs) });
    assert.equal((await scrape()).status, 401);
    await call(server, "PUT", queuePath("scraped"), {}, withKey("secret1"));
    const sent = await call(
      server,
      "POST",
      queuePath("scraped", "/messages"),
      { messages: [{ body: 1 }, { body: 2 }] },
      withKey("secret1"),
    );
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const answer = await scrape({ headers: withKey("secret1").headers });
    assert.equal(answer.status, 200);
    assert.match(answer.headers.get("content-type") ?? "", /^text\/plain/);
    const text = await answer.text();
    assert.match(text, /^hopper_queue_depth\{queue="scraped",state="available"\} 2$/m);
    assert.match(text, /^hopper_queue_messages_total\{queue="scraped",event="published"\} 2$/m);
  });

  test("/healthz and /readyz need no key", async () => {
    const health = await call(server, "GET", "/healthz");
    assert.equal(health.status, 200);
    assert.deepEqual(health.body, { status: "ok" });
    const ready = await call(server, "GET", "/readyz");
    assert.equal(ready.status, 200);
  });
});
