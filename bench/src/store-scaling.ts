/**
 * What a store call costs as a queue grows, the store alone (no server, no network but PostgreSQL's):
 *
 *   node bench/dist/store-scaling.js [--store sqlite|postgres] [--pg-url URL]
 *                                    [--backlogs 1000,100000,1000000] [--in-flight 0,1000,10000]
 *                                    [--purges 300000]
 *
 * - Stats: for each backlog, a fresh queue holding that many messages (100 of them in flight), then
 *   20 reads of its depth by state (`queueDepth`, what stats and each /metrics scrape read); prints
 *   the median.
 * - Leases and hand-offs: for each in-flight count, a fresh queue with that many messages leased and
 *   held, then 1,000 times a lease of one message and its ack, and 1,000 times a send of one message
 *   handed off to a receive (Handoff) and its ack; prints the wall time per pair (on PostgreSQL most
 *   of it is the database's).
 * - Purge and delete: for each count, a fresh queue of that many 1 KiB messages purged, and another
 *   deleted; prints how long each took and the longest gap between the turns of the event loop
 *   meanwhile (a 1 ms timer), which on SQLite is how long every other call waited.
 *
 * SQLite runs with durability "os" (no fsync), so the figures are the work, not the disk. PostgreSQL
 * uses a schema of its own, dropped afterwards. It loads the compiled store (`npm run build` first).
 */
import { parseArgs } from "node:util";
import pg from "pg";
import {
  attributes,
  type BenchStore,
  message,
  openSqliteStore,
  seededRandom,
  serverDist,
} from "./compiled-store.js";

const { values } = parseArgs({
  options: {
    store: { type: "string", default: "sqlite" },
    "pg-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/test" },
    backlogs: { type: "string", default: "1000,100000,1000000" },
    "in-flight": { type: "string", default: "0,1000,10000" },
    purges: { type: "string", default: "300000" },
  },
});
const storeKind = values.store;
if (storeKind !== "sqlite" && storeKind !== "postgres") throw new Error(`--store is sqlite or postgres`);
const counts = (flag: string, text: string) =>
  text.split(",").map((part) => {
    const n = Number(part);
    if (!Number.isInteger(n) || n < 0 || n > 10_000_000) throw new Error(`${flag}: ${part} is not a count`);
    return n;
  });
const backlogs = counts("--backlogs", values.backlogs);
const inFlights = counts("--in-flight", values["in-flight"]);
const purges = counts("--purges", values.purges);

const now = 1_800_000_000_000;
const queue = "q";
const noPolicy = { dedupWindowMs: 0, overflow: null };
const sendBatch = 1000;
const leaseBatch = 100;
const depthReads = 20;
const pairs = 1000;
const pgUrl = values["pg-url"];

/** A fresh store with one empty queue; `drop` closes it and removes what it left behind. */
async function openStore(): Promise<{ store: BenchStore; drop: () => Promise<void> }> {
  if (storeKind === "sqlite") {
    const { store, drop } = openSqliteStore({ label: "store-scaling", durability: "os" });
    await store.queueUpsert({ name: queue, kind: "standard", attributes, now });
    return { store, drop };
  }
  const { PostgresStore } = (await import(new URL("store/postgres/postgres-store.js", serverDist).href)) as {
    PostgresStore: { open(options: object): Promise<BenchStore> };
  };
  const schema = `hopper_store_scaling_${process.pid}`;
  const store = await PostgresStore.open({ url: pgUrl, schema, random: seededRandom(1), poolSize: 4 });
  await store.queueUpsert({ name: queue, kind: "standard", attributes, now });
  const drop = async () => {
    await store.close();
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
  };
  return { store, drop };
}

async function withStore<T>(run: (store: BenchStore) => Promise<T>): Promise<T> {
  const { store, drop } = await openStore();
  try {
    return await run(store);
  } finally {
    await drop();
  }
}

async function fill(store: BenchStore, count: number, body: string): Promise<void> {
  for (let sent = 0; sent < count; sent += sendBatch) {
    const messages = Array.from({ length: Math.min(sendBatch, count - sent) }, () =>
      message({ body, headers: {}, publishedAt: now }),
    );
    await store.queueSendMany({ now, sends: [{ queue, policy: noPolicy, messages }] });
  }
}

