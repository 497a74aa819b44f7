/**
 * One process of the chat application: `node dist/role.js <role>`, configured by its environment
 * (config.ts). Roles: `api` (the chat API and web page), `relay` (the outbox relay), `realtime`,
 * `push`, `integrations` (the workers), `vendor` and `webhook` (the stand-ins). Each prints
 * `ready <role> [url]` once it serves, and stops gracefully on SIGTERM. Running each as its own
 * process is what lets a test kill one with -9 at an exact point and start it again.
 */
import { HopperClient } from "@hopper/client";
import { runRelay } from "@hopper/outbox";
import { buildChatApi } from "./api/app.js";
import { type ChatEnv, names, pausePoint, readEnv } from "./config.js";
import { chatQueries, openChatDbMigrated } from "./db.js";
import { HopperInboxes } from "./hopper-inboxes.js";
import { standInOptionsFromEnv, startStandIn } from "./stand-ins.js";
import { ensureTopology } from "./topology.js";
import { integrationsHandler } from "./workers/integrations.js";
import { pushHandler } from "./workers/push.js";
import { realtimeHandler } from "./workers/realtime.js";

/** How many events each worker holds at once (its prefetch); see docs/chat.md. */
const workerSlots = { realtime: 32, push: 2, integrations: 8 } as const;

type Stop = () => Promise<void>;

function ready(role: string, url = ""): void {
  process.stdout.write(`ready ${role}${url === "" ? "" : ` ${url}`}\n`);
}

function reportError(role: string) {
  return (error: unknown) => console.error(`chat ${role}:`, error instanceof Error ? error.message : error);
}

/**
 * A client whose publish answers pass through a test's crash point: `relay-after-confirm` stops the
 * relay once Hopper confirmed a publish and before the relay marks its rows sent.
 */
function relayClient(env: ChatEnv): HopperClient {
  const pausingFetch: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.ok && String(input).endsWith("/publish")) {
      const text = await response.clone().text();
      await pausePoint(env, "relay-after-confirm", JSON.parse(text));
    }
    return response;
  };
  return new HopperClient({
    url: env.hopperUrl,
    apiKey: env.hopperApiKey,
    ...(env.pauseAt !== undefined && { fetch: pausingFetch }),
  });
}

async function startRole(role: string): Promise<Stop> {
  if (role === "vendor" || role === "webhook") {
    const standIn = await startStandIn(
      role === "vendor" ? "push" : "webhook",
      standInOptionsFromEnv(process.env),
      Number(process.env.STANDIN_PORT ?? 0),
    );
    ready(role, standIn.url);
    return () => new Promise((resolve) => standIn.server.close(() => resolve()));
  }
  const env = readEnv();
  const access = { url: env.hopperUrl, apiKey: env.hopperApiKey };
  const hopper = new HopperClient(access);
  const inboxes = new HopperInboxes(access, names.inbox);
  await ensureTopology(hopper, inboxes);
  const db = await openChatDbMigrated(env.chatDb);
  const queries = chatQueries(db);
  if (role === "api") {
    const app = await buildChatApi({ env, db });
    const url = await app.listen({ host: env.apiHost, port: env.apiPort });
    ready(role, url);
    return () => app.close();
  }
  if (role === "relay") {
    const client = relayClient(env);
    const relay = runRelay({ db, hopper: client, onError: reportError(role) });
    ready(role);
    return async () => {
      await relay.stop();
      await client.close();
    };
  }
  const onError = reportError(role);
  let worker: { stop(): Promise<void> };
  if (role === "realtime") {
    worker = hopper.worker(names.queues.realtime, realtimeHandler(env, queries, inboxes), {
      mode: "push",
      prefetch: workerSlots.realtime,
      onError,
    });
  } else if (role === "integrations") {
    worker = hopper.worker(names.queues.integrations, integrationsHandler(db, queries, env.webhookUrl), {
      mode: "push",
      prefetch: workerSlots.integrations,
      onError,
    });
  } else if (role === "push") {
    const deps = { queries, inboxes, vendorUrl: env.pushVendorUrl };
    // A low prefetch: a slow vendor holds few events, and the rest wait in the queue for any worker.
    worker = hopper.worker(names.queues.push, pushHandler(deps), {
      mode: "push",
      prefetch: workerSlots.push,
      onError,
    });
  } else {
    throw new Error(`unknown role ${role}`);
  }
  ready(role);
  return async () => {
    await worker.stop();
    await hopper.close();
  };
}

const role = process.argv[2] ?? "";
const stop = await startRole(role);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    void stop().then(() => process.exit(0));
  });
}
