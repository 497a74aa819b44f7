/**
 * Redis Streams through ioredis alone, on a redis-server of its own that fsyncs its append-only file
 * before each reply (`--appendfsync always`, as the bench's private server): XADD to publish, one
 * consumer in a group reading XREADGROUP … COUNT 256 BLOCK and acking each entry with its own XACK.
 * `node bench/dist/peers/standalone/redis-streams.js [/usr/bin/redis-server]`
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { prefetch, runBoth } from "./shape.js";

const dir = mkdtempSync(join(tmpdir(), "standalone-redis-"));
const port = 20_000 + (process.pid % 20_000);
const server = spawn(process.argv[2] ?? "/usr/bin/redis-server", [
  ...["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir],
  ...["--appendonly", "yes", "--appendfsync", "always"],
]);
process.on("exit", () => server.kill("SIGKILL"));
await sleep(300);
const producer = new Redis({ port });
const reader = new Redis({ port });
const key = "standalone";
let reading = false;
let loop: Promise<void> = Promise.resolve();
let lastAck: Promise<unknown> = Promise.resolve();

await runBoth("Redis Streams", {
  async fresh() {
    await producer.del(key);
    await producer.xgroup("CREATE", key, "group", "0", "MKSTREAM");
  },
  publish: async (body) => void (await producer.xadd(key, "*", "body", body)),
  async consume(onBody) {
    reading = true;
    loop = (async () => {
      while (reading) {
        const answer = (await reader.xreadgroupBuffer(
          "GROUP",
          "group",
          "worker",
          "COUNT",
          prefetch,
          "BLOCK",
          100,
          "STREAMS",
          key,
          ">",
        )) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [id, fields] of answer?.[0]?.[1] ?? []) {
          onBody(fields[1] as Buffer);
          lastAck = reader.xack(key, "group", id);
        }
      }
    })();
  },
  acksDone: async () => void (await lastAck),
  async stopConsuming() {
    reading = false;
    await loop;
  },
});
producer.disconnect();
reader.disconnect();
server.kill("SIGTERM");
rmSync(dir, { recursive: true, force: true });
