/**
 * What the log store's state in memory costs outside the message paths: how long opening a store takes
 * (its log read back and replayed), how long a scan of one queue takes (`queueDepth`, which
 * queueNextEvents, peek and the sweeps resemble), and what a compaction of that state costs: its
 * time and the longest the event loop was held meanwhile. For a queue of N JSON messages of 1 KiB,
 * half of them leased. Fresh stores in temporary directories:
 *
 *   node bench/dist/log-recovery.js [--messages 100000] [--rounds 3]
 *
 * It loads the compiled store (`npm run build` first).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { attributes, type BenchStore, message, seededRandom, serverDist } from "./compiled-store.js";

const { LogStore } = (await import(new URL("store/log/log-store.js", serverDist).href)) as {
  LogStore: { open(options: { dir: string; random: unknown }): BenchStore & { compact(): Promise<void> } };
};

const { values } = parseArgs({
  options: { messages: { type: "string", default: "100000" }, rounds: { type: "string", default: "3" } },
});
const total = Number(values.messages);
const rounds = Number(values.rounds);
if (!Number.isInteger(total) || total < 100 || total % 100 !== 0)
  throw new Error("--messages: a multiple of 100");
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds: a positive integer");

const now = 1_800_000_000_000;
const queue = "q";
const body = JSON.stringify({ pad: "x".repeat(1014) });
const batch = 100;

async function fill(store: BenchStore): Promise<void> {
  await store.queueUpsert({ name: queue, kind: "standard", attributes, now });
  for (let sent = 0; sent < total; sent += batch) {
    const messages = Array.from({ length: batch }, () => ({
      ...message({ body, headers: {}, publishedAt: now }),
      contentType: "application/json",
    }));
    await store.queueSendMany({
      now,
      sends: [{ queue, policy: { dedupWindowMs: 0, overflow: null }, messages }],
    });
  }
  for (let leased = 0; leased < total / 2; leased += batch) {
    const lease = { queue, max: batch, now, leaseExpiresAt: now + 3_600_000, expiredBefore: 0 };
    await store.queueLease({ ...lease, inFlightMax: total, deadLetter: null });
  }
}

for (let round = 1; round <= rounds; round++) {
  const dir = mkdtempSync(join(tmpdir(), "hopper-log-recovery-"));
  try {
    const first = LogStore.open({ dir, random: seededRandom(1) });
    await fill(first);
    await first.close();
    const started = performance.now();
    const store = LogStore.open({ dir, random: seededRandom(2) });
    const openMs = performance.now() - started;
    const scans = 20;
    const scanStarted = performance.now();
    for (let i = 0; i < scans; i++) await store.queueDepth({ name: queue, now });
    const scanMs = (performance.now() - scanStarted) / scans;
    const depth = (await store.queueDepth({ name: queue, now })) as { available: number; inFlight: number };
    if (depth.available + depth.inFlight !== total) throw new Error(`replayed ${JSON.stringify(depth)}`);
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    const compactStarted = performance.now();
    await store.compact();
    const compactMs = performance.now() - compactStarted;
    loopDelay.disable();
    console.log(
      `round ${round}: open (replay of ${total} messages, ${total / 2} leased) ${openMs.toFixed(0)} ms; ` +
        `one queueDepth scan ${scanMs.toFixed(2)} ms; a compaction ${compactMs.toFixed(0)} ms, ` +
        `the event loop held at most ${(loopDelay.max / 1e6).toFixed(0)} ms`,
    );
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
