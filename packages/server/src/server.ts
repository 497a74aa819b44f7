/**
 * Wires a running Hopper: store → broker → HTTP. Used by `hopper serve` and by tests that need a
 * whole server in-process.
 */
import type { FastifyInstance } from "fastify";
import { ApiKeys } from "./auth/api-keys.js";
import { DeviceTokens } from "./auth/device-tokens.js";
import { ExchangeBroker } from "./broker/exchanges.js";
import { inboxSubscriptionSource } from "./broker/inbox-subscription.js";
import { InboxBroker, type InboxBrokerStore } from "./broker/inboxes.js";
import { QueueBroker } from "./broker/queues.js";
import { SignalHub } from "./broker/signals.js";
import { StreamBroker } from "./broker/streams.js";
import { type Clock, systemClock } from "./clock.js";
import { limits } from "./limits.js";
import { Metrics } from "./observability/metrics.js";
import { buildHttpApp } from "./protocols/http/app.js";
import { registerWebSocketEndpoint } from "./protocols/ws/endpoint.js";
import { type Random, systemRandom } from "./random.js";
import { LogStore } from "./store/log/log-store.js";
import { PostgresStore } from "./store/postgres/postgres-store.js";
import { SqliteStore } from "./store/sqlite/sqlite-store.js";
import type { Durability, Store } from "./store/store.js";

export interface ServerOptions {
  host?: string;
  /** 0 picks a free port (tests). */
  port?: number;
  /** The SQLite file; ":memory:" for a throwaway broker. Ignored when `postgresUrl` is given. */
  dataPath: string;
  durability?: Durability;
  /** SQLite only: false skips PRAGMA quick_check at start, for a very large file (docs/reliability.md). */
  integrityCheck?: boolean;
  /** A postgres:// URL: state lives in PostgreSQL, shared with every node given the same URL. */
  postgresUrl?: string;
  /** A directory: state lives in memory and in an append-only log there (docs/log-store.md). */
  logDir?: string;
  /** The PostgreSQL schema of Hopper's tables (default "hopper"). */
  postgresSchema?: string;
  apiKeys?: readonly string[];
  /** Device tokens (JWTs) are HS256 with this secret (`--jwt-secret`, HOPPER_JWT_SECRET)... */
  jwtSecret?: string;
  /** ...or RS256/ES256 by a key of this JWKS file (`--jwt-jwks`). Without either, devices cannot connect. */
  jwtJwksPath?: string;
  clock?: Clock;
  random?: Random;
  /** A pino level ("info", "warn", …), or false for no logs. */
  logLevel?: string | false;
}

export interface RunningServer {
  url: string;
  app: FastifyInstance;
  broker: QueueBroker;
  exchanges: ExchangeBroker;
  inboxes: InboxBroker;
  streams: StreamBroker;
  store: Store;
  apiKeys: ApiKeys;
  close(): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const store: Store = options.postgresUrl
    ? await PostgresStore.open({
        url: options.postgresUrl,
        ...(options.postgresSchema && { schema: options.postgresSchema }),
        random,
      })
    : options.logDir
      ? LogStore.open({ dir: options.logDir, durability: options.durability ?? "fsync", random })
      : new SqliteStore({
          path: options.dataPath,
          durability: options.durability ?? "fsync",
          random,
          integrityCheck: options.integrityCheck ?? true,
        });
  const logger = options.logLevel === false ? false : { level: options.logLevel ?? "warn" };
  const broker = new QueueBroker(store, clock, random, {
    info: () => {},
    warn: (obj, msg) => console.warn(msg, obj),
    error: (obj, msg) => console.error(msg, obj),
  });
  await broker.start();
  const streams = new StreamBroker(store, clock, undefined, broker.router);
  const exchanges = new ExchangeBroker(store, clock, broker.router, broker, streams);
  // The stores gain InboxStore one by one; the embedded ones have it.
  const inboxStore: InboxBrokerStore = store;
  const inboxes = new InboxBroker(inboxStore, clock, random);
  inboxes.start();
  streams.start();
  const apiKeys = new ApiKeys(options.apiKeys ?? []);
  const metrics = new Metrics(
    broker,
    exchanges,
    store instanceof SqliteStore || store instanceof LogStore ? store : undefined,
    inboxes,
    streams,
  );
  const app = await buildHttpApp({ broker, exchanges, inboxes, streams, apiKeys, metrics, logger });
  const signals = new SignalHub(store, (error) => console.warn("signal not handed to other nodes", error));
  await registerWebSocketEndpoint(app, {
    broker,
    clock,
    signals,
    inboxes: {
      source: inboxSubscriptionSource(inboxes, inboxStore),
      ack: (ns, recipient, device, seq) => inboxes.ack(ns, recipient, device, seq),
      acked: (ns, lagMs) => inboxes.acked(ns, lagMs),
    },
    streams,
    deviceTokens: deviceTokensOf(options),
  });
  const address = await app.listen({ host: options.host ?? "127.0.0.1", port: options.port ?? 7171 });
  let closing: Promise<void> | undefined;
  return {
    url: address,
    app,
    broker,
    exchanges,
    inboxes,
    streams,
    store,
    apiKeys,
    close() {
      closing ??= (async () => {
        broker.stop();
        inboxes.stop();
        streams.stop();
        // Long polls answer at once on stop; a connection still open after the grace period is a
        // keep-alive straggler, and is cut so that shutdown is bounded.
        const cutStragglers = setTimeout(() => app.server.closeAllConnections(), limits.shutdownGraceMs);
        await app.close();
        clearTimeout(cutStragglers);
        await store.close();
      })();
      return closing;
    },
  };
}

/** The verifier of device tokens the options configure, if any; both at once is a mistake. */
function deviceTokensOf(options: ServerOptions): DeviceTokens | undefined {
  if (options.jwtSecret !== undefined && options.jwtJwksPath !== undefined) {
    throw new Error("Give --jwt-secret or --jwt-jwks, not both.");
  }
  if (options.jwtSecret !== undefined) return DeviceTokens.fromSecret(options.jwtSecret);
  if (options.jwtJwksPath !== undefined) return DeviceTokens.fromKeySetFile(options.jwtJwksPath);
  return undefined;
}
