/**
 * The targets of `npm run bench -- stream` (stream.ts): Hopper's streams (a server process on the log
 * store or SQLite, through @hopper/client), Redis Streams (a private redis-server with
 * `appendfsync always`: one stream key per partition, XADD pipelined, XRANGE, XREADGROUP/XACK) and NATS
 * JetStream (file storage, one subject per partition; it confirms before fsync, so it is shown, not a
 * target). Each gives the same three calls the phases time.
 */
import { HopperClient } from "@hopper/client";
import { Redis } from "ioredis";
import { AckPolicy, connect, DeliverPolicy, StorageType } from "nats";
import { startPrivateRedis } from "./peers/redis-server.js";
import { startBenchServer } from "./server-process.js";

export interface StreamTarget {
  readonly name: string;
  /** Creates the stream of `partitions` partitions, empty. */
  prepare(partitions: number): Promise<void>;
  /** Appends `bodies` to `partition` in one call (a batch), resolving once they are confirmed. */
  append(partition: number, bodies: readonly string[]): Promise<void>;
  /** Reads `partition` from its start to its end, in pages; answers the records read. */
  readAll(partition: number): Promise<number>;
  /** Member `member` of a group of one member per partition: consumes `partition` to `count` records,
   * committing (acking) each batch. */
  consumeGroup(member: number, partition: number, count: number): Promise<void>;
  /** The server process, for its resident memory; undefined for a peer reached over the network. */
  readonly pid: number | undefined;
  close(): Promise<void>;
}

const streamName = "bench";
const pageMax = 1000;
const groupBatch = 100;

export async function hopperStreamTarget(kind: "log" | "sqlite"): Promise<StreamTarget> {
  const server = await startBenchServer({ store: { kind, durability: "fsync" } });
  const client = new HopperClient({ url: server.url });
  return {
    name: `Hopper (${kind})`,
    async prepare(partitions) {
      await client.streams.put(streamName, { partitions, retentionMs: null });
    },
    async append(partition, bodies) {
      const results = await client.streams.append(
        streamName,
        bodies.map((body) => ({ partition, bodyBase64: Buffer.from(body).toString("base64") })),
      );
      if (results.some((result) => "error" in result)) throw new Error("an append was refused");
    },
    async readAll(partition) {
      let from = 0;
      let read = 0;
      for (;;) {
        const page = await client.streams.read(streamName, partition, { from, limit: pageMax });
        if (page.records.length === 0) return read;
        read += page.records.length;
        from = page.next;
      }
    },
    async consumeGroup(member, _partition, count) {
      let consumed = 0;
      while (consumed < count) {
        const fetched = await client.streams.fetch(streamName, "g", {
          member: `m${member}`,
          max: groupBatch,
          waitMs: 1000,
        });
        if (fetched.records.length === 0) continue;
        consumed += fetched.records.length;
        const next = new Map<number, number>();
        for (const record of fetched.records) next.set(record.partition, record.offset + 1);
        await client.streams.commit(streamName, "g", {
          member: `m${member}`,
          generation: fetched.generation,
          offsets: [...next].map(([partition, offset]) => ({ partition, offset })),
        });
      }
    },
    pid: server.pid,
    async close() {
      await client.close();
      await server.stop();
    },
  };
}

export async function redisStreamTarget(serverPath: string): Promise<StreamTarget> {
  const server = await startPrivateRedis(serverPath);
  const redis = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true });
  const members: Redis[] = [];
  const key = (partition: number) => `${streamName}:${partition}`;
  return {
    name: "Redis Streams (appendfsync always)",
    async prepare(partitions) {
      for (let partition = 0; partition < partitions; partition++) {
        await redis.del(key(partition));
        await redis.xgroup("CREATE", key(partition), "g", "0", "MKSTREAM");
      }
    },
    async append(partition, bodies) {
      const pipeline = redis.pipeline();
      for (const body of bodies) pipeline.xadd(key(partition), "*", "b", body);
      const results = await pipeline.exec();
      if (results?.some(([error]) => error)) throw new Error("an XADD failed");
    },
    async readAll(partition) {
      let start = "-";
      let read = 0;
      for (;;) {
        const page = (await redis.xrange(key(partition), start, "+", "COUNT", pageMax)) as [
          string,
          string[],
        ][];
        if (page.length === 0) return read;
        read += page.length;
        start = `(${(page.at(-1) as [string, string[]])[0]}`;
      }
    },
    async consumeGroup(member, partition, count) {
      const connection = new Redis({ host: server.host, port: server.port });
      members.push(connection);
      let consumed = 0;
      while (consumed < count) {
        const answer = (await connection.xreadgroup(
          "GROUP",
          "g",
          `m${member}`,
          "COUNT",
          groupBatch,
          "BLOCK",
          1000,
          "STREAMS",
          key(partition),
          ">",
        )) as [string, [string, string[]][]][] | null;
        const entries = answer?.[0]?.[1] ?? [];
        if (entries.length === 0) continue;
        consumed += entries.length;
        await connection.xack(key(partition), "g", ...entries.map(([id]) => id));
      }
    },
    pid: server.pid,
    async close() {
      for (const connection of members) connection.disconnect();
      redis.disconnect();
      await server.stop();
    },
  };
}

export async function natsStreamTarget(url: string): Promise<StreamTarget> {
  const connection = await connect({ servers: url, name: "hopper-bench-stream" });
  const jsm = await connection.jetstreamManager();
  const js = connection.jetstream();
  const subject = (partition: number) => `hopper-bench-stream.${partition}`;
  const name = "hopper-bench-stream";
  const encoder = new TextEncoder();
  return {
    name: "NATS JetStream (confirms before fsync)",
    async prepare(partitions) {
      await jsm.streams.delete(name).catch(() => {});
      await jsm.streams.add({ name, subjects: [`${name}.*`], storage: StorageType.File });
      for (let partition = 0; partition < partitions; partition++)
        await jsm.consumers.add(name, {
          durable_name: `g${partition}`,
          ack_policy: AckPolicy.Explicit,
          filter_subject: subject(partition),
          max_ack_pending: 10_000,
        });
    },
    async append(partition, bodies) {
      await Promise.all(bodies.map((body) => js.publish(subject(partition), encoder.encode(body))));
    },
    async readAll(partition) {
      // A consumer of its own per read, acking nothing, from the first message of the subject.
      await jsm.consumers.add(name, {
        durable_name: `read${partition}`,
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.All,
        filter_subject: subject(partition),
      });
      const consumer = await js.consumers.get(name, `read${partition}`);
      const pending = (await consumer.info()).num_pending;
      let read = 0;
      while (read < pending) {
        // Asking for no more than is left: a fetch waits for its count or its expiry.
        const batch = await consumer.fetch({
          max_messages: Math.min(pageMax, pending - read),
          expires: 1000,
        });
        for await (const _message of batch) read++;
      }
      return read;
    },
    async consumeGroup(_member, partition, count) {
      const consumer = await js.consumers.get(name, `g${partition}`);
      let consumed = 0;
      while (consumed < count) {
        const batch = await consumer.fetch({
          max_messages: Math.min(groupBatch, count - consumed),
          expires: 1000,
        });
        const acks: Promise<boolean>[] = [];
        for await (const message of batch) {
          acks.push(message.ackAck());
          consumed++;
        }
        await Promise.all(acks);
      }
    },
    pid: undefined,
    async close() {
      await jsm.streams.delete(name).catch(() => {});
      await connection.close();
    },
  };
}
