/**
 * W3's storage work, a store alone (no server, no network): 10 concurrent sends of 100 fill a
 * queue with N JSON messages of 1 KiB, then 4 concurrent loops of lease(100) + ack drain it, through the
 * store's group commit as the server calls it. Prints the CPU time of this process (the store's thread
 * and its checkpoint thread) and the wall time per message of each phase, for `--rounds` fresh stores:
 *
 *   node bench/dist/store-drain.js [--store sqlite|log] [--messages 100000] [--rounds 3] [--durability os|fsync]
 *
 * (The log store always fsyncs; --durability applies to SQLite.)
 *
 * It loads the compiled store (`npm run build` first).
 */
import { parseArgs } from "node:util";
import { attributes, message, openLogStore, openSqliteStore } from "./compiled-store.js";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "100000" },
    rounds: { type: "string", default: "3" },
    durability: { type: "string", default: "os" },
    store: { type: "string", default: "sqlite" },
  },
});
const total = Number(values.messages);
const rounds = Number(values.rounds);
if (!Number.isInteger(total) || total < 100 || total % 100 !== 0)
  throw new Error("--messages: a multiple of 100");
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds: a positive integer");
if (values.durability !== "os" && values.durability !== "fsync") throw new Error("--durability: os or fsync");
if (values.store !== "sqlite" && values.store !== "log") throw new Error("--store: sqlite or log");

const now = 1_800_000_000_000;
const queue = "q";
const noPolicy = { dedupWindowMs: 0, overflow: null };
/** A JSON body of 1 KiB, as the bench's workloads send. */
const body = JSON.stringify({ pad: "x".repeat(1014) });
const batch = 100;
const senders = 10;
const consumers = 4;

/** CPU and wall microseconds per message of `work`, which handles `count` messages. */
async function perMessage(count: number, work: () => Promise<void>): Promise<{ cpu: number; wall: number }> {
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await work();
  const cpu = process.cpuUsage(cpuBefore);
  return { cpu: (cpu.user + cpu.system) / count, wall: ((performance.now() - start) * 1000) / count };
}

for (let round = 1; round <= rounds; round++) {
  const { store, drop } =
    values.store === "log"
      ? openLogStore({ label: "store-drain" })
      : openSqliteStore({ label: "store-drain", durability: values.durability });
  try {
    await store.queueUpsert({ name: queue, kind: "standard", attributes, now });
    let sent = 0;
    const send = async () => {
      while (sent < total) {
        sent += batch;
        const messages = Array.from({ length: batch }, () => ({
          ...message({ body, headers: {}, publishedAt: now }),
          contentType: "application/json",
        }));
        await store.queueSendMany({ now, sends: [{ queue, policy: noPolicy, messages }] });
      }
    };
    const enqueue = await perMessage(total, async () => {
      await Promise.all(Array.from({ length: senders }, send));
    });
    let drained = 0;
    const drain = async () => {
      for (;;) {
        const { messages } = await store.queueLease({
          queue,
          max: batch,
          now,
          leaseExpiresAt: now + 3_600_000,
          expiredBefore: 0,
          inFlightMax: 120_000,
          deadLetter: null,
        });
        if (messages.length === 0) return;
        await store.queueAck({ queue, receipts: messages.map((m) => m.receipt) });
        drained += messages.length;
      }
    };
    const drainCost = await perMessage(total, async () => {
      await Promise.all(Array.from({ length: consumers }, drain));
    });
    if (drained !== total) throw new Error(`drained ${drained} of ${total} messages`);
    console.log(
      `round ${round}: enqueue ${enqueue.cpu.toFixed(1)} µs CPU, ${enqueue.wall.toFixed(1)} µs wall per message; ` +
        `drain (lease + ack) ${drainCost.cpu.toFixed(1)} µs CPU, ${drainCost.wall.toFixed(1)} µs wall per message`,
    );
  } finally {
    await drop();
  }
}
