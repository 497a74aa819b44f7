/**
 * Hopper as a benchmark target: one or more `hopper serve` processes (SQLite, or PostgreSQL with every
 * node on one fresh schema), reached through the typed client. Producers and consumers are spread
 * round-robin over the nodes, so with several nodes a consumer is woken by another node's commit.
 */
import { HopperClient, HopperError, isItemError, type PublishResult } from "@hopper/client";
import { TurnBatcher } from "./batcher.js";
import { type BenchBody, readBenchBody } from "./bench-message.js";
import { closeFetchConnections } from "./fetch-connections.js";
import { batchItemsMax, metricsTimeoutMs, receiveWaitMs } from "./limits.js";
import type { Durability, HopperClientMode } from "./options.js";
import { packageVersion } from "./package-version.js";
import type { PgWireCounter } from "./pg-wire-counter.js";
import { PlainHopperClient } from "./plain-hopper-client.js";
import { PlainConnection, startPlainPushConsumer } from "./plain-hopper-target.js";
import { benchSchemaName, dropSchema, postgresVersion } from "./postgres.js";
import { PushConsumer } from "./push-consumer.js";
import { type BenchServer, type ServerStore, startBenchServer } from "./server-process.js";
import { RequestCounter } from "./statistics.js";
import type {
  BenchConsumer,
  Delivery,
  KeyedMessage,
  KeyedSender,
  QueueConnection,
  QueueTarget,
} from "./target.js";
import { WsFrameCounter } from "./ws-frame-counter.js";

/** The routing key of every fan-out publish; a fanout exchange ignores it, as it ignores patterns. */
const fanoutRoutingKey = "bench";

export type HopperStoreChoice =
  | { kind: "sqlite"; durability: Durability }
  | { kind: "log"; durability: Durability }
  | { kind: "postgres"; url: string; nodes: number };

