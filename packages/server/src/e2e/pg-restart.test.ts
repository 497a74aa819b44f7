/**
 * DESIGN.md §1.1 and §9 across a restart of PostgreSQL under load: two `hopper serve` nodes publish
 * without pause while the database restarts (`pg_ctlcluster … restart -m fast`). While it is down the
 * nodes say so (a 503 `unavailable` from /readyz or from a publish, never another error), and they
 * recover on their own, without a restart of the node: /readyz answers 200, publishes are confirmed,
 * long polls wake from other nodes' commits again (the LISTEN session reconnected), and every message
 * that was confirmed before, during or after the restart is in the queue exactly once.
 *
 * It needs HOPPER_TEST_PG_URL, HOPPER_TEST_PG_RESTART=1, a local cluster on that port and root to
 * restart it; without them it is skipped and says why. Restarting the machine's PostgreSQL under other
 * test files would break them, so `npm test` skips it and .ci/run runs it alone, after the others. It restarts the whole server, so it first waits for the other end-to-end tests
 * over PostgreSQL (the restart lock), and skips if other clients are connected. PostgreSQL is always
 * running again when it ends.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient, HopperError, isItemError, type ReceivedMessage } from "@hopper/client";
import {
  dropSchemas,
  ensurePgRunning,
  findLocalCluster,
  holdRestartLock,
  type LocalCluster,
  otherPgSessions,
  pgCtlCluster,
  pgSkipReason,
  pgTestUrl,
  testAppName,
  testSchemaName,
} from "../testing/pg.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

const testName = "PostgreSQL restarts under load: the nodes answer 503, recover alone, lose nothing";
const nodeCount = 2;
const publishersPerNode = 2;
const sendBatchSize = 20;
/** A failed publish waits this long before the next, so an outage is not a busy loop. */
const publishRetryMs = 50;
const readyPollMs = 50;
/** Confirmed publishes before the restart, so that the drain has old messages to find. */
const confirmedBeforeRestart = 1_000;
/** Publishing goes on this long once every node has recovered. */
const publishAfterRecoveryMs = 1_000;
/** A restart with -m fast takes a few seconds; the nodes reconnect at their next request. */
const recoveryDeadlineMs = 30_000;
/**
 * The LISTEN session reconnects with backoff that doubles up to 5 s (store/postgres/events.ts); a long
 * poll must wake from another node's commit again within that and some margin.
 */
const listenRecoveryDeadlineMs = 15_000;
const wakeProbeWaitMs = 3_000;
const wakeProbeSendDelayMs = 300;
const wakeLatencyMsMax = 1_000;
const otherSessionsWaitMs = 30_000;
const restartLockWaitMs = 60_000;
const pgStartTimeoutMs = 60_000;
const requestTimeoutMs = 10_000;
/** Drain leases are long, so nothing drained is delivered twice during the drain. */
const drainLeaseMs = 600_000;
const drainDeadlineMs = 30_000;

/** One publish or readiness check, for the timeline of the outage. */
interface Observation {
  node: number;
  startedAt: number;
  endedAt: number;
  /** "ok", or how it failed: `<HTTP status> <code>` (status 0: no answer). */
  outcome: string;
}

function outcomeOf(error: unknown): string {
  return error instanceof HopperError ? `${error.status} ${error.code}` : `thrown ${String(error)}`;
}

function countBy(observations: Observation[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { outcome } of observations) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}

const cluster = pgTestUrl ? findLocalCluster(pgTestUrl) : undefined;

