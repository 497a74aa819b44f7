/**
 * The on-disk formats do not change under the restructuring: an SQLite file and a log directory
 * written by commit 00b4720 (the last commit before it; see the fixtures' README.md) open in today's
 * server, which reads back every queue, message, counter, dedup entry, exchange and binding as that
 * commit's own server read them after a restart, and then serves: the leases it took can be acked
 * with their receipts, and a send, receive and ack work.
 */
import assert from "node:assert/strict";
import { cpSync, readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Answer, call, hourMs, queuePath, results, sentId, stats } from "../testing/http-calls.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

/** The fixtures are not compiled: read them from the source tree, beside dist (dist/e2e → src/testing). */
const fixturesDir = fileURLToPath(
  new URL("../../src/testing/fixtures/format-before-restructure/", import.meta.url),
);
const shiftedClockPath = new URL("../testing/shifted-clock.js", import.meta.url).href;

interface PeekedMessage {
  id: string;
  body?: unknown;
  bodyBase64?: string;
  dedupId: string | null;
  [field: string]: unknown;
}

interface RecordedQueue {
  name: string;
  kind: string;
  attributes: Record<string, unknown>;
  stats: Record<string, number>;
  messages: Record<"available" | "delayed" | "in-flight", PeekedMessage[]>;
}

interface Recorded {
  writtenAtMs: number;
  receipts: { orders: string; "events.fifo": { id: string; receipt: string }[] };
  queues: Record<string, RecordedQueue>;
  exchanges: { name: string; [field: string]: unknown }[];
}

const states = ["available", "delayed", "in-flight"] as const;

/** Each field the old server answered has the same value now; fields added since may be there too. */
function assertHasFields(actual: unknown, recorded: Record<string, unknown>, where: string): void {
  assert.ok(actual !== null && typeof actual === "object", `${where}: ${JSON.stringify(actual)}`);
  for (const [field, value] of Object.entries(recorded)) {
    assert.deepEqual((actual as Record<string, unknown>)[field], value, `${where}.${field}`);
  }
}

function okResults(answer: Answer, where: string): void {
  for (const item of results(answer)) assert.deepEqual(item, { ok: true }, where);
}

