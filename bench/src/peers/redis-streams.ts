/**
 * Redis Streams as a benchmark target, through ioredis, on a private redis-server that fsyncs its
 * append-only file on every write (redis-server.ts), so a reply means the write is on disk. One stream
 * per workload (`hopper-bench:<queue>`) with one consumer group. Publish is XADD, written at once on
 * a connection shared with the acks (ioredis's default; its auto-pipelining would hold every command
 * issued while one pipeline's replies are outstanding until they all came back, a wait of one fsync
 * that W2's p50 and p99 showed).
 * Each consumer reads with XREADGROUP … COUNT min(256, free credit) BLOCK 1 s on a connection of its own
 * (a blocked read holds its connection), and acks each entry with an XACK of its own (as
 * bench/peers/standalone/redis-streams.ts does). XACK removes an entry from the group's pending list;
 * the stream keeps it, as Redis does unless told to trim.
 *
 * What it does not do: reclaim the pending entries of a consumer that died (XAUTOCLAIM); reads with
 * `>` get only new entries, so every delivery here is a first delivery.
 */
import { Redis } from "ioredis";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { receiveWaitMs, redisReadCountMax } from "../limits.js";
import { packageVersion } from "../package-version.js";
import type { Delivery, QueueConnection, QueueTarget } from "../target.js";
import { type PrivateRedisServer, startPrivateRedis } from "./redis-server.js";

const keyPrefix = "hopper-bench:";
const groupName = "bench";

export async function startRedisStreamsTarget(params: { serverPath: string }): Promise<QueueTarget> {
  const server = await startPrivateRedis(params.serverPath);
  const readers = new Set<Redis>();
  const commands = new Redis({
    host: server.host,
    port: server.port,
    lazyConnect: true,
  });
  let failure: unknown;
  commands.on("error", (error: unknown) => {
    failure ??= error;
  });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      for (const reader of readers) reader.disconnect();
      commands.disconnect();
      await server.stop();
    })();
    return closing;
  };
  let version: string;
  try {
    await commands.connect();
    version = await redisVersion(commands);
  } catch (error) {
    await close();
    throw error;
  }
  const throwIfFailed = () => {
    if (failure !== undefined) throw failure;
  };
  return {
    label: "Redis Streams",
    kind: "redis-streams",
    versions: `Redis ${version} · ioredis ${packageVersion("ioredis")}`,
    semantics:
      "confirm = XADD reply with appendfsync always (after the AOF fsync); ack = XACK reply, the same",
    confirmsAfterFsync: true,
    receiveMessagesMax: redisReadCountMax,
    brokerPids: [server.pid],
    postgresAppName: undefined,
    async createQueue(queue) {
      const key = keyPrefix + queue;
      await commands.del(key);
      await commands.xgroup("CREATE", key, groupName, "0", "MKSTREAM");
    },
    connect: (queue, index) =>
      new RedisStreamConnection(
        commands,
        server,
        keyPrefix + queue,
        `consumer-${index}`,
        readers,
        throwIfFailed,
      ),
    counters: () => ({}),
    close,
  };
}

/** The server's own version, from INFO. */
export async function redisVersion(redis: Redis): Promise<string> {
  return /redis_version:(\S+)/.exec(await redis.info("server"))?.[1] ?? "unknown";
}

class RedisStreamConnection implements QueueConnection {
  private reader: Redis | undefined;

  constructor(
    private readonly commands: Redis,
    private readonly server: PrivateRedisServer,
    private readonly key: string,
    private readonly consumerName: string,
    private readonly readers: Set<Redis>,
    private readonly throwIfFailed: () => void,
  ) {}

  async publish(body: BenchBody): Promise<void> {
    this.throwIfFailed();
    await this.commands.xadd(this.key, "*", "body", JSON.stringify(body));
  }

  /** One XREADGROUP that blocks up to the receive wait. Stopping closes the reader's connection. */
  async receive(max: number, signal: AbortSignal): Promise<Delivery[]> {
    this.throwIfFailed();
    if (signal.aborted) return [];
    const reader = this.openReader();
    const onAbort = () => {
      reader.disconnect();
      this.readers.delete(reader);
      this.reader = undefined;
    };
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const answer = (await reader.xreadgroup(
        "GROUP",
        groupName,
        this.consumerName,
        "COUNT",
        max,
        "BLOCK",
        receiveWaitMs,
        "STREAMS",
        this.key,
        ">",
      )) as [key: string, entries: [id: string, fields: string[]][]][] | null;
      const entries = answer?.[0]?.[1] ?? [];
      return entries.map(([id, fields]) => ({ body: bodyOf(fields), deliveryCount: 1, receipt: id }));
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  async ackLater(receipt: string): Promise<boolean> {
    // XACK answers how many of the ids were pending: 0 means the entry was not (acked already).
    return (await this.commands.xack(this.key, groupName, receipt)) === 1;
  }

  private openReader(): Redis {
    if (this.reader === undefined) {
      const reader = new Redis({ host: this.server.host, port: this.server.port });
      reader.on("error", () => {
        // A failed read rejects its command, which fails the consumer; the event adds nothing.
      });
      this.readers.add(reader);
      this.reader = reader;
    }
    return this.reader;
  }
}

function bodyOf(fields: string[]): BenchBody {
  const index = fields.indexOf("body");
  if (index < 0 || index % 2 !== 0)
    throw new Error(`a stream entry without a body field: ${fields.join(" ")}`);
  return readBenchBody(JSON.parse(fields[index + 1] as string));
}