if (!pgTestUrl) {
  test(testName, { skip: pgSkipReason }, () => {});
} else if (process.env.HOPPER_TEST_PG_RESTART !== "1") {
  test(testName, {
    skip: "it restarts the machine's PostgreSQL, so it runs alone: HOPPER_TEST_PG_RESTART=1 (set by .ci/run)",
  }, () => {});
} else if (!cluster || "skip" in cluster) {
  test(testName, { skip: cluster?.skip ?? pgSkipReason }, () => {});
} else {
  const url = pgTestUrl;
  const localCluster: LocalCluster = cluster;
  // Also after a timeout, when the test body may never reach its own finally.
  after(() => ensurePgRunning(url, localCluster, pgStartTimeoutMs));

  // A node must answer 503 while PostgreSQL is down, not exit: connections checked out by a
  // transaction at the moment of the restart emit "error" events that the store must hear.
  test(testName, { timeout: restartLockWaitMs + 90_000 }, async (t) => {
    const schema = testSchemaName("restart");
    const appName = testAppName("restart");
    const waitStartedAt = Date.now();
    const lock = await holdRestartLock(url, "exclusive", restartLockWaitMs);
    let nodes: ServerProcess[] = [];
    try {
      const others = await waitForOtherSessionsToEnd(url, [appName]);
      t.diagnostic(`waited ${Date.now() - waitStartedAt} ms for the restart lock and for other clients`);
      if (others.length > 0) {
        t.skip(`other clients use PostgreSQL and a restart would break them: ${others.join("; ")}`);
        return;
      }
      nodes = await Promise.all(
        Array.from({ length: nodeCount }, () =>
          startServerProcess({ store: url, pgSchema: schema, env: { PGAPPNAME: appName } }),
        ),
      );
      const othersNow = () => otherPgSessions(url, [appName]);
      const skipReason = await restartUnderLoad(t, localCluster, nodes, othersNow);
      if (skipReason) t.skip(skipReason);
    } finally {
      try {
        await ensurePgRunning(url, localCluster, pgStartTimeoutMs);
        await Promise.all(nodes.map((node) => node.stop().catch(() => node.kill9())));
        await dropSchemas(url, [schema]);
      } finally {
        await lock.release();
      }
    }
  });
}

/** Polls for client sessions other than this test's until there are none, or the wait is over. */
async function waitForOtherSessionsToEnd(url: string, ownAppNames: string[]): Promise<string[]> {
  const deadline = Date.now() + otherSessionsWaitMs;
  for (;;) {
    const others = await otherPgSessions(url, ownAppNames);
    if (others.length === 0 || Date.now() > deadline) return others;
    await delay(250);
  }
}

/**
 * Publishes and checks readiness without pause on every node, restarts PostgreSQL, waits for the
 * nodes to recover and checks what they did. Returns a skip reason if other clients connected in the
 * meantime or pg_ctlcluster failed.
 */
