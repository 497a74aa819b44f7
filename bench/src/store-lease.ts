/**
 * The SQLite store's lease alone, with many messages already in flight: what one lease costs as the
 * number of unacked messages grows (the in-flight ceiling; bench/results/2026-11-30-session-4.md).
 *
 *   node bench/dist/store-lease.js [in-flight counts …]     (default: 1000 10000 50000)
 *
 * For each count: a fresh store file, that many messages leased and held, 20,000 more sent, then 200
 * leases of 100, each its own commit as in the server. Prints the CPU per leased message of those 200.
 * It loads the compiled store (`npm run build` first); nothing runs over the network.
 */
import { attributes, message, openSqliteStore } from "./compiled-store.js";

const batch = 100;
const measuredLeases = 200;
const body = "x".repeat(1024);

async function leaseCostMicros(inFlight: number): Promise<number> {
  const { store, drop } = openSqliteStore({ label: "store-lease" });
  try {
    await store.queueUpsert({ name: "q", kind: "standard", attributes, now: 1 });
    const total = inFlight + measuredLeases * batch;
    for (let sent = 0; sent < total; sent += batch) {
      const messages = Array.from({ length: batch }, () => message({ body, headers: {}, publishedAt: 1 }));
      await store.queueSendMany({
        now: 1,
        sends: [{ queue: "q", policy: { dedupWindowMs: 0, overflow: null }, messages }],
      });
    }
    const lease = () =>
      store.queueLease({
        queue: "q",
        max: batch,
        now: 2,
        leaseExpiresAt: 1e12,
        expiredBefore: 0,
        inFlightMax: 120_000,
        deadLetter: null,
      });
    for (let held = 0; held < inFlight; held += batch) await lease();
    const before = process.cpuUsage();
    let leased = 0;
    for (let i = 0; i < measuredLeases; i++) leased += (await lease()).messages.length;
    const used = process.cpuUsage(before);
    if (leased !== measuredLeases * batch) throw new Error(`leased ${leased} of ${measuredLeases * batch}`);
    return (used.user + used.system) / leased;
  } finally {
    await drop();
  }
}

const counts = process.argv.slice(2).map(Number);
for (const inFlight of counts.length > 0 ? counts : [1000, 10_000, 50_000]) {
  if (!Number.isInteger(inFlight) || inFlight < 0 || inFlight > 100_000) {
    throw new Error(`in-flight counts are integers from 0 to 100000; got ${inFlight}`);
  }
  const micros = await leaseCostMicros(inFlight);
  console.log(
    `${inFlight} in flight (to ${inFlight + measuredLeases * batch}): ${micros.toFixed(1)} µs of CPU per leased message`,
  );
}
