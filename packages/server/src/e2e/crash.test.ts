/**
 * DESIGN.md §1.1-1.3 across `kill -9` of the real server process: every publish the server confirmed
 * is there after a restart, exactly once; every acked message is gone for good; a message leased but
 * not acked comes back with its delivery counted; a publish cut off by the kill is either absent or
 * whole. On every store: SQLite, the log (with fsync and with durability os) and PostgreSQL (skipped,
 * saying why, without HOPPER_TEST_PG_URL).
 */
import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";
import { type E2eStore, e2eStores } from "../testing/e2e-stores.js";
import {
  type ServerProcess,
  type ServerProcessOptions,
  startServerProcess,
} from "../testing/server-process.js";

const queue = "crash";
const requestTimeoutMs = 10_000;
/** Messages confirmed before the crash phase starts. */
const confirmedCount = 2000;
const ackedCount = 500;
const leasedUnackedCount = 100;
const publishersConcurrent = 16;
/** Batches of publishes that are confirmed during the crash phase before the kill is sent. */
const lateBatchesBeforeKill = 20;
/** The drain gives up after this long; with group commit it takes well under a second. */
const drainDeadlineMs = 10_000;
/** A lease on the drain is long enough that nothing drained is delivered twice during the test. */
const drainLeaseMs = 600_000;
/** Pre-crash leases are short so that the leased-but-unacked messages are available after restart. */
const shortLeaseMs = 200;

/** The body of every message: its position, and padding whose length is written down, so a torn
 * body would not match itself. */
interface Body {
  phase: "confirmed" | "late";
  seq: number;
  padding: string;
  paddingLength: number;
}

interface Received {
  id: string;
  receipt: string;
  body: Body;
  deliveryCount: number;
}

function makeBody(phase: Body["phase"], seq: number): Body {
  // Lengths vary from 0 to 96 characters so that rows differ in size.
  const paddingLength = (seq * 37) % 97;
  return { phase, seq, padding: "p".repeat(paddingLength), paddingLength };
}

function isWhole(body: Body): boolean {
  return (
    (body.phase === "confirmed" || body.phase === "late") &&
    Number.isInteger(body.seq) &&
    body.padding === "p".repeat(body.paddingLength) &&
    body.paddingLength === (body.seq * 37) % 97
  );
}

/** Batch sizes from 1 to 50 in a fixed, uneven order (no randomness: a failure replays exactly). */
function batchSize(batchIndex: number): number {
  return ((batchIndex * 29 + 7) % 50) + 1;
}