async function restartUnderLoad(
  t: { diagnostic(message: string): void },
  cluster: LocalCluster,
  nodes: ServerProcess[],
  otherClients: () => Promise<string[]>,
): Promise<string | undefined> {
  // Over 80 lines: one restart told in order, whose load loops share the observations it checks.
  const queue = "restart";
  const clients = nodes.map((node) => new HopperClient({ url: node.url, requestTimeoutMs }));
  await clients[0]?.putQueue(queue, {});
  const confirmed = new Map<string, number>();
  /** Sequence numbers of publishes that failed: each may or may not have been stored. */
  const uncertainSeqs = new Set<number>();
  const publishes: Observation[] = [];
  const readiness: Observation[] = [];
  let running = true;
  let nextSeq = 0;

  const publish = async (node: number) => {
    const client = clients[node] as HopperClient;
    while (running) {
      const seqs = Array.from({ length: sendBatchSize }, () => nextSeq++);
      const startedAt = performance.now();
      let results: Awaited<ReturnType<HopperClient["send"]>>;
      try {
        results = await client.send(
          queue,
          seqs.map((seq) => ({ body: { seq } })),
        );
      } catch (error) {
        publishes.push({ node, startedAt, endedAt: performance.now(), outcome: outcomeOf(error) });
        for (const seq of seqs) uncertainSeqs.add(seq);
        await delay(publishRetryMs);
        continue;
      }
      publishes.push({ node, startedAt, endedAt: performance.now(), outcome: "ok" });
      results.forEach((result, index) => {
        assert.ok(!isItemError(result), `a publish item failed: ${JSON.stringify(result)}`);
        confirmed.set(result.id, seqs[index] as number);
      });
    }
  };
  const pollReadiness = async (node: number) => {
    while (running) {
      const startedAt = performance.now();
      let outcome: string;
      try {
        const response = await fetch(`${(nodes[node] as ServerProcess).url}/readyz`, {
          signal: AbortSignal.timeout(requestTimeoutMs),
        });
        await response.text();
        outcome = response.status === 200 ? "ok" : String(response.status);
      } catch (error) {
        outcome = `no answer: ${String(error)}`;
      }
      readiness.push({ node, startedAt, endedAt: performance.now(), outcome });
      await delay(readyPollMs);
    }
  };
  // A loop that fails (an item error in a confirmed batch) ends the polling below at once.
  let loadFailure: unknown;
  const load = [
    ...Array.from({ length: nodeCount * publishersPerNode }, (_, index) => publish(index % nodeCount)),
    ...nodes.map((_, node) => pollReadiness(node)),
  ].map((loop) =>
    loop.catch((error: unknown) => {
      loadFailure ??= error;
    }),
  );
  const healthy = () => {
    if (loadFailure) throw loadFailure;
    return assertRunning(nodes);
  };
  const summary = () =>
    `${confirmed.size} confirmed; publishes ${JSON.stringify(countBy(publishes))}; ` +
    `readiness ${JSON.stringify(countBy(readiness))}`;

  try {
    await until(
      () => healthy() && confirmed.size >= confirmedBeforeRestart,
      recoveryDeadlineMs,
      "warm-up",
      summary,
    );
    // Looked at again just before the restart: a client that connected during the warm-up would break.
    const others = await otherClients();
    if (others.length > 0)
      return `other clients connected to PostgreSQL before the restart: ${others.join("; ")}`;
    const restartStartedAt = performance.now();
    try {
      await pgCtlCluster(cluster, "restart", "-m", "fast");
    } catch (error) {
      return `pg_ctlcluster ${cluster.version} ${cluster.name} restart failed: ${String(error)}`;
    }
    const restartEndedAt = performance.now();
    // Recovered: every node answered /readyz 200 and confirmed a publish, both sent after the restart.
    const recoveredOn = (node: number) =>
      readiness.some((o) => o.node === node && o.startedAt > restartEndedAt && o.outcome === "ok") &&
      publishes.some((o) => o.node === node && o.startedAt > restartEndedAt && o.outcome === "ok");
    await until(
      () => healthy() && nodes.every((_, node) => recoveredOn(node)),
      recoveryDeadlineMs,
      "recovery",
      () =>
        [
          summary(),
          ...nodes.map((node, index) => `node ${index} stderr:\n${node.stderr().slice(-2000)}`),
        ].join("\n"),
    );
    const recoveredAt = performance.now();
    await delay(publishAfterRecoveryMs);
    running = false;
    await Promise.all(load);
    healthy();
    t.diagnostic(
      `restart took ${Math.round(restartEndedAt - restartStartedAt)} ms; the nodes recovered ` +
        `${Math.round(recoveredAt - restartEndedAt)} ms after it; ${summary()}`,
    );

    assertOutage(publishes, readiness, restartStartedAt, recoveredAt);
    // The same processes as before the restart: the nodes recovered without being restarted.
    assertRunning(nodes);
    const probes = await assertLongPollsWakeAcrossNodes(clients, recoveredAt);
    t.diagnostic(`cross-node wake probes after recovery (receiver←sender: latency): ${probes.join(", ")}`);
    await assertDrainedExactlyOnce(clients[0] as HopperClient, queue, confirmed, uncertainSeqs, t);
    return undefined;
  } finally {
    running = false;
    await Promise.all(load);
  }
}

/**
 * Fails at once, with its stderr, if a node process has ended: a node must ride out an outage of its
 * store, answering 503, and not exit. Returns true so that it can guard a polled condition.
 */
function assertRunning(nodes: ServerProcess[]): true {
  for (const [index, node] of nodes.entries()) {
    const status = node.exitStatus();
    assert.equal(
      status,
      undefined,
      `node ${index} (pid ${node.pid}) exited (${JSON.stringify(status)}) instead of riding out the ` +
        `PostgreSQL restart; its stderr ends with:\n${node.stderr().slice(-4000)}`,
    );
  }
  return true;
}

/** Polls `done` every 50 ms; fails with what `describe` says once `timeoutMs` has passed. */
async function until(done: () => boolean, timeoutMs: number, what: string, describe: () => string) {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    assert.ok(Date.now() < deadline, `${what} did not finish within ${timeoutMs} ms: ${describe()}`);
    await delay(50);
  }
}

/**
 * What the nodes said while PostgreSQL was down: at least one 503 (from /readyz, or a publish refused
 * as `unavailable`; which of the two depends on timing), every failure a 503 `unavailable` and none
 * outside the outage.
 */
