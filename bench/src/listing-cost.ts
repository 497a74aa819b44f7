/**
 * What listing many queues costs: a server with N queues (one holding two messages), then five
 * `/metrics` scrapes and three `GET /v1/queues`, each timed from request to the last byte of the
 * answer (both by the global `fetch`, so that the figures compare across versions of the client).
 * While each runs, `GET /healthz` goes out every 5 ms, one at a time: the slowest of those is how
 * long the scrape or listing kept the server from answering anyone else.
 *
 *   node bench/dist/listing-cost.js [--queues 10000] [--store sqlite|postgres] [--pg-url URL]
 *
 * SQLite runs with durability "os"; PostgreSQL on a fresh schema, dropped afterwards.
 */
import { parseArgs } from "node:util";
import { HopperClient } from "@hopper/client";
import { benchAppName, benchSchemaName, dropSchema } from "./postgres.js";
import { type ServerStore, startBenchServer } from "./server-process.js";

const { values } = parseArgs({
  options: {
    queues: { type: "string", default: "10000" },
    store: { type: "string", default: "sqlite" },
    "pg-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
  },
});
const queueCount = Number(values.queues);
if (!Number.isInteger(queueCount) || queueCount < 1 || queueCount > 100_000) {
  throw new Error("--queues is an integer from 1 to 100000");
}
if (values.store !== "sqlite" && values.store !== "postgres")
  throw new Error("--store is sqlite or postgres");
const pgUrl = values["pg-url"];
const schema = values.store === "postgres" ? benchSchemaName("listing", pgUrl) : undefined;
const store: ServerStore =
  schema === undefined
    ? { kind: "sqlite", durability: "os" }
    : { kind: "postgres", url: pgUrl, schema, appName: benchAppName("listing") };
/** How often another request goes out while a scrape runs. */
const probeEveryMs = 5;

/** Sends GET /healthz every probeEveryMs, one at a time, until `done` settles; the slowest answer's ms. */
async function slowestAnswerWhile(done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  let slowestMs = 0;
  while (!finished) {
    const start = performance.now();
    await (await fetch(`${server.url}/healthz`)).text();
    slowestMs = Math.max(slowestMs, performance.now() - start);
    await new Promise((resolve) => setTimeout(resolve, probeEveryMs));
  }
  return slowestMs;
}

/** Queues created at once while filling. */
const createConcurrency = 50;

const server = await startBenchServer({ store });
const client = new HopperClient({ url: server.url });
try {
  for (let created = 0; created < queueCount; created += createConcurrency) {
    const names = Array.from(
      { length: Math.min(createConcurrency, queueCount - created) },
      (_, i) => `queue-${String(created + i).padStart(6, "0")}`,
    );
    await Promise.all(names.map((name) => client.putQueue(name)));
  }
  await client.send("queue-000000", [{ body: 1 }, { body: 2 }]);
  console.log(`${queueCount} queues on ${values.store}`);
  for (let round = 1; round <= 5; round++) {
    const start = performance.now();
    const scrape = fetch(`${server.url}/metrics`).then(async (response) => {
      const text = await response.text();
      if (response.status !== 200) throw new Error(`/metrics: ${response.status}`);
      return text;
    });
    const others = slowestAnswerWhile(scrape);
    const text = await scrape;
    const elapsedMs = performance.now() - start;
    const lines = text.split("\n").length;
    console.log(
      `scrape ${round}: ${elapsedMs.toFixed(0)} ms, ${(text.length / 1e6).toFixed(1)} MB, ${lines} lines; ` +
        `slowest /healthz meanwhile ${(await others).toFixed(0)} ms`,
    );
  }
  for (let round = 1; round <= 3; round++) {
    const start = performance.now();
    const listing = fetch(`${server.url}/v1/queues`).then(
      async (response) => ((await response.json()) as { queues: unknown[] }).queues,
    );
    const others = slowestAnswerWhile(listing);
    const queues = await listing;
    const elapsedMs = performance.now() - start;
    if (queues.length !== queueCount) throw new Error(`listed ${queues.length} of ${queueCount} queues`);
    console.log(
      `GET /v1/queues ${round}: ${elapsedMs.toFixed(0)} ms; slowest /healthz meanwhile ${(await others).toFixed(0)} ms`,
    );
  }
} finally {
  await client.close();
  await server.stop();
  if (schema !== undefined) await dropSchema(pgUrl, schema);
}
