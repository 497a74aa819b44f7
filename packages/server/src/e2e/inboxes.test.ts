/**
 * The inbox routes through the real server process (API.md "Inboxes", docs/inboxes.md), on each store
 * that has inboxes: every route, the gap and its details, cursor_beyond_head, an all-or-nothing append,
 * an idempotent one, too_many_recipients, the long poll, and bad input that changes nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { limits } from "../limits.js";
import { e2eStores, type OpenedStore } from "../testing/e2e-stores.js";
import { type Answer, assertError, call, type WireError } from "../testing/http-calls.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

interface Entries {
  entries: { seq: number; id: string; body?: unknown; bodyBase64?: string; contentType: string }[];
  head: number;
  oldest: number;
  epoch: string;
}

const inboxPath = (ns: string, rest = "") => `/v1/inboxes/${ns}${rest}`;
const recipientPath = (ns: string, recipient: string, rest = "") =>
  inboxPath(ns, `/recipients/${recipient}${rest}`);

function ok<T>(answer: Answer, status = 200): T {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  return answer.body as T;
}

for (const store of e2eStores)
  describe(`inboxes over HTTP (${store.name})`, {
    skip: store.skip,
  }, () => {
    // Over 80 lines: one describe block of short tests sharing one server.
    let opened: OpenedStore | undefined;
    let server: ServerProcess;

    // A first append to 5,000 new recipients takes PostgreSQL seconds (2.5 s on an idle machine, more
    // under CI's parallel tests): appends get longer than the usual request timeout.
    const append = (ns: string, recipients: string[], message: object) =>
      call(server, "POST", inboxPath(ns, "/append"), { recipients, message }, { timeoutMs: 60_000 });
    const read = (ns: string, recipient: string, query = "") =>
      call(server, "GET", recipientPath(ns, recipient, `/entries${query}`));
    /** The namespace's stats and each named recipient's state: what a refused call must leave alone. */
    const snapshot = async (ns: string, recipients: string[]) => [
      (await call(server, "GET", inboxPath(ns))).body,
      ...(await Promise.all(
        recipients.map(async (r) => (await call(server, "GET", recipientPath(ns, r))).body),
      )),
    ];

    before(async () => {
      opened = await store.open("inboxes");
      server = await startServerProcess(opened.options);
    });

    after(async () => {
      const exit = await server?.stop();
      await opened?.close();
      assert.deepEqual(exit, { code: 0, signal: null }, `graceful stop; stderr:\n${server?.stderr()}`);
    });

    test("create, update, get, list and delete a namespace", async () => {
      const created = ok<{ epoch: string; attributes: Record<string, unknown> }>(
        await call(server, "PUT", inboxPath("admin"), { maxDepth: 50 }),
        201,
      );
      assert.equal(created.attributes.maxDepth, 50);
      assert.equal(created.attributes.stopFanoutAfterMs, null);
      const updated = ok<{ epoch: string; attributes: Record<string, unknown> }>(
        await call(server, "PUT", inboxPath("admin"), { stopFanoutAfterMs: 3_600_000 }),
      );
      assert.equal(updated.epoch, created.epoch, "an update keeps the epoch");
      assert.equal(updated.attributes.maxDepth, 50, "left out: kept");
      assert.equal(ok<{ epoch: string }>(await call(server, "GET", inboxPath("admin"))).epoch, created.epoch);
      const list = ok<{ inboxes: { name: string }[] }>(await call(server, "GET", "/v1/inboxes"));
      assert.ok(list.inboxes.some((inbox) => inbox.name === "admin"));
      assert.equal((await call(server, "DELETE", inboxPath("admin"))).status, 204);
      assertError(await call(server, "GET", inboxPath("admin")), 404, "inbox_not_found");
      assertError(await call(server, "DELETE", inboxPath("admin")), 404, "inbox_not_found");
      const again = ok<{ epoch: string }>(await call(server, "PUT", inboxPath("admin")), 201);
      assert.notEqual(again.epoch, created.epoch, "created again: a new epoch");
    });

    test("append, read, ack, the recipient's state, and forgetting a device", async () => {
      ok(await call(server, "PUT", inboxPath("chat")), 201);
      const appended = ok<{ results: unknown[] }>(
        await append("chat", ["ann", "bob"], { id: "m1", body: { n: 1 } }),
      );
      assert.deepEqual(appended.results, [
        { recipient: "ann", seq: 1, duplicate: false },
        { recipient: "bob", seq: 1, duplicate: false },
      ]);
      const bytes = { id: "m2", bodyBase64: Buffer.from("hi").toString("base64"), contentType: "text/plain" };
      ok(await append("chat", ["ann"], { ...bytes, headers: { traceparent: "00-x" } }));
      const first = ok<Entries>(await read("chat", "ann"));
      assert.deepEqual(
        first.entries.map(({ seq, id, body, bodyBase64 }) => ({ seq, id, body, bodyBase64 })),
        [
          { seq: 1, id: "m1", body: { n: 1 }, bodyBase64: undefined },
          { seq: 2, id: "m2", body: undefined, bodyBase64: "aGk=" },
        ],
      );
      assert.deepEqual([first.head, first.oldest], [2, 1]);
      const paged = ok<Entries>(await read("chat", "ann", `?after=1&limit=1&epoch=${first.epoch}`));
      assert.deepEqual(
        paged.entries.map((entry) => entry.seq),
        [2],
      );
      const acked = await call(server, "POST", recipientPath("chat", "ann", "/ack"), {
        device: "phone",
        seq: 2,
      });
      assert.deepEqual(ok(acked), { cursor: 2 });
      const back = await call(server, "POST", recipientPath("chat", "ann", "/ack"), {
        device: "phone",
        seq: 1,
      });
      assert.deepEqual(ok(back), { cursor: 2 }, "a cursor never moves back");
      const state = ok<{ depth: number; head: number; devices: { device: string; cursor: number }[] }>(
        await call(server, "GET", recipientPath("chat", "ann")),
      );
      assert.deepEqual([state.depth, state.head], [0, 2], "the only device acked both: trimmed");
      assert.deepEqual(
        state.devices.map(({ device, cursor }) => [device, cursor]),
        [["phone", 2]],
      );
      assert.equal(
        (await call(server, "DELETE", recipientPath("chat", "ann", "/devices/phone"))).status,
        204,
      );
      const after = ok<{ devices: unknown[] }>(await call(server, "GET", recipientPath("chat", "ann")));
      assert.deepEqual(after.devices, []);
    });

    test("a cursor behind what is retained is 410 inbox_gap with oldest, head and epoch", async () => {
      ok(await call(server, "PUT", inboxPath("gaps"), { maxDepth: 2 }), 201);
      for (const id of ["m1", "m2", "m3", "m4"]) ok(await append("gaps", ["ann"], { id, body: id }));
      const { epoch } = ok<{ epoch: string }>(await call(server, "GET", inboxPath("gaps")));
      const gap = assertError(await read("gaps", "ann", `?after=1&epoch=${epoch}`), 410, "inbox_gap");
      assert.deepEqual(gap.details, { oldest: 3, head: 4, epoch, reason: "trimmed" });
      const otherEpoch = assertError(await read("gaps", "ann", "?after=3&epoch=elsewhere"), 410, "inbox_gap");
      assert.equal(otherEpoch.details?.reason, "epoch");
      const resumed = ok<Entries>(await read("gaps", "ann", `?after=2&epoch=${epoch}`));
      assert.deepEqual(
        resumed.entries.map((entry) => entry.id),
        ["m3", "m4"],
      );
    });

    test("past the head is 400 cursor_beyond_head, for a read and an ack", async () => {
      ok(await call(server, "PUT", inboxPath("heads")), 201);
      ok(await append("heads", ["ann"], { id: "m1", body: 1 }));
      const { epoch } = ok<{ epoch: string }>(await call(server, "GET", inboxPath("heads")));
      assertError(await read("heads", "ann", `?after=2&epoch=${epoch}`), 400, "cursor_beyond_head");
      const ack = await call(server, "POST", recipientPath("heads", "ann", "/ack"), { device: "d", seq: 2 });
      assertError(ack, 400, "cursor_beyond_head");
      assertError(await read("heads", "ann", "?after=1"), 400, "invalid_request");
    });

    test("the same append three times appends once", async () => {
      ok(await call(server, "PUT", inboxPath("dedup")), 201);
      const answers: unknown[] = [];
      for (let i = 0; i < 3; i++)
        answers.push(ok(await append("dedup", ["ann", "bob"], { id: "m1", body: 1 })));
      assert.deepEqual(answers[1], answers[2]);
      assert.deepEqual(answers[2], {
        results: [
          { recipient: "ann", seq: 1, duplicate: true },
          { recipient: "bob", seq: 1, duplicate: true },
        ],
      });
      const stats = ok<{ stats: { appended: number; duplicates: number } }>(
        await call(server, "GET", inboxPath("dedup")),
      );
      assert.deepEqual([stats.stats.appended, stats.stats.duplicates], [2, 4]);
      assert.equal(ok<Entries>(await read("dedup", "ann")).head, 1);
    });

    test("one bad recipient refuses the whole append: nothing appended for anyone", async () => {
      ok(await call(server, "PUT", inboxPath("whole")), 201);
      ok(await append("whole", ["ann"], { id: "m0", body: 0 }));
      const earlier = await snapshot("whole", ["ann", "bob"]);
      const refusals: [unknown, number, string][] = [
        [{ recipients: ["ann", "b b"], message: { id: "m1", body: 1 } }, 400, "invalid_request"],
        [{ recipients: ["ann", "bob"], message: { id: "m1" } }, 400, "invalid_request"],
        [{ recipients: ["ann"], message: { id: "m1", body: 1, bodyBase64: "AA==" } }, 400, "invalid_request"],
        [{ recipients: ["ann"], message: { id: "m1", body: 1, extra: 1 } }, 400, "invalid_request"],
        [{ recipients: [], message: { id: "m1", body: 1 } }, 400, "invalid_request"],
      ];
      for (const [body, status, code] of refusals) {
        assertError(await call(server, "POST", inboxPath("whole", "/append"), body), status, code);
      }
      assertError(await append("missing", ["ann"], { id: "m1", body: 1 }), 404, "inbox_not_found");
      assertError(await append("b%20ad", ["ann"], { id: "m1", body: 1 }), 400, "invalid_name");
      assert.deepEqual(
        await snapshot("whole", ["ann", "bob"]),
        earlier,
        "a refused append changed something",
      );
    });

    test("inboxRecipientsMax + 1 recipients is 400 too_many_recipients, and appends nothing", async () => {
      ok(await call(server, "PUT", inboxPath("wide")), 201);
      const recipients = Array.from({ length: limits.inboxRecipientsMax + 1 }, (_, i) => `u${i}`);
      const earlier = await snapshot("wide", ["u0", "u5000"]);
      assertError(await append("wide", recipients, { id: "m1", body: 1 }), 400, "too_many_recipients");
      assert.deepEqual(await snapshot("wide", ["u0", "u5000"]), earlier);
      const full = ok<{ results: unknown[] }>(
        await append("wide", recipients.slice(0, -1), { id: "m1", body: 1 }),
      );
      assert.equal(full.results.length, limits.inboxRecipientsMax);
    });

    test("bad attributes and names are refused with their codes", async () => {
      const cases: [string, string, unknown, number, string][] = [
        ["PUT", inboxPath("attrs"), { maxAgeMs: 10 }, 400, "invalid_attribute"],
        ["PUT", inboxPath("attrs"), { maxDepth: "5" }, 400, "invalid_request"],
        ["PUT", inboxPath("attrs"), { retentionMs: 60_000 }, 400, "invalid_request"],
        ["PUT", inboxPath("a%20b"), {}, 400, "invalid_name"],
        ["GET", recipientPath("chat", "a%20b"), undefined, 400, "invalid_name"],
        ["POST", recipientPath("chat", "ann", "/ack"), { device: "phone", seq: -1 }, 400, "invalid_request"],
        ["GET", recipientPath("chat", "ann", "/entries?limit=1001"), undefined, 400, "invalid_request"],
      ];
      for (const [method, path, body, status, code] of cases) {
        const error: WireError = assertError(await call(server, method, path, body), status, code);
        assert.ok(error.message.length > 0);
      }
      assertError(await call(server, "GET", inboxPath("attrs")), 404, "inbox_not_found");
    });

    test("a read with waitMs answers as soon as an entry is appended", async () => {
      ok(await call(server, "PUT", inboxPath("poll")), 201);
      const started = Date.now();
      const polling = read("poll", "ann", "?waitMs=10000");
      await new Promise((resolve) => setTimeout(resolve, 200));
      ok(await append("poll", ["ann"], { id: "m1", body: 1 }));
      const answer = ok<Entries>(await polling);
      assert.deepEqual(
        answer.entries.map((entry) => entry.id),
        ["m1"],
      );
      assert.ok(Date.now() - started < 5_000, "answered by the append, not the wait's end");
    });
  });