function assertOutage(
  publishes: Observation[],
  readiness: Observation[],
  restartStartedAt: number,
  recoveredAt: number,
): void {
  const failedPublishes = publishes.filter((o) => o.outcome !== "ok");
  const notReady = readiness.filter((o) => o.outcome !== "ok");
  assert.ok(
    notReady.some((o) => o.outcome === "503") || failedPublishes.some((o) => o.outcome === "503 unavailable"),
    "while PostgreSQL restarted, neither /readyz nor a publish answered 503",
  );
  assert.deepEqual(
    Object.keys(countBy(failedPublishes)).filter((outcome) => outcome !== "503 unavailable"),
    [],
    `a publish failed other than with 503 unavailable: ${JSON.stringify(countBy(failedPublishes))}`,
  );
  assert.deepEqual(
    Object.keys(countBy(notReady)).filter((outcome) => outcome !== "503"),
    [],
    `/readyz answered other than 200 or 503: ${JSON.stringify(countBy(notReady))}`,
  );
  const outside = [...failedPublishes, ...notReady].filter(
    (o) => o.endedAt < restartStartedAt || o.startedAt > recoveredAt,
  );
  assert.deepEqual(
    outside.map((o) => `node ${o.node}: ${o.outcome}`),
    [],
    "failures before the restart began or after every node had recovered",
  );
}

/**
 * Probes until a long poll on each node wakes within a second of a publish confirmed by the other, and
 * returns the latency of every probe.
 */
async function assertLongPollsWakeAcrossNodes(
  clients: HopperClient[],
  recoveredAt: number,
): Promise<string[]> {
  const queue = "restart-wake";
  await clients[0]?.putQueue(queue, {});
  const deadline = recoveredAt + listenRecoveryDeadlineMs;
  const latencies: string[] = [];
  for (let receiver = 0; receiver < clients.length; receiver++) {
    const sender = (receiver + 1) % clients.length;
    for (;;) {
      const receiving = (clients[receiver] as HopperClient).receive(queue, { waitMs: wakeProbeWaitMs });
      await delay(wakeProbeSendDelayMs);
      const [sent] = await (clients[sender] as HopperClient).send(queue, [{ body: { sender } }]);
      const confirmedAt = performance.now();
      const messages = await receiving;
      const latencyMs = performance.now() - confirmedAt;
      assert.ok(sent && !isItemError(sent), "the probe publish was confirmed");
      assert.deepEqual(
        messages.map((message) => message.id),
        [sent.id],
        "the long poll returned the probe",
      );
      await (clients[receiver] as HopperClient).ack(
        queue,
        messages.map((message) => message.receipt),
      );
      latencies.push(`${receiver}←${sender}: ${Math.round(latencyMs)} ms`);
      if (latencyMs < wakeLatencyMsMax) break;
      assert.ok(
        performance.now() < deadline,
        `a long poll on node ${receiver} still does not wake from node ${sender}'s publishes ` +
          `${listenRecoveryDeadlineMs} ms after recovery (the LISTEN session did not come back): ` +
          latencies.join(", "),
      );
    }
  }
  return latencies;
}

/**
 * Leases everything left in the queue and checks that every confirmed message is there exactly once,
 * unchanged, and that anything else is a publish that failed (and so may have been stored).
 */
async function assertDrainedExactlyOnce(
  client: HopperClient,
  queue: string,
  confirmed: Map<string, number>,
  uncertainSeqs: Set<number>,
  t: { diagnostic(message: string): void },
): Promise<void> {
  const drained = new Map<string, ReceivedMessage>();
  const deadline = Date.now() + drainDeadlineMs;
  for (;;) {
    assert.ok(Date.now() < deadline, `the drain did not finish; ${drained.size} drained`);
    const messages = await client.receive(queue, {
      max: 100,
      visibilityTimeoutMs: drainLeaseMs,
      waitMs: 200,
    });
    for (const message of messages) {
      assert.ok(!drained.has(message.id), `message ${message.id} was delivered twice in the drain`);
      drained.set(message.id, message);
    }
    if (messages.length > 0) continue;
    const { stats } = await client.getQueue(queue);
    if (stats.available === 0 && stats.delayed === 0 && stats.inFlight === drained.size) break;
  }
  const missing = [...confirmed.keys()].filter((id) => !drained.has(id));
  assert.deepEqual(missing.slice(0, 20), [], `${missing.length} confirmed messages are missing`);
  let unconfirmed = 0;
  for (const [id, message] of drained) {
    const seq = (message.body as { seq: number }).seq;
    const sentSeq = confirmed.get(id);
    if (sentSeq !== undefined) {
      assert.equal(seq, sentSeq, `message ${id} came back changed`);
    } else {
      assert.ok(uncertainSeqs.has(seq), `message ${id} (seq ${seq}) was neither confirmed nor sent`);
      unconfirmed++;
    }
    assert.equal(message.deliveryCount, 1, `message ${id} was delivered before the drain`);
  }
  t.diagnostic(
    `drained ${drained.size}: all ${confirmed.size} confirmed, ${unconfirmed} of ` +
      `${uncertainSeqs.size} publishes that failed were stored after all`,
  );
}
