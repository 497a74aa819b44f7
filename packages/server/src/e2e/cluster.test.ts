/**
 * DESIGN.md §1.2-1.3 and §9 across a cluster: three `hopper serve` processes over one PostgreSQL
 * schema. A long poll on one node wakes when another node commits (LISTEN/NOTIFY). With 20,000
 * confirmed messages flowing through all three nodes, one node is killed with -9 while it holds leases
 * that nobody acked: those leases end after the visibility timeout and the live nodes deliver the
 * messages again; every confirmed message is acked, none is acked twice, and nothing acked comes back.
 *
 * It needs PostgreSQL: HOPPER_TEST_PG_URL names it; without it the tests are skipped and say why.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient, HopperError, isItemError, type ReceivedMessage } from "@hopper/client";
import {
  dropSchemas,
  holdRestartLock,
  type PgLock,
  pgSkipReason,
  pgTestUrl,
  testAppName,
  testSchemaName,
} from "../testing/pg.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

const nodeCount = 3;
/** The node that is killed; its consumers hold leases at the kill. */
const doomedNode = 2;
const messageCount = 20_000;
const sendBatchSize = 50;
const producersPerNode = 3;
const consumersPerNode = 3;
const receiveMax = 50;
/** Short, so that the dead node's leases end, and come back through the live nodes, within the test. */
const visibilityTimeoutMs = 2_000;
/** The kill comes once this many acks were answered ok. */
const acksBeforeKill = 8_000;
/** Batches the doomed node leases and never acks, right before the kill. */
const heldBatches = 2;
/** The consumers' long poll: short, so that they notice the end of the run soon. */
const consumerWaitMs = 1_000;
/** The whole run, from the first publish to the last ack, must fit in this. */
const runDeadlineMs = 75_000;
const testTimeoutMs = 90_000;
/** A wake through LISTEN/NOTIFY takes milliseconds; a long poll that missed it would sleep 5 s. */
const wakeWaitMs = 5_000;
const wakeSendDelayMs = 300;
const wakeLatencyMsMedianMax = 200;
const wakeLatencyMsMax = 1_000;
/**
 * The test's clock and the server's are the same machine's, but the test measures with
 * performance.now() and the server with Date.now(); this covers a small slew between the two.
 */
const clockSlackMs = 100;

interface Delivery {
  node: number;
  deliveryCount: number;
  /** performance.now() when the receive answered. */
  receivedAt: number;
}

/** Everything the run saw, for the assertions at the end. */
class Ledger {
  /** Every id the broker confirmed, with the sequence number in its body. */
  readonly confirmed = new Map<string, number>();
  /** Sequence numbers of sends that got no answer because their node was killed: maybe stored. */
  readonly uncertainSeqs = new Set<number>();
  /** Every id whose ack answered ok, with the node that answered. */
  readonly acked = new Map<string, number>();
  /** Ids whose ack answered ok a second time: must stay empty. */
  readonly ackedTwice: string[] = [];
  readonly deliveries = new Map<string, Delivery[]>();
  readonly bodies = new Map<string, number>();
  /** Leases taken through the doomed node and never acked: id → performance.now() before the receive. */
  readonly held = new Map<string, number>();
  staleAcks = 0;
  confirmedAndAcked = 0;
  readonly confirmsByNode = new Array<number>(nodeCount).fill(0);
  readonly acksByNode = new Array<number>(nodeCount).fill(0);

  confirm(id: string, seq: number, node: number): void {
    assert.ok(!this.confirmed.has(id), `id ${id} was confirmed twice`);
    this.confirmed.set(id, seq);
    this.confirmsByNode[node] = (this.confirmsByNode[node] ?? 0) + 1;
    // The ack may come before the confirm: a consumer can take a message while its send is answered.
    if (this.acked.has(id)) this.confirmedAndAcked++;
  }

  deliver(messages: ReceivedMessage[], node: number): void {
    const receivedAt = performance.now();
    for (const message of messages) {
      const list = this.deliveries.get(message.id) ?? [];
      list.push({ node, deliveryCount: message.deliveryCount, receivedAt });
      this.deliveries.set(message.id, list);
      this.bodies.set(message.id, (message.body as { seq: number }).seq);
    }
  }