async function receiveAll(server: ServerProcess, queue: string): Promise<{ id: string; receipt: string }[]> {
  const answer = await call(server, "POST", queuePath(queue, "/receive"), {
    max: 10,
    visibilityTimeoutMs: hourMs,
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return (answer.body as { messages: { id: string; receipt: string }[] }).messages;
}

function peekedId(queue: RecordedQueue, match: (message: PeekedMessage) => boolean): string {
  const found = states.flatMap((state) => queue.messages[state]).find(match);
  assert.ok(found, `no such message recorded in ${queue.name}`);
  return found.id;
}

for (const store of ["sqlite", "log"] as const) {
  describe(`a ${store} fixture written before the restructuring`, () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const recorded = JSON.parse(readFileSync(`${fixturesDir}${store}.expected.json`, "utf8")) as Recorded;
    let dir: TempDir;
    let server: ServerProcess;

    before(async () => {
      dir = createTempDir("hopper-format-");
      cpSync(`${fixturesDir}${store}`, dir.file(store), { recursive: true });
      // The server's clock starts where the fixture's ended, so its leases and delays still hold.
      const env = {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${shiftedClockPath}`.trim(),
        HOPPER_TEST_CLOCK_OFFSET_MS: String(recorded.writtenAtMs - Date.now()),
      };
      server = await startServerProcess(
        store === "sqlite"
          ? { dataFile: dir.file("sqlite/hopper.db"), env }
          : { store: `log:${dir.file("log")}`, env },
      );
    });

    after(async () => {
      await server?.stop();
      dir?.remove();
    });

    test("every queue, its attributes, counters and messages by state, as written", async () => {
      const list = await call(server, "GET", "/v1/queues");
      assert.equal(list.status, 200, JSON.stringify(list.body));
      const names = (list.body as { queues: { name: string }[] }).queues.map((queue) => queue.name);
      assert.deepEqual(names, Object.keys(recorded.queues).sort());
      for (const queue of Object.values(recorded.queues)) {
        const info = await call(server, "GET", queuePath(queue.name));
        assert.equal(info.status, 200, JSON.stringify(info.body));
        const now = info.body as RecordedQueue;
        assert.equal(now.kind, queue.kind, queue.name);
        assertHasFields(now.attributes, queue.attributes, `${queue.name}.attributes`);
        const { oldestMessageAgeMs: _age, ...counters } = queue.stats;
        assertHasFields(now.stats, counters, `${queue.name}.stats`);
        for (const state of states) {
          const peek = await call(
            server,
            "GET",
            queuePath(queue.name, `/messages?state=${state}&limit=1000`),
          );
          assert.equal(peek.status, 200, JSON.stringify(peek.body));
          const messages = (peek.body as { messages: PeekedMessage[] }).messages;
          const where = `${queue.name} ${state}`;
          assert.deepEqual(
            messages.map((message) => message.id),
            queue.messages[state].map((message) => message.id),
            where,
          );
          for (const [i, message] of queue.messages[state].entries()) {
            assertHasFields(messages[i], message, where);
          }
        }
      }
      // The fixture holds each state; a fixture that lost one would test less than it says.
      const orders = recorded.queues.orders as RecordedQueue;
      assert.ok(states.every((state) => orders.messages[state].length > 0));
      assert.equal(recorded.queues["orders.dlq"]?.messages.available.length, 1);
    });

    test("the exchanges and their bindings, as written", async () => {
      const list = await call(server, "GET", "/v1/exchanges");
      assert.equal(list.status, 200, JSON.stringify(list.body));
      const exchanges = (list.body as { exchanges: { name: string }[] }).exchanges;
      assert.deepEqual(
        exchanges.map((exchange) => exchange.name),
        recorded.exchanges.map((exchange) => exchange.name),
      );
      for (const [i, exchange] of recorded.exchanges.entries()) {
        assertHasFields(exchanges[i], exchange, exchange.name);
      }
      const publish = await call(server, "POST", "/v1/exchanges/events/publish", {
        messages: [{ routingKey: "order.paid", body: { order: "paid" } }],
      });
      assert.deepEqual(
        (results(publish)[0] as { routed: number }).routed,
        2,
        "order.* to orders and # to audit",
      );
    });

    test("the dedup entries still answer duplicates with the first message's id", async () => {
      const payments = recorded.queues.payments as RecordedQueue;
      const sent = results(
        await call(server, "POST", queuePath("payments", "/messages"), {
          messages: [{ body: { amount: 5 }, dedupId: "pay-1" }, { body: { amount: 9 } }],
        }),
      );
      assert.deepEqual(sent, [
        { id: peekedId(payments, (message) => message.dedupId === "pay-1"), duplicate: true },
        {
          id: peekedId(payments, (message) => (message.body as { amount?: number }).amount === 9),
          duplicate: true,
        },
      ]);
      assert.equal((await stats(server, "payments")).available, 2);
    });

    test("the leases taken before hold: FIFO group g1 waits on its head, whose receipt acks it", async () => {
      const fifo = recorded.queues["events.fifo"] as RecordedQueue;
      const stepId = (step: string) =>
        peekedId(fifo, (message) => (message.body as { step?: string }).step === step);
      const [head] = recorded.receipts["events.fifo"];
      assert.equal(head?.id, stepId("g1-a"));

      const whileHeld = await receiveAll(server, "events.fifo");
      assert.deepEqual(
        whileHeld.map((message) => message.id),
        [stepId("g2-a")],
      );
      okResults(
        await call(server, "POST", queuePath("events.fifo", "/ack"), { receipts: [head?.receipt] }),
        "ack of g1-a",
      );
      const afterAck = await receiveAll(server, "events.fifo");
      assert.deepEqual(
        afterAck.map((message) => message.id),
        [stepId("g1-b")],
      );

      const orders = recorded.queues.orders as RecordedQueue;
      okResults(
        await call(server, "POST", queuePath("orders", "/ack"), { receipts: [recorded.receipts.orders] }),
        "ack of the in-flight order",
      );
      const ordersNow = await stats(server, "orders");
      assert.equal(ordersNow.inFlight, 0);
      assert.equal(ordersNow.acked, (orders.stats.acked ?? 0) + 1);
    });

    test("it serves: a send, a receive and an ack, kept across a restart", async () => {
      const [id] = results(
        await call(server, "POST", queuePath("lost", "/messages"), { messages: [{ body: { after: true } }] }),
      ).map(sentId);
      const received = await receiveAll(server, "lost");
      assert.deepEqual(
        received.map((message) => message.id),
        [id],
      );
      okResults(
        await call(server, "POST", queuePath("lost", "/ack"), {
          receipts: received.map((message) => message.receipt),
        }),
        "ack",
      );
      server = await server.restart();
      const lost = await stats(server, "lost");
      assert.deepEqual([lost.acked, lost.available, lost.inFlight, lost.delayed], [1, 0, 0, 0]);
      assert.equal((await stats(server, "orders")).inFlight, 0, "the ack of the old lease was kept");
    });
  });
}