export async function startHopperTarget(params: {
  store: HopperStoreChoice;
  profileDir: string | undefined;
  /** Set when PostgreSQL traffic is counted: the servers connect through it. */
  wireCounter: PgWireCounter | undefined;
  /** Relay each push consumer's WebSocket through a frame counter (one relay per server). */
  countFrames: boolean;
  /** How producers send: HTTP requests, or `send` frames over a WebSocket (the push targets). */
  publishOver: "http" | "websocket";
  /** Hopper's own client, or the frozen plain one (plain-hopper-client.ts). */
  client: HopperClientMode;
  log: (message: string) => void;
}): Promise<QueueTarget> {
  // Over 80 lines: one target object whose methods share the servers and clients started before it.
  const { store } = params;
  let serverStore: ServerStore;
  let label: string;
  let nodes = 1;
  let schema: string | undefined;
  if (store.kind === "sqlite") {
    serverStore = { kind: "sqlite", durability: store.durability };
    label = `Hopper SQLite (${store.durability})`;
  } else if (store.kind === "log") {
    serverStore = store;
    label = store.durability === "fsync" ? "Hopper log store" : "Hopper log store (os)";
  } else {
    nodes = store.nodes;
    schema = benchSchemaName("hopper", store.url);
    const url = params.wireCounter ? params.wireCounter.relayUrl(store.url) : store.url;
    // The schema name is unique to this run, so it names the servers' sessions too.
    serverStore = { kind: "postgres", url, schema, appName: schema };
    label = `Hopper PostgreSQL, ${nodes} node${nodes === 1 ? "" : "s"}`;
  }
  params.log(`starting ${label}${schema ? ` on schema ${schema}` : ""}`);
  const started = await Promise.allSettled(
    Array.from({ length: nodes }, () =>
      startBenchServer({ store: serverStore, profileDir: params.profileDir }),
    ),
  );
  const servers = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const dropStore = async () => {
    if (store.kind === "postgres" && schema !== undefined) await dropSchema(store.url, schema);
  };
  const failed = started.find((result) => result.status === "rejected");
  if (failed) {
    await Promise.allSettled(servers.map((server) => server.stop()));
    await dropStore();
    throw failed.reason;
  }
  let versions = `Hopper ${packageVersion("@hopper/server")} · @hopper/client ${packageVersion("@hopper/client")}`;
  if (store.kind === "postgres") {
    try {
      versions += ` · PostgreSQL ${await postgresVersion(store.url)}`;
    } catch (error) {
      await Promise.allSettled(servers.map((server) => server.stop()));
      await dropStore();
      throw error;
    }
  }
  const requestCounter = new RequestCounter();
  /** Every client made, closed with the target (each keeps HTTP connections, some a publish WebSocket). */
  const clients = new Set<HopperClient>();
  const newClient = (url: string) => {
    const client = new HopperClient({
      url,
      onRequest: requestCounter.onRequest,
      publishOver: params.publishOver,
    });
    clients.add(client);
    return client;
  };
  const clientFor = (index: number) => newClient((servers[index % servers.length] as BenchServer).url);
  await Promise.all(servers.map((_server, index) => clientFor(index).ready()));
  const frameCounters: WsFrameCounter[] = [];
  if (params.countFrames) {
    try {
      for (const server of servers) frameCounters.push(await WsFrameCounter.start(server.url));
    } catch (error) {
      await Promise.allSettled(frameCounters.map((counter) => counter.close()));
      await Promise.allSettled(servers.map((server) => server.stop()));
      await dropStore();
      throw error;
    }
    params.log("counting WebSocket frames through a relay: the speed figures of this run are not comparable");
  }
  /** A push consumer's client: through the frame counter when counting, like any other client if not. */
  const pushClientFor = (index: number) => {
    const counter = frameCounters[index % servers.length];
    return counter ? newClient(counter.url) : clientFor(index);
  };

  /** With the plain client: one per server, and one per frame counter for the push consumers. */
  const plainClients: PlainHopperClient[] = [];
  const plainFor = (index: number, counted = false): PlainHopperClient | undefined => {
    if (params.client !== "plain") return undefined;
    const url =
      (counted ? frameCounters[index % servers.length]?.url : undefined) ??
      servers[index % servers.length]?.url;
    const client = new PlainHopperClient(url as string);
    plainClients.push(client);
    return client;
  };

  const pushConsumers = new Set<Pick<BenchConsumer, "stop">>();
  // Every caller of close() waits for the one close: the run's own close and Ctrl-C's may overlap,
  // and Ctrl-C exits once its call resolves, which must not be before the servers have stopped.
  let closing: Promise<void> | undefined;
  return {
    label,
    kind: "hopper",
    versions,
    semantics:
      store.kind === "sqlite"
        ? store.durability === "fsync"
          ? "confirm = SQLite commit with synchronous=FULL (fsync); ack = the same, answered after its commit"
          : "confirm = SQLite commit without fsync (--durability os); ack = the same"
        : store.kind === "log"
          ? store.durability === "fsync"
            ? "confirm = the log's records written and fdatasync'ed; ack = the same, answered after its fdatasync"
            : "confirm = the log's records written to the OS, no fdatasync (--durability os); ack = the same"
          : "confirm = PostgreSQL commit (synchronous_commit on, fsync on); ack = the same",
    confirmsAfterFsync: store.kind === "postgres" || store.durability === "fsync",
    brokerPids: servers.map((server) => server.pid),
    postgresAppName: store.kind === "postgres" ? schema : undefined,
    async createQueue(queue) {
      const plain = plainFor(0);
      const created = plain ? await plain.putQueue(queue) : (await clientFor(0).putQueue(queue)).created;
      if (!created) throw new Error(`queue ${queue} already existed; every workload needs a fresh one`);
    },
    connect(queue, index, shape = "batched") {
      const plain = plainFor(index);
      return plain ? new PlainConnection(plain, queue, shape) : new HopperConnection(clientFor(index), queue);
    },
    consumePush(queue, index, credit, onMessage) {
      const plain = plainFor(index, true);
      const consumer = plain
        ? startPlainPushConsumer(plain, queue, credit, onMessage)
        : new PushConsumer(pushClientFor(index), queue, credit, onMessage);
      pushConsumers.add(consumer);
      return consumer;
    },
    async createFanout(exchange, queues) {
      const client = clientFor(0);
      for (const queue of queues) {
        const { created } = await client.putQueue(queue);
        if (!created) throw new Error(`queue ${queue} already existed; every workload needs a fresh one`);
      }
      const { created } = await client.putExchange(exchange, { type: "fanout" });
      if (!created) throw new Error(`exchange ${exchange} already existed; the fan-out needs a fresh one`);
      for (const queue of queues) await client.bind(exchange, { queue, pattern: "#" });
      return new FanoutPublisher(client, exchange, queues.length);
    },
    async createKeyedQueue(queue, kind) {
      const client = clientFor(0);
      // A FIFO queue deduplicates by default only messages that carry a dedupId; the bench sends none,
      // so every send stores every message, as in a standard queue.
      const { created } = await client.putQueue(queue, { kind });
      if (!created) throw new Error(`queue ${queue} already existed; every workload needs a fresh one`);
      return new KeyedQueueSender(client, queue);
    },
    counters: () => {
      const counts: Record<string, number> = { ...requestCounter.snapshot() };
      for (const counter of frameCounters) {
        for (const [name, count] of Object.entries(counter.snapshot()))
          counts[name] = (counts[name] ?? 0) + count;
      }
      return counts;
    },
    storeCounters: async () => {
      let total: { commits: number; jobs: number } | undefined;
      for (const server of servers) {
        const counted = await readStoreCounters(server.url);
        if (counted === undefined) return undefined;
        total = { commits: (total?.commits ?? 0) + counted.commits, jobs: (total?.jobs ?? 0) + counted.jobs };
      }
      return total;
    },
    close() {
      closing ??= (async () => {
        // A push consumer left open would try to reconnect to a stopped server for the rest of the run.
        await Promise.allSettled([...pushConsumers].map((consumer) => consumer.stop()));
        // Open keep-alive connections would make each server's graceful stop wait for them.
        await Promise.allSettled([...clients].map((client) => client.close()));
        for (const client of plainClients) client.close();
        await Promise.allSettled(frameCounters.map((counter) => counter.close()));
        await closeFetchConnections();
        await Promise.allSettled(servers.map((server) => server.stop()));
        await dropStore();
      })();
      return closing;
    },
  };
}

