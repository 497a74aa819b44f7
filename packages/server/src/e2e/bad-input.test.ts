/**
 * DESIGN.md §1.6 through the real server process: every bad request gets its exact status and error
 * code, and changes nothing. Each case takes a snapshot of the queue list (with stats), the queues it
 * touches (attributes, stats, and a peek of every message state) before and after, and compares them.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  announceBody,
  assertError,
  call,
  hourMs,
  itemErrorCode,
  mebibyte,
  peekAvailable,
  putQueue,
  queuePath,
  type RequestOptions,
  receive,
  results,
  send,
  sentId,
  snapshot,
  stats,
  unchanged,
  type WireError,
  wireError,
} from "../testing/http-calls.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

describe("bad input through the real server", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let dir: TempDir;
  let server: ServerProcess;
  // A queue with messages in every state, whose dead-letter queue is base-dlq.
  const base = ["base", "base-dlq"];

  before(async () => {
    dir = createTempDir();
    server = await startServerProcess({ dataFile: dir.file("hopper.db") });
    await putQueue(server, "base-dlq");
    await putQueue(server, "base", { deadLetter: { queue: "base-dlq", maxDeliveries: 5 } });
    await send(server, "base", [{ body: { n: 1 } }, { body: { n: 2 } }, { body: "three" }, { body: [4] }]);
    await send(server, "base", [{ body: { n: 5 }, delayMs: hourMs }]);
    assert.equal((await receive(server, "base", 1)).length, 1);
    const baseStats = await stats(server, "base");
    assert.deepEqual([baseStats.available, baseStats.delayed, baseStats.inFlight], [3, 1, 1]);
  });

  after(async () => {
    const exit = await server?.stop();
    dir?.remove();
    assert.deepEqual(exit, { code: 0, signal: null }, `graceful stop; stderr:\n${server?.stderr()}`);
  });

  /** Sends one request that must be refused with `status` and `code`, and change nothing. */
  async function refused(
    watched: readonly string[],
    request: [method: string, path: string, body?: unknown, options?: RequestOptions],
    status: number,
    code: string,
  ): Promise<WireError> {
    const earlier = await snapshot(server, watched);
    const error = assertError(await call(server, ...request), status, code);
    assert.deepEqual(
      await snapshot(server, watched),
      earlier,
      "a rejected request changed the server's state",
    );
    return error;
  }

  test("the snapshot sees a change (so an unchanged snapshot means something)", async () => {
    await putQueue(server, "sanity");
    const earlier = await snapshot(server, ["sanity"]);
    await send(server, "sanity", [{ body: 1 }]);
    assert.notDeepEqual(await snapshot(server, ["sanity"]), earlier);
  });

  describe("malformed bodies", () => {
    const cases: [label: string, method: string, path: string][] = [
      ["send", "POST", queuePath("base", "/messages")],
      ["receive", "POST", queuePath("base", "/receive")],
      ["ack", "POST", queuePath("base", "/ack")],
      ["put", "PUT", queuePath("json-new")],
    ];

    for (const [label, method, path] of cases) {
      test(`${label}: truncated JSON is 400 invalid_json`, async () => {
        await refused(
          [...base, "json-new"],
          [method, path, undefined, { raw: '{"messages": [' }],
          400,
          "invalid_json",
        );
      });
    }

    test("a __proto__ key is 400 invalid_json", async () => {
      const raw = '{"__proto__": {"polluted": true}, "messages": [{"body": 1}]}';
      await refused(base, ["POST", queuePath("base", "/messages"), undefined, { raw }], 400, "invalid_json");
    });

    test("a body that is not UTF-8 is 400 invalid_json, even where it would parse", async () => {
      // 0xff 0xfe inside a string: decoded with replacement characters it is valid JSON, but a body is
      // stored as its bytes, and these could not reach a consumer in a text frame.
      const bytes = [
        Buffer.from('{"messages": [{"body": "a'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('b"}]}'),
      ];
      const raw = new Uint8Array(Buffer.concat(bytes));
      await refused(base, ["POST", queuePath("base", "/messages"), undefined, { raw }], 400, "invalid_json");
    });

    test("a form-encoded body is 415 unsupported_media_type", async () => {
      const options = { raw: "a=1", headers: { "content-type": "application/x-www-form-urlencoded" } };
      await refused(
        base,
        ["POST", queuePath("base", "/messages"), undefined, options],
        415,
        "unsupported_media_type",
      );
    });

    // Fastify's own text/plain parser is removed: JSON is the only body the API takes.
    test("a text/plain body is 415 unsupported_media_type", async () => {
      const options = { raw: '{"messages":[{"body":1}]}', headers: { "content-type": "text/plain" } };
      await refused(
        base,
        ["POST", queuePath("base", "/messages"), undefined, options],
        415,
        "unsupported_media_type",
      );
    });

    test("an empty JSON body where one is required is 400", async () => {
      await refused(
        base,
        ["POST", queuePath("base", "/messages"), undefined, { raw: "" }],
        400,
        "invalid_request",
      );
    });
  });

  describe("unknown fields and wrong types are 400 invalid_request", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const cases: [string, string, string, unknown, string[]?][] = [
      ["send: unknown top-level field", "POST", "/messages", { messages: [{ body: 1 }], urgent: true }],
      [
        "send: unknown field in the second message (the valid first is not stored either)",
        "POST",
        "/messages",
        { messages: [{ body: 1 }, { body: 2, colour: "red" }] },
      ],
      ["send: messages is not an array", "POST", "/messages", { messages: { body: 1 } }],
      ["send: an empty batch", "POST", "/messages", { messages: [] }],
      ["send: a message with neither body nor bodyBase64", "POST", "/messages", { messages: [{}] }],
      ["send: delayMs -1", "POST", "/messages", { messages: [{ body: 1, delayMs: -1 }] }],
      ["send: delayMs as a string", "POST", "/messages", { messages: [{ body: 1, delayMs: "5" }] }],
      [
        "send: a header value that is a number",
        "POST",
        "/messages",
        { messages: [{ body: 1, headers: { a: 1 } }] },
      ],
      ["send: bodyBase64 that is not base64", "POST", "/messages", { messages: [{ bodyBase64: "!!!" }] }],
      [
        "send: a JSON body with another contentType",
        "POST",
        "/messages",
        { messages: [{ body: "x", contentType: "text/plain" }] },
      ],
      [
        "send: bodyBase64 declared JSON that is not JSON",
        "POST",
        "/messages",
        {
          messages: [
            { bodyBase64: Buffer.from("{nope").toString("base64"), contentType: "application/json" },
          ],
        },
      ],
      ["send: a key longer than 128", "POST", "/messages", { messages: [{ body: 1, key: "k".repeat(129) }] }],
      ["receive: max as a string", "POST", "/receive", { max: "5" }],
      ["receive: max 0", "POST", "/receive", { max: 0 }],
      ["receive: max 101", "POST", "/receive", { max: 101 }],
      ["receive: max 1.5", "POST", "/receive", { max: 1.5 }],
      ["receive: visibilityTimeoutMs -1", "POST", "/receive", { visibilityTimeoutMs: -1 }],
      ["receive: waitMs over 20 s", "POST", "/receive", { waitMs: 20_001 }],
      ["receive: unknown field", "POST", "/receive", { max: 1, wait: 5 }],
      ["receive: a JSON array", "POST", "/receive", [1]],
      ["ack: receipts as a string", "POST", "/ack", { receipts: "x" }],
      ["ack: no receipts", "POST", "/ack", { receipts: [] }],
      ["ack: a receipt that is a number", "POST", "/ack", { receipts: [1] }],
      ["ack: a receipt longer than 64", "POST", "/ack", { receipts: ["r".repeat(65)] }],
      ["ack: unknown field", "POST", "/ack", { receipts: ["a.b"], all: true }],
      ["nack: delayMs as a string", "POST", "/nack", { receipts: ["a.b"], delayMs: "1" }],
      ["nack: delayMs over 12 h", "POST", "/nack", { receipts: ["a.b"], delayMs: 12 * hourMs + 1 }],
      ["nack: deadLetter as a string", "POST", "/nack", { receipts: ["a.b"], deadLetter: "true" }],
      ["nack: deadLetter with delayMs", "POST", "/nack", { receipts: ["a.b"], deadLetter: true, delayMs: 0 }],
      ["nack: a reason without deadLetter", "POST", "/nack", { receipts: ["a.b"], reason: "rejected" }],
      ["nack: an empty reason", "POST", "/nack", { receipts: ["a.b"], deadLetter: true, reason: "" }],
      [
        "nack: a reason longer than 128",
        "POST",
        "/nack",
        { receipts: ["a.b"], deadLetter: true, reason: "r".repeat(129) },
      ],
      ["extend: no visibilityTimeoutMs", "POST", "/extend", { receipts: ["a.b"] }],
      ["extend: visibilityTimeoutMs -1", "POST", "/extend", { receipts: ["a.b"], visibilityTimeoutMs: -1 }],
      ["put: unknown attribute", "PUT", "", { visibilityTimeout: 1000 }],
      ["put: visibilityTimeoutMs as a string", "PUT", "", { visibilityTimeoutMs: "1000" }],
      ["put: an unknown kind", "PUT", "", { kind: "lifo" }],
      ["put: deadLetter without maxDeliveries", "PUT", "", { deadLetter: { queue: "base-dlq" } }],
      ["put: retry with an unknown field", "PUT", "", { retry: { initialDelayMs: 1, factor: 2 } }],
      ["put: visibilityTimeoutMs over 12 h", "PUT", "", { visibilityTimeoutMs: 12 * hourMs + 1 }],
      ["put: maxMessageBytes over the server's 1 MiB", "PUT", "", { maxMessageBytes: mebibyte + 1 }],
      ["put: maxMessageBytes 0", "PUT", "", { maxMessageBytes: 0 }],
      ["put: retentionMs over 365 days", "PUT", "", { retentionMs: 366 * 24 * hourMs }],
    ];

    for (const [label, method, rest, body] of cases) {
      test(label, async () => {
        await refused(base, [method, queuePath("base", rest), body], 400, "invalid_request");
      });
    }

    // A record with a patterned key must also refuse keys outside the pattern.
    test("send: a header name with a space", async () => {
      for (const headers of [{ "a b": "v" }, { "a b": 123 }]) {
        const body = { messages: [{ body: 1, headers }] };
        await refused(base, ["POST", queuePath("base", "/messages"), body], 400, "invalid_request");
      }
    });

    test("put: a new queue with an unknown attribute is not created", async () => {
      await refused(
        ["typo-new"],
        ["PUT", queuePath("typo-new"), { visibilityTimeout: 1000 }],
        400,
        "invalid_request",
      );
    });

    const badPeeks = ["limit=abc", "limit=0", "limit=1001", "state=bogus", "foo=1"];
    for (const query of badPeeks) {
      test(`peek: ?${query}`, async () => {
        await refused(base, ["GET", queuePath("base", `/messages?${query}`)], 400, "invalid_request");
      });
    }

    test("the error names the offending field", async () => {
      const error = await refused(
        base,
        ["POST", queuePath("base", "/messages"), { messages: [{ body: 1, colour: "red" }] }],
        400,
        "invalid_request",
      );
      assert.match(error.message, /colour/);
    });
  });

  describe("names outside [A-Za-z0-9_.:-]{1,128} are 400 invalid_name", () => {
    const requests: [string, string, unknown][] = [
      ["PUT", "", {}],
      ["POST", "/messages", { messages: [{ body: 1 }] }],
      ["POST", "/receive", {}],
      ["GET", "", undefined],
      ["DELETE", "", undefined],
    ];
    const badNames: [string, string][] = [
      ["a space", "a b"],
      ["a non-ASCII letter", "ä"],
      ["a slash", "a/b"],
    ];
    for (const [label, name] of badNames) {
      test(`${label}: ${JSON.stringify(name)}`, async () => {
        for (const [method, rest, body] of requests) {
          await refused(base, [method, queuePath(name, rest), body], 400, "invalid_name");
        }
      });
    }

    // The router matches the percent-encoded segment, so its length limit must leave room for 128.
    test("129 characters", async () => {
      for (const [method, rest, body] of requests) {
        await refused(base, [method, queuePath("a".repeat(129), rest), body], 400, "invalid_name");
      }
    });

    test("128 characters is a valid name", async () => {
      const name = `${"a".repeat(126)}:z`;
      const answer = await call(server, "PUT", queuePath(name), {});
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
    });
  });

  describe("size limits", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    test("a request body over 10 MiB is 413 request_too_large, answered from its Content-Length", async () => {
      const answer = await unchanged(server, base, () =>
        announceBody(server, queuePath("base", "/messages"), 10 * mebibyte + 1),
      );
      assertError(answer, 413, "request_too_large");
    });

    // The server drains (a bounded amount of) an oversized upload, so the client reads its 413.
    test("fetch uploading 11 MiB reads the 413 every time", async () => {
      const body = { messages: [{ body: "x".repeat(11 * mebibyte) }] };
      for (let attempt = 0; attempt < 20; attempt++) {
        assertError(
          await call(server, "POST", queuePath("base", "/messages"), body),
          413,
          "request_too_large",
        );
      }
    });

    test("a batch of 101 messages is 400 batch_too_large and stores nothing", async () => {
      const messages = Array.from({ length: 101 }, (_, n) => ({ body: n }));
      await refused(base, ["POST", queuePath("base", "/messages"), { messages }], 400, "batch_too_large");
      const receipts = Array.from({ length: 101 }, (_, n) => `${n}.1`);
      await refused(base, ["POST", queuePath("base", "/ack"), { receipts }], 400, "batch_too_large");
    });

    test("a batch of 100 messages is accepted (the limit is 100, not less)", async () => {
      await putQueue(server, "batch-100");
      const ids = await send(
        server,
        "batch-100",
        Array.from({ length: 100 }, (_, n) => ({ body: n })),
      );
      assert.equal(new Set(ids).size, 100);
      assert.equal((await stats(server, "batch-100")).available, 100);
    });

    test("an oversized message fails alone: its item is message_too_large, its neighbours are stored", async () => {
      await putQueue(server, "mixed");
      const answer = await call(server, "POST", queuePath("mixed", "/messages"), {
        messages: [{ body: "first" }, { body: "x".repeat(mebibyte) }, { body: "third" }],
      });
      const items = results(answer);
      assert.equal(items.length, 3);
      const firstId = sentId(items[0]);
      assert.equal(itemErrorCode(items[1]), "message_too_large");
      const thirdId = sentId(items[2]);
      const stored = await peekAvailable(server, "mixed");
      assert.deepEqual(
        stored.map(({ id, body }) => ({ id, body })),
        [
          { id: firstId, body: "first" },
          { id: thirdId, body: "third" },
        ],
      );
      const mixedStats = await stats(server, "mixed");
      assert.equal(mixedStats.published, 2);
    });

    describe("a queue with maxMessageBytes 10", () => {
      before(async () => {
        await putQueue(server, "tiny", { maxMessageBytes: 10 });
      });

      test("11 bytes of bodyBase64 is message_too_large for the item and stores nothing", async () => {
        const bodyBase64 = Buffer.alloc(11, 7).toString("base64");
        const answer = await unchanged(server, ["tiny"], () =>
          call(server, "POST", queuePath("tiny", "/messages"), { messages: [{ bodyBase64 }] }),
        );
        const [item] = results(answer);
        assert.equal(itemErrorCode(item), "message_too_large");
        assert.deepEqual(wireError(item).details, { bytes: 11, max: 10 });
      });

      test("a JSON body counts its JSON text: '\"123456789\"' is 11 bytes", async () => {
        const answer = await unchanged(server, ["tiny"], () =>
          call(server, "POST", queuePath("tiny", "/messages"), { messages: [{ body: "123456789" }] }),
        );
        assert.equal(itemErrorCode(results(answer)[0]), "message_too_large");
      });

      test("10 bytes is stored", async () => {
        const earlier = (await stats(server, "tiny")).available ?? 0;
        await send(server, "tiny", [{ bodyBase64: Buffer.alloc(10, 7).toString("base64") }]);
        assert.equal((await stats(server, "tiny")).available, earlier + 1);
      });
    });
  });

  describe("an unknown queue is 404 queue_not_found and is not created", () => {
    const requests: [string, string, unknown][] = [
      ["POST", "/messages", { messages: [{ body: 1 }] }],
      ["POST", "/receive", { max: 1 }],
      ["POST", "/ack", { receipts: ["1.1"] }],
      ["POST", "/nack", { receipts: ["1.1"] }],
      ["POST", "/extend", { receipts: ["1.1"], visibilityTimeoutMs: 1000 }],
      ["GET", "/messages", undefined],
      ["POST", "/purge", undefined],
      ["GET", "", undefined],
      ["DELETE", "", undefined],
    ];
    for (const [method, rest, body] of requests) {
      test(`${method} /v1/queues/missing${rest}`, async () => {
        const error = await refused(
          [...base, "missing"],
          [method, queuePath("missing", rest), body],
          404,
          "queue_not_found",
        );
        assert.deepEqual(error.details, { queue: "missing" });
      });
    }
  });

  describe("receipts that name no lease fail per item inside a 200", () => {
    let acked: string;
    let held: string;

    before(async () => {
      await putQueue(server, "leases");
      await send(server, "leases", [{ body: 1 }, { body: 2 }, { body: 3 }]);
      [acked, held] = (await receive(server, "leases", 2)) as [string, string];
      assert.ok(acked && held);
    });

    test("a batch with a real receipt and a malformed one: ok, then invalid_receipt", async () => {
      const answer = await call(server, "POST", queuePath("leases", "/ack"), {
        receipts: [acked, "not-a-receipt"],
      });
      const items = results(answer);
      assert.deepEqual(items[0], { ok: true });
      assert.equal(itemErrorCode(items[1]), "invalid_receipt");
      const leasesStats = await stats(server, "leases");
      assert.deepEqual([leasesStats.acked, leasesStats.inFlight, leasesStats.available], [1, 1, 1]);
    });

    for (const op of ["ack", "nack", "extend"] as const) {
      const extra = op === "extend" ? { visibilityTimeoutMs: 1000 } : {};

      test(`${op}: a malformed receipt is invalid_receipt and changes nothing`, async () => {
        const answer = await unchanged(server, ["leases"], () =>
          call(server, "POST", queuePath("leases", `/${op}`), { receipts: ["garbage!"], ...extra }),
        );
        assert.equal(itemErrorCode(results(answer)[0]), "invalid_receipt");
      });

      test(`${op}: the receipt of an acked message is stale_receipt and changes nothing`, async () => {
        const answer = await unchanged(server, ["leases"], () =>
          call(server, "POST", queuePath("leases", `/${op}`), { receipts: [acked], ...extra }),
        );
        assert.equal(itemErrorCode(results(answer)[0]), "stale_receipt");
      });

      test(`${op}: a well-formed receipt that was never issued is stale_receipt`, async () => {
        const answer = await unchanged(server, ["leases"], () =>
          call(server, "POST", queuePath("leases", `/${op}`), { receipts: ["zzzzz.zzzz"], ...extra }),
        );
        assert.equal(itemErrorCode(results(answer)[0]), "stale_receipt");
      });

      test(`${op}: a live receipt sent to another queue is stale_receipt there, and its lease holds`, async () => {
        const answer = await unchanged(server, ["leases", ...base], () =>
          call(server, "POST", queuePath("base", `/${op}`), { receipts: [held], ...extra }),
        );
        assert.equal(itemErrorCode(results(answer)[0]), "stale_receipt");
      });
    }
  });

  describe("queue attributes", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const outOfRange: [string, object][] = [
      ["retentionMs 1000 (under 60 s)", { retentionMs: 1000 }],
      ["delayMs longer than the retention", { delayMs: 15 * 24 * hourMs }],
      ["retry.maxDelayMs under retry.initialDelayMs", { retry: { initialDelayMs: 5000, maxDelayMs: 1000 } }],
      ["a queue as its own dead-letter queue", { deadLetter: { queue: "base", maxDeliveries: 1 } }],
    ];
    for (const [label, attributes] of outOfRange) {
      test(`${label} is 400 invalid_attribute, on update and on create`, async () => {
        await refused(base, ["PUT", queuePath("base"), attributes], 400, "invalid_attribute");
        const create = label.includes("own")
          ? { deadLetter: { queue: "range-new", maxDeliveries: 1 } }
          : attributes;
        await refused(["range-new"], ["PUT", queuePath("range-new"), create], 400, "invalid_attribute");
      });
    }

    test("an attribute API.md names but the server lacks (alerts) is 400 not_implemented", async () => {
      await refused(
        base,
        ["PUT", queuePath("base"), { alerts: { oldestAgeMs: 10 } }],
        400,
        "not_implemented",
      );
    });

    test("a publish over a queue's pushback limit is 429 backpressure with Retry-After, nothing stored", async () => {
      assert.equal((await call(server, "PUT", queuePath("pushback"), { pushbackDepth: 1 })).status, 201);
      const send = () =>
        call(server, "POST", queuePath("pushback", "/messages"), { messages: [{ body: 1 }] });
      assert.equal((await send()).status, 200);
      const refusal = await send();
      assert.equal(refusal.status, 429);
      assert.equal((refusal.body as { error: WireError }).error.code, "backpressure");
      assert.equal(refusal.headers?.get("retry-after"), "1");
      assert.equal((await stats(server, "pushback")).published, 1);
    });

    test("overflow dead-letter-oldest without a deadLetter target is 400 invalid_attribute", async () => {
      const attributes = { maxDepth: 5, overflow: "dead-letter-oldest" };
      await refused(
        ["overflow-new"],
        ["PUT", queuePath("overflow-new"), attributes],
        400,
        "invalid_attribute",
      );
    });

    test("contentBasedDedup without a dedupWindowMs is 400 invalid_attribute", async () => {
      await refused(base, ["PUT", queuePath("base"), { contentBasedDedup: true }], 400, "invalid_attribute");
    });

    test("maxDepth 0 and priority 10 break the schema: 400 invalid_request", async () => {
      await refused(base, ["PUT", queuePath("base"), { maxDepth: 0 }], 400, "invalid_request");
      const message = { body: 1, priority: 10 };
      await refused(
        base,
        ["POST", `${queuePath("base")}/messages`, { messages: [message] }],
        400,
        "invalid_request",
      );
    });

    test("changing an existing queue's kind is 409 queue_kind_mismatch (API.md), queue unchanged", async () => {
      const error = await refused(
        base,
        ["PUT", queuePath("base"), { kind: "fifo" }],
        409,
        "queue_kind_mismatch",
      );
      assert.deepEqual(error.details, { kind: "standard" });
    });

    test("a dead-letter queue that does not exist is 400 dead_letter_queue_not_found", async () => {
      const deadLetter = { queue: "nowhere", maxDeliveries: 3 };
      await refused(
        ["dl-new", "nowhere"],
        ["PUT", queuePath("dl-new"), { deadLetter }],
        400,
        "dead_letter_queue_not_found",
      );
      await refused(
        [...base, "nowhere"],
        ["PUT", queuePath("base"), { deadLetter }],
        400,
        "dead_letter_queue_not_found",
      );
    });

    test("deleting another queue's dead-letter queue is 409 queue_in_use, and both remain", async () => {
      const error = await refused(base, ["DELETE", queuePath("base-dlq")], 409, "queue_in_use");
      assert.deepEqual(error.details, { deadLetterSources: ["base"] });
    });
  });

  test("a message with both body and bodyBase64 is 400 invalid_request; its valid neighbour is not stored", async () => {
    const messages = [{ body: "fine" }, { body: 1, bodyBase64: "AA==" }];
    await refused(base, ["POST", queuePath("base", "/messages"), { messages }], 400, "invalid_request");
  });

  // Fastify hands the validator null for a request without a body.
  test("a bodiless PUT and receive are accepted", async () => {
    const put = await call(server, "PUT", queuePath("bodiless"));
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const received = await call(server, "POST", queuePath("bodiless", "/receive"));
    assert.equal(received.status, 200, JSON.stringify(received.body));
  });
});