  ackAnswered(id: string, ok: boolean, node: number): void {
    if (!ok) {
      this.staleAcks++;
      return;
    }
    if (this.acked.has(id)) {
      this.ackedTwice.push(`${id} (first through node ${this.acked.get(id)}, again through node ${node})`);
      return;
    }
    this.acked.set(id, node);
    this.acksByNode[node] = (this.acksByNode[node] ?? 0) + 1;
    if (this.confirmed.has(id)) this.confirmedAndAcked++;
  }

  unacked(): string[] {
    return [...this.confirmed.keys()].filter((id) => !this.acked.has(id));
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** The node's HTTP failure when it is gone: no answer at all. */
function isNoAnswer(error: unknown): boolean {
  return error instanceof HopperError && error.status === 0;
}

if (!pgTestUrl) {
  test("cluster of three nodes over PostgreSQL", { skip: pgSkipReason }, () => {});
} else {
  const url = pgTestUrl;

  describe("cluster of three nodes over PostgreSQL", () => {
    // Over 80 lines: one describe block of short tests sharing setup.
    const schema = testSchemaName("cluster");
    let lock: PgLock | undefined;
    let nodes: ServerProcess[] = [];
    let clients: HopperClient[] = [];

    before(
      async () => {
        // A test that restarts PostgreSQL waits for this one to end, and this one for its restart.
        lock = await holdRestartLock(url, "shared", 60_000);
        nodes = await Promise.all(
          Array.from({ length: nodeCount }, () =>
            startServerProcess({ store: url, pgSchema: schema, env: { PGAPPNAME: testAppName("cluster") } }),
          ),
        );
        clients = nodes.map((node) => new HopperClient({ url: node.url }));
      },
      { timeout: 75_000 },
    );

    after(
      async () => {
        await Promise.all(nodes.map((node) => node.stop().catch(() => node.kill9())));
        await dropSchemas(url, [schema]);
        await lock?.release();
      },
      { timeout: 30_000 },
    );

    test("a long poll on one node wakes within ~200 ms of a publish committed on another", async (t) => {
      const queue = "wake";
      await clients[0]?.putQueue(queue, {});
      const latenciesMs: number[] = [];
      for (let receiver = 0; receiver < nodeCount; receiver++) {
        for (let sender = 0; sender < nodeCount; sender++) {
          if (sender === receiver) continue;
          const receiving = (clients[receiver] as HopperClient).receive(queue, { waitMs: wakeWaitMs });
          const startedAt = performance.now();
          await delay(wakeSendDelayMs);
          const [sent] = await (clients[sender] as HopperClient).send(queue, [{ body: { sender } }]);
          const confirmedAt = performance.now();
          const messages = await receiving;
          const returnedAt = performance.now();
          assert.ok(sent && !isItemError(sent), `the send on node ${sender} was confirmed`);
          assert.deepEqual(
            messages.map((message) => message.id),
            [sent.id],
            `the long poll on node ${receiver} returned the message node ${sender} published ` +
              `(it returned after ${Math.round(returnedAt - startedAt)} ms of its ${wakeWaitMs} ms wait)`,
          );
          const latencyMs = returnedAt - confirmedAt;
          assert.ok(
            latencyMs < wakeLatencyMsMax,
            `node ${receiver} woke ${Math.round(latencyMs)} ms after node ${sender} confirmed: NOTIFY missed?`,
          );
          latenciesMs.push(latencyMs);
          await (clients[receiver] as HopperClient).ack(
            queue,
            messages.map((message) => message.receipt),
          );
        }
      }
      const medianMs = median(latenciesMs);
      t.diagnostic(
        `wake latency after the confirm (ms): ${latenciesMs.map((ms) => ms.toFixed(1)).join(", ")}`,
      );
      assert.ok(medianMs < wakeLatencyMsMedianMax, `median wake latency ${medianMs.toFixed(1)} ms`);
    });

    test("kill -9 of one node under load: its leases come back through the live nodes, no ack twice", {
      timeout: testTimeoutMs,
    }, async (t) => {
      const queue = "work";
      await clients[0]?.putQueue(queue, { visibilityTimeoutMs });
      const run = new KillRun(queue, nodes, clients, (message) => t.diagnostic(message));
      await run.run();
      const ledger = run.ledger;

      // A send cut off by the kill was sent again, so every message was confirmed once.
      assert.equal(ledger.confirmed.size, messageCount);
      assert.deepEqual(ledger.ackedTwice, [], "an ack answered ok twice for the same message");
      assert.deepEqual(ledger.unacked(), [], "every confirmed message is acked");
      for (const node of nodes.keys()) {
        assert.ok((ledger.confirmsByNode[node] ?? 0) > 0, `node ${node} confirmed publishes`);
        assert.ok((ledger.acksByNode[node] ?? 0) > 0, `node ${node} answered acks`);
      }
      for (const [id, node] of ledger.acked) {
        const seq = ledger.bodies.get(id);
        assert.ok(
          ledger.confirmed.has(id) || (seq !== undefined && ledger.uncertainSeqs.has(seq)),
          `acked message ${id} (seq ${seq}, through node ${node}) was neither confirmed nor sent`,
        );
      }
      assertHeldLeasesCameBack(ledger);

      // Nothing acked comes back, not even once the leases of the last deliveries would have ended.
      await delay(visibilityTimeoutMs + 500);
      await run.receiveLeftovers();
      const { stats } = await (clients[0] as HopperClient).getQueue(queue);
      assert.deepEqual(
        { available: stats.available, delayed: stats.delayed, inFlight: stats.inFlight },
        { available: 0, delayed: 0, inFlight: 0 },
        "the queue is empty",
      );
      assert.equal(stats.acked, ledger.acked.size, "the acked counter counts every ack answered ok, once");
      assert.deepEqual(ledger.ackedTwice, [], "an ack answered ok twice for the same message");
      const redelivered = [...ledger.deliveries.values()].filter((list) => list.length > 1).length;
      t.diagnostic(
        `done: ${run.describe()}; ${redelivered} messages delivered more than once; ` +
          `confirms by node ${ledger.confirmsByNode.join("/")}, acks by node ${ledger.acksByNode.join("/")}`,
      );
    });

    test("a killed node restarted on the same settings serves the same queues", async () => {
      const restarted = await (nodes[doomedNode] as ServerProcess).restart();
      nodes[doomedNode] = restarted;
      clients[doomedNode] = new HopperClient({ url: restarted.url });
      const client = clients[doomedNode] as HopperClient;
      const { stats } = await client.getQueue("work");
      assert.equal(stats.available + stats.inFlight + stats.delayed, 0, "it sees the queue drained");
      // Its LISTEN session is new: a publish on node 0 wakes its long poll.
      const receiving = client.receive("wake", { waitMs: wakeWaitMs });
      await delay(wakeSendDelayMs);
      const [sent] = await (clients[0] as HopperClient).send("wake", [{ body: "after restart" }]);
      const confirmedAt = performance.now();
      const messages = await receiving;
      const latencyMs = performance.now() - confirmedAt;
      assert.ok(sent && !isItemError(sent));
      assert.deepEqual(
        messages.map((message) => message.id),
        [sent.id],
      );
      assert.ok(latencyMs < wakeLatencyMsMax, `the restarted node woke ${Math.round(latencyMs)} ms late`);
    });
  });
}

/**
 * The kill -9 run: producers and consumers spread over every node; once enough is acked, the doomed
 * node's consumers stop, it leases batches that nobody will ack, and it is killed. It ends when every
 * confirmed message is acked, and fails with what it saw when the deadline passes first.
 */
class KillRun {
  readonly ledger = new Ledger();
  private readonly live: Set<number>;
  private readonly startedAt = Date.now();
  private readonly deadline = this.startedAt + runDeadlineMs;
  private nextSeq = 0;
  private killed = false;
  private doomedPaused = false;
  private producersDone = false;
  private signalKill: () => void = () => {};
  private readonly killDue = new Promise<void>((resolve) => {
    this.signalKill = resolve;
  });

  constructor(
    private readonly queue: string,
    private readonly nodes: ServerProcess[],
    private readonly clients: HopperClient[],
    private readonly log: (message: string) => void,
  ) {
    this.live = new Set(nodes.keys());
  }

  async run(): Promise<void> {
    const consumers = this.nodes.map((_, node) =>
      Array.from({ length: consumersPerNode }, () => this.consume(node)),
    );
    const killing = this.killWithLeasesHeld(consumers[doomedNode] as Promise<void>[]);
    const producers = Array.from({ length: producersPerNode * nodeCount }, (_, producer) =>
      this.produce(producer),
    );
    await Promise.all(producers);
    this.producersDone = true;
    this.log(`published ${messageCount}: ${this.describe()}`);
    await Promise.all([killing, ...consumers.flat()]);
    assert.ok(this.killed, "the node was killed during the run");
    this.log(`every confirmed message acked: ${this.describe()}`);
  }

  describe(): string {
    const { ledger } = this;
    return (
      `${ledger.confirmed.size} confirmed, ${ledger.acked.size} acked ` +
      `(${ledger.confirmedAndAcked} of them confirmed), ${ledger.staleAcks} stale acks, ` +
      `${ledger.held.size} held at the kill, after ${Date.now() - this.startedAt} ms`
    );
  }

  private checkDeadline(what: string): void {
    if (Date.now() <= this.deadline) return;
    const missing = this.ledger.unacked();
    throw new Error(
      `${what} did not finish within ${runDeadlineMs} ms: ${this.describe()}; ` +
        `${missing.length} confirmed messages not acked, e.g. ${missing.slice(0, 5).join(", ")}`,
    );
  }

  /** Sends batches through its node until every message is sent; moves to a live node if it dies. */
  private async produce(producer: number): Promise<void> {
    let node = producer % nodeCount;
    while (this.nextSeq < messageCount) {
      this.checkDeadline("publishing");
      const count = Math.min(sendBatchSize, messageCount - this.nextSeq);
      const seqs = Array.from({ length: count }, () => this.nextSeq++);
      for (;;) {
        if (!this.live.has(node)) node = [...this.live][producer % this.live.size] as number;
        let results: Awaited<ReturnType<HopperClient["send"]>>;
        try {
          results = await (this.clients[node] as HopperClient).send(
            this.queue,
            seqs.map((seq) => ({ body: { seq } })),
          );
        } catch (error) {
          // Only a send cut off by the kill may fail; it may or may not be stored. It is sent again
          // through a live node, as a real producer would.
          if (!(node === doomedNode && this.killed && isNoAnswer(error))) throw error;
          for (const seq of seqs) this.ledger.uncertainSeqs.add(seq);
          continue;
        }
        results.forEach((result, index) => {
          assert.ok(!isItemError(result), `send item failed: ${JSON.stringify(result)}`);
          this.ledger.confirm(result.id, seqs[index] as number, node);
        });
        break;
      }
    }
  }

  /** Receives (long poll) and acks through its node until every confirmed message is acked. */
  private async consume(node: number): Promise<void> {
    const { ledger } = this;
    for (;;) {
      if (this.producersDone && ledger.confirmedAndAcked === ledger.confirmed.size) return;
      if (node === doomedNode && this.doomedPaused) return;
      this.checkDeadline("consuming");
      const messages = await (this.clients[node] as HopperClient).receive(this.queue, {
        max: receiveMax,
        waitMs: consumerWaitMs,
      });
      ledger.deliver(messages, node);
      if (messages.length > 0) await this.ack(node, messages);
      if (ledger.acked.size >= acksBeforeKill) this.signalKill();
    }
  }

  private async ack(node: number, messages: ReceivedMessage[]): Promise<void> {
    const results = await (this.clients[node] as HopperClient).ack(
      this.queue,
      messages.map((message) => message.receipt),
    );
    results.forEach((result, index) => {
      const id = (messages[index] as ReceivedMessage).id;
      if (isItemError(result)) {
        // The lease ended before the ack (a slow round on a busy machine); another delivery acks it.
        assert.equal(result.error.code, "stale_receipt", `ack of ${id}: ${JSON.stringify(result)}`);
      }
      this.ledger.ackAnswered(id, !isItemError(result), node);
    });
  }

  /**
   * Once enough is acked: stops the doomed node's consumers, leases batches through it that nobody
   * will ack, starts one more receive that the kill cuts off, and kills the node.
   */
  private async killWithLeasesHeld(doomedConsumers: Promise<void>[]): Promise<void> {
    await this.killDue;
    this.doomedPaused = true;
    await Promise.all(doomedConsumers);
    const client = this.clients[doomedNode] as HopperClient;
    const hold = (messages: ReceivedMessage[], requestedAt: number) => {
      this.ledger.deliver(messages, doomedNode);
      for (const message of messages) this.ledger.held.set(message.id, requestedAt);
    };
    for (let batch = 0; batch < heldBatches; batch++) {
      const requestedAt = performance.now();
      hold(await client.receive(this.queue, { max: receiveMax, waitMs: consumerWaitMs }), requestedAt);
    }
    assert.ok(
      this.ledger.held.size > 0,
      `the doomed node leased nothing before the kill: ${this.describe()}`,
    );
    const requestedAt = performance.now();
    const cutOff = client.receive(this.queue, { max: receiveMax, waitMs: consumerWaitMs }).then(
      (messages) => hold(messages, requestedAt),
      (error: unknown) => assert.ok(isNoAnswer(error), `the cut-off receive: ${error}`),
    );
    this.killed = true;
    this.live.delete(doomedNode);
    const exit = await (this.nodes[doomedNode] as ServerProcess).kill9();
    assert.deepEqual(exit, { code: null, signal: "SIGKILL" });
    await cutOff;
    this.log(`killed node ${doomedNode} holding ${this.ledger.held.size} leases: ${this.describe()}`);
  }

  /**
   * Receives whatever the live nodes still deliver: nothing acked may come back, and anything else
   * can only be a send that the kill cut off and that was stored after all, which is acked now.
   */
  async receiveLeftovers(): Promise<void> {
    for (const node of this.live) {
      const client = this.clients[node] as HopperClient;
      for (;;) {
        const messages = await client.receive(this.queue, { max: receiveMax, waitMs: 500 });
        if (messages.length === 0) break;
        const cameBack = messages.filter((message) => this.ledger.acked.has(message.id));
        assert.deepEqual(
          cameBack.map((message) => `${message.id} (delivery ${message.deliveryCount})`),
          [],
          `acked messages came back through node ${node}`,
        );
        for (const message of messages) {
          const seq = (message.body as { seq: number }).seq;
          assert.ok(this.ledger.uncertainSeqs.has(seq), `message ${message.id} (seq ${seq}) was left over`);
        }
        this.ledger.deliver(messages, node);
        await this.ack(node, messages);
      }
    }
  }
}

/**
 * Every lease held through the killed node came back through a live node, as a later delivery, and
 * not before the lease's visibility timeout had passed.
 */
function assertHeldLeasesCameBack(ledger: Ledger): void {
  for (const [id, requestedAt] of ledger.held) {
    const later = (ledger.deliveries.get(id) ?? []).filter((delivery) => delivery.node !== doomedNode);
    assert.ok(later.length > 0, `message ${id}, held by the killed node, was not delivered again`);
    const first = later[0] as Delivery;
    assert.ok(
      first.deliveryCount >= 2,
      `message ${id} came back with deliveryCount ${first.deliveryCount}, not at least 2`,
    );
    const waitedMs = first.receivedAt - requestedAt;
    assert.ok(
      waitedMs >= visibilityTimeoutMs - clockSlackMs,
      `message ${id} was delivered again ${Math.round(waitedMs)} ms after the killed node leased it, ` +
        `before its ${visibilityTimeoutMs} ms lease ended`,
    );
    assert.ok(ledger.acked.has(id), `message ${id}, held by the killed node, was not acked`);
  }
}