class HopperConnection implements QueueConnection {
  constructor(
    private readonly client: HopperClient,
    private readonly queue: string,
  ) {}

  async publish(body: unknown): Promise<void> {
    await this.client.publish(this.queue, { body });
  }

  async receive(max: number, signal: AbortSignal): Promise<Delivery[]> {
    const messages = await this.client.receive(this.queue, { max, waitMs: receiveWaitMs, signal });
    return messages.map((message) => ({
      body: readBenchBody(message.body),
      deliveryCount: message.deliveryCount,
      receipt: message.receipt,
      key: message.key,
    }));
  }

  async ackLater(receipt: string): Promise<boolean> {
    return !isItemError(await this.client.ackLater(this.queue, receipt));
  }
}

/** One `send` request per call, to a standard or FIFO queue; every message must be stored anew. */
class KeyedQueueSender implements KeyedSender {
  constructor(
    private readonly client: HopperClient,
    private readonly queue: string,
  ) {}

  async send(messages: readonly KeyedMessage[]): Promise<void> {
    const results = await this.client.send(
      this.queue,
      messages.map(({ body, key }) => ({ body, key })),
    );
    for (const result of results) {
      if (isItemError(result)) throw HopperError.fromItem(result.error, 200);
      if (result.duplicate) {
        throw new Error(`a send to ${this.queue} was answered "duplicate", but the bench sends no dedupIds`);
      }
    }
  }
}

/**
 * Publishes through an exchange. The client's `publishTo` takes a batch and has no coalescing
 * `publish` of its own, so the publishes of one event-loop turn share one request of up to 100 here,
 * as `publish` shares one send request. A message must reach every bound queue.
 */
class FanoutPublisher {
  private readonly batcher: TurnBatcher<BenchBody, PublishResult>;

  constructor(
    client: HopperClient,
    exchange: string,
    private readonly queues: number,
  ) {
    this.batcher = new TurnBatcher(
      (bodies) =>
        client.publishTo(
          exchange,
          bodies.map((body) => ({ routingKey: fanoutRoutingKey, body })),
        ),
      batchItemsMax,
    );
  }

  async publish(body: BenchBody): Promise<void> {
    const result = await this.batcher.add(body);
    if (isItemError(result)) throw HopperError.fromItem(result.error, 200);
    if (result.routed !== this.queues) {
      throw new Error(`a fan-out publish reached ${result.routed} queues, not ${this.queues}`);
    }
  }
}

const metricLine = /^(hopper_store_commits_total|hopper_store_commit_jobs_total)\s+(\S+)$/gm;

/** The embedded store's group-commit counters from `/metrics`; undefined where they are not exported. */
async function readStoreCounters(url: string): Promise<{ commits: number; jobs: number } | undefined> {
  const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(metricsTimeoutMs) });
  if (!response.ok) throw new Error(`GET ${url}/metrics answered ${response.status}`);
  const text = await response.text();
  const values = new Map<string, number>();
  for (const match of text.matchAll(metricLine)) values.set(match[1] as string, Number(match[2]));
  const commits = values.get("hopper_store_commits_total");
  const jobs = values.get("hopper_store_commit_jobs_total");
  return commits === undefined || jobs === undefined ? undefined : { commits, jobs };
}
