/**
 * Inboxes across nodes over PostgreSQL: a device subscribed on node A receives, live and in order, the
 * entries appended through node B (one NOTIFY per append wakes A's subscription), and a device that
 * reconnects to B from its cursor gets exactly what it missed.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperClient, type InboxEntry } from "@hopper/client";
import { deviceToken as tokenFor } from "../testing/inbox-e2e.js";
import { dropSchemas, holdRestartLock, pgSkipReason, pgTestUrl, testSchemaName } from "../testing/pg.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

const secret = "cluster-secret-of-at-least-thirty-two-bytes";
const appendsCount = 50;
/** How long the test waits for an event that must come: bounded, so a lost wake-up fails it. */
const arrivalTimeoutMs = 20_000;

const deviceToken = (sub: string) => tokenFor(secret, sub);

async function post(server: ServerProcess, path: string, body: unknown, method = "POST"): Promise<void> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${await response.text()}`);
}

/** Resolves once `received` holds `count` entries, or rejects after arrivalTimeoutMs. */
function waitFor(received: InboxEntry[], count: number, signal: { arrived: () => void }): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${received.length} of ${count} entries arrived`)),
      arrivalTimeoutMs,
    );
    signal.arrived = () => {
      if (received.length < count) return;
      clearTimeout(timer);
      resolve();
    };
    signal.arrived();
  });
}

test("inboxes across two PostgreSQL nodes: appends through B reach a device on A live, in order", {
  skip: pgTestUrl ? false : pgSkipReason,
}, async (t) => {
  const url = pgTestUrl as string;
  const schema = testSchemaName("inbox_cluster");
  const lock = await holdRestartLock(url, "shared", 60_000);
  t.after(async () => {
    await dropSchemas(url, [schema]);
    await lock.release();
  });
  const nodeA = await startServerProcess({ store: url, pgSchema: schema, jwtSecret: secret });
  t.after(() => nodeA.stop());
  const nodeB = await startServerProcess({ store: url, pgSchema: schema, jwtSecret: secret });
  t.after(() => nodeB.stop());
  await post(nodeB, "/v1/inboxes/chat", {}, "PUT");

  const received: InboxEntry[] = [];
  const signal = { arrived: () => {} };
  const client = new HopperClient({ url: nodeA.url, token: await deviceToken("bob") });
  t.after(() => client.close());
  const subscription = await client.inboxes.subscribe({
    ns: "chat",
    device: "phone",
    after: 0,
    onEntry: (entry: InboxEntry) => {
      received.push(entry);
      signal.arrived();
    },
  });
  await subscription.ready;

  for (let i = 1; i <= appendsCount; i++)
    await post(nodeB, "/v1/inboxes/chat/append", {
      recipients: ["bob", "ada"],
      message: { id: `m${i}`, body: { i } },
    });
  await waitFor(received, appendsCount, signal);
  assert.deepEqual(
    received.map((entry) => entry.seq),
    Array.from({ length: appendsCount }, (_, i) => i + 1),
    "every entry once, in order",
  );
  assert.deepEqual(
    received.map((entry) => entry.id),
    Array.from({ length: appendsCount }, (_, i) => `m${i + 1}`),
  );
  // The cursor is what the device acked: at most the last entry, and an entry not yet acked when the
  // device went away comes again (at-least-once).
  const cursor = subscription.cursor;
  await subscription.close();
  const resumeAfter = cursor?.seq ?? 0;
  assert.ok(resumeAfter >= 1 && resumeAfter <= appendsCount, `cursor ${resumeAfter}`);

  // Offline, then back on the other node from the cursor: exactly what was missed.
  for (let i = appendsCount + 1; i <= appendsCount + 10; i++)
    await post(nodeA, "/v1/inboxes/chat/append", {
      recipients: ["bob"],
      message: { id: `m${i}`, body: { i } },
    });
  const missed: InboxEntry[] = [];
  const missedSignal = { arrived: () => {} };
  const other = new HopperClient({ url: nodeB.url, token: await deviceToken("bob") });
  t.after(() => other.close());
  const back = await other.inboxes.subscribe({
    ns: "chat",
    device: "phone",
    after: resumeAfter,
    ...(cursor?.epoch !== undefined && { epoch: cursor.epoch }),
    onEntry: (entry: InboxEntry) => {
      missed.push(entry);
      missedSignal.arrived();
    },
  });
  const expected = Array.from({ length: appendsCount + 10 - resumeAfter }, (_, i) => resumeAfter + i + 1);
  await waitFor(missed, expected.length, missedSignal);
  assert.deepEqual(
    missed.map((entry) => entry.seq),
    expected,
    "exactly the entries after the cursor",
  );
  await back.close();
});