async function post(server: ServerProcess, path: string, body: unknown): Promise<unknown> {
  const response = await fetch(`${server.url}/v1/queues/${queue}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(requestTimeoutMs),
  });
  const text = await response.text();
  assert.equal(response.status, 200, `POST ${path}: ${text}`);
  return JSON.parse(text);
}

/** Publishes one batch and returns the ids the server confirmed, in the order of `bodies`. */
async function publish(server: ServerProcess, bodies: Body[]): Promise<string[]> {
  const answer = (await post(server, "/messages", { messages: bodies.map((body) => ({ body })) })) as {
    results: { id?: string; error?: unknown }[];
  };
  assert.equal(answer.results.length, bodies.length);
  return answer.results.map((result) => {
    assert.equal(typeof result.id, "string", `every item is confirmed: ${JSON.stringify(result)}`);
    return result.id as string;
  });
}

async function receive(
  server: ServerProcess,
  options: { max: number; visibilityTimeoutMs: number; waitMs?: number },
): Promise<Received[]> {
  const answer = (await post(server, "/receive", options)) as { messages: Received[] };
  return answer.messages;
}

async function ack(server: ServerProcess, receipts: string[]): Promise<void> {
  const answer = (await post(server, "/ack", { receipts })) as { results: unknown[] };
  assert.deepEqual(
    answer.results,
    receipts.map(() => ({ ok: true })),
  );
}

async function stats(server: ServerProcess): Promise<Record<string, number>> {
  const response = await fetch(`${server.url}/v1/queues/${queue}`, {
    signal: AbortSignal.timeout(requestTimeoutMs),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  return (JSON.parse(text) as { stats: Record<string, number> }).stats;
}

/** Receives until `count` messages are leased, in batches of at most 100. */
async function receiveExactly(server: ServerProcess, count: number, leaseMs: number): Promise<Received[]> {
  const leased: Received[] = [];
  while (leased.length < count) {
    const max = Math.min(100, count - leased.length);
    const messages = await receive(server, { max, visibilityTimeoutMs: leaseMs });
    assert.ok(messages.length > 0, `the queue ran dry after ${leased.length} of ${count}`);
    leased.push(...messages);
  }
  return leased;
}

/** Every store, and the log store once more confirming what is written to the OS but not fsynced. */
const runs: { name: string; store: E2eStore; extra?: Partial<ServerProcessOptions> }[] = [
  ...e2eStores.map((store) => ({ name: store.name, store })),
  // Confirmed once written to the OS: a killed process loses none of it (only a power loss could).
  {
    name: "log, durability os",
    store: e2eStores.find((store) => store.name === "log") as E2eStore,
    extra: { durability: "os" },
  },
];

for (const { name, store, extra } of runs) {
  test(`kill -9 (${name}): confirmed messages survive exactly once, acked ones never return`, {
    skip: store.skip,
  }, async (t) => {
    const opened = await store.open("crash", extra);
    try {
      await crashAndRecover(t, opened.options);
    } finally {
      await opened.close();
    }
  });
}

async function crashAndRecover(t: TestContext, options: ServerProcessOptions): Promise<void> {
  // Over 80 lines: one crash told in order: load, kill -9, restart, then check what survived.
  let server = await startServerProcess(options);
  try {
    const put = await fetch(`${server.url}/v1/queues/${queue}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(put.status, 201, await put.text());

    // Every id the server confirmed, with the body it was sent with.
    const confirmed = new Map<string, Body>();
    let nextSeq = 0;
    let nextBatch = 0;
    const takeBatch = (phase: Body["phase"], limit: number): Body[] => {
      const size = Math.min(batchSize(nextBatch++), limit - nextSeq);
      return Array.from({ length: size }, () => makeBody(phase, nextSeq++));
    };
    const confirm = async (bodies: Body[]) => {
      const ids = await publish(server, bodies);
      ids.forEach((id, index) => {
        assert.ok(!confirmed.has(id), `id ${id} was confirmed twice`);
        confirmed.set(id, bodies[index] as Body);
      });
    };

    // Phase 1: 2000 confirmed publishes from concurrent publishers, in batches of 1 to 50.
    await Promise.all(
      Array.from({ length: publishersConcurrent }, async () => {
        while (nextSeq < confirmedCount) await confirm(takeBatch("confirmed", confirmedCount));
      }),
    );
    assert.equal(confirmed.size, confirmedCount);

    // Phase 2: ack 500 of them.
    const ackedLeases = await receiveExactly(server, ackedCount, drainLeaseMs);
    for (let start = 0; start < ackedLeases.length; start += 100) {
      await ack(
        server,
        ackedLeases.slice(start, start + 100).map((message) => message.receipt),
      );
    }
    const acked = new Set(ackedLeases.map((message) => message.id));
    assert.equal(acked.size, ackedCount);

    // Phase 3: lease 100 more on short leases and never ack them.
    const leasedUnacked = new Set(
      (await receiveExactly(server, leasedUnackedCount, shortLeaseMs)).map((message) => message.id),
    );
    assert.equal(leasedUnacked.size, leasedUnackedCount);
    for (const id of [...acked, ...leasedUnacked]) assert.ok(confirmed.has(id), `unknown id ${id} delivered`);
    const before = await stats(server);
    assert.equal(before.acked, ackedCount);

    // Phase 4: publish without pause and kill the server while batches are in flight.
    let killed = false;
    let inFlight = 0;
    let lateBatchesConfirmed = 0;
    let enoughConfirmed: () => void = () => {};
    const readyToKill = new Promise<void>((resolve) => {
      enoughConfirmed = resolve;
    });
    const latePublishers = Array.from({ length: publishersConcurrent }, async () => {
      while (!killed) {
        const bodies = takeBatch("late", Number.MAX_SAFE_INTEGER);
        inFlight++;
        try {
          await confirm(bodies);
        } catch (error) {
          // Only a publish cut off by the kill may fail; it may or may not have been committed.
          if (!killed) throw error;
          return;
        } finally {
          inFlight--;
        }
        if (++lateBatchesConfirmed >= lateBatchesBeforeKill) enoughConfirmed();
      }
    });
    await Promise.race([readyToKill, Promise.all(latePublishers)]);
    const inFlightAtKill = inFlight;
    killed = true;
    const exit = await server.kill9();
    assert.deepEqual(exit, { code: null, signal: "SIGKILL" });
    await Promise.all(latePublishers);
    assert.ok(inFlightAtKill > 0, "the kill came while publishes were in flight");

    // Phase 5: restart on the same file and drain everything.
    server = await startServerProcess(options);
    const drained = new Map<string, Received>();
    const deadline = Date.now() + drainDeadlineMs;
    for (;;) {
      assert.ok(Date.now() < deadline, `drain did not finish; ${drained.size} drained`);
      const messages = await receive(server, { max: 100, visibilityTimeoutMs: drainLeaseMs, waitMs: 500 });
      for (const message of messages) {
        assert.ok(!drained.has(message.id), `message ${message.id} was delivered twice in the drain`);
        drained.set(message.id, message);
      }
      if (messages.length > 0) continue;
      // Done once nothing is available or delayed and every lease in flight is one of the drain's.
      const now = await stats(server);
      if (now.available === 0 && now.delayed === 0 && now.inFlight === drained.size) break;
    }

    for (const id of acked) assert.ok(!drained.has(id), `acked message ${id} came back after the crash`);
    const missing = [...confirmed.keys()].filter((id) => !acked.has(id) && !drained.has(id));
    assert.deepEqual(missing, [], `${missing.length} confirmed messages were lost`);
    for (const [id, message] of drained) {
      const sent = confirmed.get(id);
      if (sent) {
        assert.deepEqual(message.body, sent, `message ${id} came back changed`);
      } else {
        // Published while the kill came: unconfirmed, so it may exist, but then whole.
        assert.equal(message.body.phase, "late", `unconfirmed message ${id} was not published late`);
        assert.ok(isWhole(message.body), `message ${id} is torn: ${JSON.stringify(message.body)}`);
      }
      const expectedDeliveries = leasedUnacked.has(id) ? 2 : 1;
      assert.equal(message.deliveryCount, expectedDeliveries, `delivery count of ${id}`);
    }
    const unconfirmedPresent = [...drained.keys()].filter((id) => !confirmed.has(id)).length;
    t.diagnostic(
      `${confirmed.size} confirmed (${confirmed.size - confirmedCount} during the crash phase), ` +
        `${inFlightAtKill} batches in flight at the kill, ${unconfirmedPresent} unconfirmed messages kept`,
    );
    const after = await stats(server);
    assert.equal(after.acked, ackedCount, "the ack counter survives the crash with the acks");

    const stop = await server.stop();
    assert.deepEqual(stop, { code: 0, signal: null }, `graceful stop; stderr:\n${server.stderr()}`);
  } finally {
    await server.kill9();
  }
}