const lease = (store: BenchStore, max: number) =>
  store.queueLease({
    queue,
    max,
    now,
    leaseExpiresAt: now + 3_600_000,
    expiredBefore: 0,
    inFlightMax: 120_000,
    deadLetter: null,
  });

async function hold(store: BenchStore, count: number): Promise<void> {
  let held = 0;
  while (held < count) held += (await lease(store, Math.min(leaseBatch, count - held))).messages.length;
}

/** Milliseconds per call: the median of `depthReads` stats reads. */
async function depthMillis(backlog: number): Promise<number> {
  return withStore(async (store) => {
    await fill(store, backlog, "x");
    await hold(store, Math.min(100, backlog));
    const times: number[] = [];
    for (let i = 0; i < depthReads; i++) {
      const start = performance.now();
      await store.queueDepth({ name: queue, now });
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)] as number;
  });
}

/** Microseconds of wall time per lease-and-ack pair and per hand-off-and-ack pair. */
async function pairMicros(inFlight: number): Promise<{ lease: number; handoff: number }> {
  const body = "x".repeat(1024);
  return withStore(async (store) => {
    await fill(store, inFlight + pairs, body);
    await hold(store, inFlight);
    const leaseStart = performance.now();
    for (let i = 0; i < pairs; i++) {
      const { messages } = await lease(store, 1);
      if (messages.length !== 1) throw new Error("a lease took nothing");
      await store.queueAck({ queue, receipts: messages.map((m) => m.receipt) });
    }
    const leaseMicros = ((performance.now() - leaseStart) * 1000) / pairs;
    const handoffStart = performance.now();
    for (let i = 0; i < pairs; i++) {
      const [outcome] = await store.queueSendMany({
        now,
        sends: [
          {
            queue,
            policy: noPolicy,
            messages: [message({ body, headers: {}, publishedAt: now })],
            handoff: { max: 1, leaseExpiresAt: now + 3_600_000, inFlightMax: 120_000 },
          },
        ],
      });
      const leased = outcome?.leased ?? [];
      if (leased.length !== 1) throw new Error("a send handed nothing off");
      await store.queueAck({ queue, receipts: leased.map((m) => m.receipt) });
    }
    const handoffMicros = ((performance.now() - handoffStart) * 1000) / pairs;
    return { lease: leaseMicros, handoff: handoffMicros };
  });
}

/** Runs `call` while a 1 ms timer notes the longest gap between its turns: milliseconds of both. */
async function timedWithGaps(call: () => Promise<unknown>): Promise<{ ms: number; gapMs: number }> {
  let last = performance.now();
  let gapMs = 0;
  const timer = setInterval(() => {
    const at = performance.now();
    gapMs = Math.max(gapMs, at - last);
    last = at;
  }, 1);
  try {
    last = performance.now();
    const start = last;
    await call();
    const ms = performance.now() - start;
    gapMs = Math.max(gapMs, performance.now() - last);
    return { ms, gapMs };
  } finally {
    clearInterval(timer);
  }
}

async function removalMillis(count: number, remove: (store: BenchStore) => Promise<unknown>) {
  return withStore(async (store) => {
    await fill(store, count, "x".repeat(1024));
    return timedWithGaps(() => remove(store));
  });
}

console.log(`store-scaling, ${storeKind}, ${new Date().toISOString()}`);
for (const backlog of backlogs) {
  console.log(
    `stats of a queue of ${backlog} messages: ${(await depthMillis(backlog)).toFixed(2)} ms per read`,
  );
}
for (const inFlight of inFlights) {
  const { lease: leaseUs, handoff } = await pairMicros(inFlight);
  console.log(
    `${inFlight} in flight: lease(1) + ack ${leaseUs.toFixed(0)} µs, hand-off send(1) + ack ${handoff.toFixed(0)} µs`,
  );
}
for (const count of purges) {
  const purge = await removalMillis(count, (store) => store.queuePurge({ queue }));
  const removal = await removalMillis(count, (store) => store.queueDelete({ name: queue }));
  console.log(
    `purge of ${count}: ${purge.ms.toFixed(0)} ms, longest event-loop gap ${purge.gapMs.toFixed(0)} ms; ` +
      `delete: ${removal.ms.toFixed(0)} ms, longest gap ${removal.gapMs.toFixed(0)} ms`,
  );
}
