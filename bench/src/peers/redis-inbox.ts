/**
 * What a user would build instead of Hopper's inboxes: one Redis Stream per recipient
 * (`inbox:<recipient>`) on a private redis-server that fsyncs its append-only file on every write
 * (redis-server.ts, `appendfsync always`), through ioredis.
 *
 * - Append: a pipeline of one `XADD inbox:<r> MAXLEN ~ 10000 * id <id> body <json>` per recipient (the
 *   trim bounds a log as Hopper's default `maxDepth` does), sent on one connection of a pool (one per
 *   append in flight, as Hopper's appends each have an HTTP connection: Redis reads at most 16 KiB of a
 *   connection per event-loop pass, so one shared connection would cap the entries per fsync).
 * - A device's cursor is the last stream id it read, kept by the device (Redis has no per-device state).
 * - Replay: a new connection, then `XREAD COUNT 1000 STREAMS inbox:<r> <cursor>` until a read comes
 *   back short.
 * - Live: each device holds a connection of its own blocked in `XREAD COUNT 100 BLOCK 0 STREAMS
 *   inbox:<r> <cursor>` (a blocked read holds its connection), and reads again from the last id.
 * - Idle devices: one connection per `perConnection` devices, blocked in one `XREAD BLOCK 0` over all
 *   their streams (a gateway's idiom; one connection per device would be the phone's).
 */
import { Redis } from "ioredis";
import type { IdleDevices, InboxTarget, OnDeviceEntry, ReplayTiming } from "../inbox-target.js";
import { forEachLimited } from "../inbox-target.js";
import { packageVersion } from "../package-version.js";
import { startPrivateRedis } from "./redis-server.js";

const keyPrefix = "inbox:";
const replayPage = 1000;
const liveReadCount = 100;
const maxLength = 10_000;

type StreamReply = [string, [string, string[]][]][] | null;

export async function startRedisInboxTarget(params: {
  serverPath: string;
  /** Connections appends are spread over (one per append in flight). */
  appendConnections: number;
}): Promise<InboxTarget> {
  // Over 80 lines: the Redis target's workloads share its server and connections in this closure.
  const server = await startPrivateRedis(params.serverPath);
  const open = new Set<Redis>();
  const connect = async (): Promise<Redis> => {
    const redis = new Redis({
      host: server.host,
      port: server.port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    redis.on("error", () => {});
    open.add(redis);
    await redis.connect();
    return redis;
  };
  const close = async () => {
    for (const redis of open) redis.disconnect();
    open.clear();
    await server.stop();
  };
  let pool: Redis[];
  let version: string;
  try {
    pool = await Promise.all(Array.from({ length: params.appendConnections }, connect));
    const info = await (pool[0] as Redis).info("server");
    version = /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown";
  } catch (error) {
    await close();
    throw error;
  }
  let nextConnection = 0;
  const idle: Redis[] = [];
  return {
    label: "Redis Streams per recipient",
    versions: `Redis ${version} · ioredis ${packageVersion("ioredis")}`,
    semantics:
      "append = a pipeline of XADD (MAXLEN ~ 10000) per recipient, answered after the AOF fsync (appendfsync always); read = XREAD from the device's last id",
    pid: server.pid,
    async append(id, recipients, bodyJson) {
      const redis = pool[nextConnection++ % pool.length] as Redis;
      const pipeline = redis.pipeline();
      for (const recipient of recipients) {
        pipeline.xadd(keyPrefix + recipient, "MAXLEN", "~", maxLength, "*", "id", id, "body", bodyJson);
      }
      const results = (await pipeline.exec()) ?? [];
      for (const [error] of results) if (error) throw error;
      if (results.length !== recipients.length) throw new Error("a pipeline lost commands");
    },
    async prepareDevice() {
      // The device's cursor lives on the device: nothing to register.
    },
    async replay(recipient, _device, expected): Promise<ReplayTiming> {
      const startedAt = performance.now();
      const redis = await connect();
      const requestedAt = performance.now();
      let cursor = "0";
      let entries = 0;
      try {
        for (;;) {
          const reply = (await redis.xread(
            "COUNT",
            replayPage,
            "STREAMS",
            keyPrefix + recipient,
            cursor,
          )) as StreamReply;
          const read = reply?.[0]?.[1] ?? [];
          for (const [entryId, fields] of read) {
            JSON.parse(fields[3] as string);
            cursor = entryId;
            entries++;
          }
          if (read.length < replayPage) break;
        }
      } finally {
        redis.disconnect();
        open.delete(redis);
      }
      const doneAt = performance.now();
      if (entries !== expected) throw new Error(`replay read ${entries} entries, expected ${expected}`);
      return { connectToLiveMs: doneAt - startedAt, requestToLiveMs: doneAt - requestedAt, entries };
    },
    async subscribeDevices(recipients, onEntry: OnDeviceEntry) {
      let stopped = false;
      const devices = await Promise.all(recipients.map(() => connect()));
      // The cursor of each device: "$" would miss what is appended between two reads, so start at the tail.
      const loops = recipients.map(async (recipient, index) => {
        const redis = devices[index] as Redis;
        const key = keyPrefix + recipient;
        const last = (await redis.xrevrange(key, "+", "-", "COUNT", 1)) as [string, string[]][];
        let cursor = last[0]?.[0] ?? "0";
        return async () => {
          while (!stopped) {
            let reply: StreamReply;
            try {
              reply = (await redis.xread(
                "COUNT",
                liveReadCount,
                "BLOCK",
                0,
                "STREAMS",
                key,
                cursor,
              )) as StreamReply;
            } catch (error) {
              if (stopped) return;
              throw error;
            }
            const receivedAt = performance.now();
            for (const [entryId, fields] of reply?.[0]?.[1] ?? []) {
              cursor = entryId;
              onEntry(recipient, JSON.parse(fields[3] as string), receivedAt);
            }
          }
        };
      });
      const runs = (await Promise.all(loops)).map((run) => run());
      return async () => {
        stopped = true;
        for (const redis of devices) {
          redis.disconnect();
          open.delete(redis);
        }
        await Promise.allSettled(runs);
      };
    },
    async openIdleDevices(recipients, perConnection): Promise<IdleDevices> {
      const groups: string[][] = [];
      for (let i = 0; i < recipients.length; i += perConnection) {
        groups.push(recipients.slice(i, i + perConnection));
      }
      const blocked: Promise<unknown>[] = [];
      await forEachLimited(groups, 20, async (group) => {
        const redis = await connect();
        idle.push(redis);
        const keys = group.map((recipient) => keyPrefix + recipient);
        blocked.push(
          redis.xread("BLOCK", 0, "STREAMS", ...keys, ...keys.map(() => "$")).catch(() => undefined),
        );
      });
      // Every connection is blocked once the server counts it so.
      const control = pool[0] as Redis;
      const deadline = performance.now() + 30_000;
      for (;;) {
        const info = await control.info("clients");
        const count = Number(/blocked_clients:(\d+)/.exec(info)?.[1] ?? 0);
        if (count >= groups.length) break;
        if (performance.now() > deadline) throw new Error(`only ${count} of ${groups.length} reads blocked`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return {
        connections: groups.length,
        async close() {
          for (const redis of idle.splice(0)) {
            redis.disconnect();
            open.delete(redis);
          }
          await Promise.allSettled(blocked);
        },
      };
    },
    close,
  };
}
