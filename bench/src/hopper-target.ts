/**
 * Hopper as a benchmark target: one or more `hopper serve` processes (SQLite, or PostgreSQL with every
 * node on one fresh schema), reached through the typed client. Producers and consumers are spread
 * round-robin over the nodes, so with several nodes a consumer is woken by another node's commit.
 */
import { HopperClient, isItemError } from "@hopper/client";
import { readBenchBody } from "./bench-message.js";
import { closeFetchConnections } from "./fetch-connections.js";
import { receiveWaitMs } from "./limits.js";
import type { Durability } from "./options.js";
import type { PgWireCounter } from "./pg-wire-counter.js";
import { benchSchemaName, dropSchema } from "./postgres.js";
import { type BenchServer, type ServerStore, startBenchServer } from "./server-process.js";
import { RequestCounter } from "./statistics.js";
import type { Delivery, QueueConnection, QueueTarget } from "./target.js";

export type HopperStoreChoice =
  | { kind: "sqlite"; durability: Durability }
  | { kind: "postgres"; url: string; nodes: number };

export async function startHopperTarget(params: {
  store: HopperStoreChoice;
  profileDir: string | undefined;
  /** Set when PostgreSQL traffic is counted: the servers connect through it. */
  wireCounter: PgWireCounter | undefined;
  log: (message: string) => void;
}): Promise<QueueTarget> {
  const { store } = params;
  let serverStore: ServerStore;
  let label: string;
  let nodes = 1;
  let schema: string | undefined;
  if (store.kind === "sqlite") {
    serverStore = { kind: "sqlite", durability: store.durability };
    label = `Hopper SQLite (${store.durability})`;
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
  const requestCounter = new RequestCounter();
  const clientFor = (index: number) => {
    const server = servers[index % servers.length] as BenchServer;
    return new HopperClient({ url: server.url, fetch: requestCounter.fetch });
  };
  await Promise.all(servers.map((_server, index) => clientFor(index).ready()));

  let closed = false;
  return {
    label,
    kind: "hopper",
    brokerPids: servers.map((server) => server.pid),
    postgresAppName: store.kind === "postgres" ? schema : undefined,
    async createQueue(queue) {
      const { created } = await clientFor(0).putQueue(queue);
      if (!created) throw new Error(`queue ${queue} already existed; every workload needs a fresh one`);
    },
    connect: (queue, index) => new HopperConnection(clientFor(index), queue),
    counters: () => ({ ...requestCounter.snapshot() }),
    async close() {
      if (closed) return;
      closed = true;
      // Open keep-alive connections would make each server's graceful stop wait for them.
      await closeFetchConnections();
      await Promise.allSettled(servers.map((server) => server.stop()));
      await dropStore();
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
    }));
  }

  async ackLater(receipt: string): Promise<boolean> {
    return !isItemError(await this.client.ackLater(this.queue, receipt));
  }
}
