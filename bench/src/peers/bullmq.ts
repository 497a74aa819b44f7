/**
 * BullMQ as a benchmark target, on a private redis-server that fsyncs its append-only file on every
 * write (redis-server.ts). One Queue per workload (prefix `hopper-bench`). Publish is `addBulk`: the
 * publishes of one event-loop turn share one call, up to the producer's window of 1,000, and each
 * resolves when the call does (one MULTI of BullMQ's add scripts, answered after the fsync). Consumers
 * are Workers with a concurrency of the workload's credit; the processor records the job and returns,
 * and the job's completion (moveToCompleted, answered after the fsync) is the ack, counted on the
 * Worker's `completed` event. Jobs are removed on completion, as an ack removes a message elsewhere.
 */
import { type ConnectionOptions, Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { TurnBatcher } from "../batcher.js";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { producerUnconfirmedMax } from "../limits.js";
import { packageVersion } from "../package-version.js";
import type { Delivery, OnMessage, QueueConnection, QueueTarget } from "../target.js";
import { startPrivateRedis } from "./redis-server.js";
import { redisVersion } from "./redis-streams.js";
import { notPulled, SubscriptionConsumer } from "./subscription-consumer.js";

const prefix = "hopper-bench";
const jobName = "bench";

export async function startBullMqTarget(params: { serverPath: string }): Promise<QueueTarget> {
  const server = await startPrivateRedis(params.serverPath);
  const connection: ConnectionOptions = { host: server.host, port: server.port };
  const queues = new Map<string, Queue>();
  const consumers = new Set<SubscriptionConsumer>();
  let version: string;
  try {
    const probe = new Redis({ host: server.host, port: server.port, lazyConnect: true });
    try {
      await probe.connect();
      version = await redisVersion(probe);
    } finally {
      probe.disconnect();
    }
  } catch (error) {
    await server.stop();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    label: "BullMQ",
    kind: "bullmq",
    versions: `Redis ${version} · BullMQ ${packageVersion("bullmq")} (ioredis ${packageVersion("ioredis")})`,
    semantics:
      "confirm = addBulk answered with appendfsync always (after the AOF fsync); " +
      "ack = the job's completion (moveToCompleted) answered, the same",
    confirmsAfterFsync: true,
    brokerPids: [server.pid],
    postgresAppName: undefined,
    async createQueue(name) {
      if (queues.has(name))
        throw new Error(`queue ${name} already existed; every workload needs a fresh one`);
      const queue = new Queue(name, { connection, prefix });
      queues.set(name, queue);
      await queue.waitUntilReady();
    },
    connect(name) {
      const queue = queues.get(name);
      if (!queue) throw new Error(`queue ${name} was not created`);
      return new BullMqPublisher(queue);
    },
    consumePush(name, _index, credit, onMessage) {
      const consumer = startWorker(connection, name, credit, onMessage);
      consumers.add(consumer);
      return consumer;
    },
    counters: () => ({}),
    close() {
      closing ??= (async () => {
        await Promise.allSettled([...consumers].map((consumer) => consumer.stop()));
        await Promise.allSettled([...queues.values()].map((queue) => queue.close()));
        await server.stop();
      })();
      return closing;
    },
  };
}

class BullMqPublisher implements QueueConnection {
  private readonly adds: TurnBatcher<BenchBody, undefined>;

  constructor(queue: Queue) {
    this.adds = new TurnBatcher(async (bodies) => {
      const jobs = await queue.addBulk(
        bodies.map((data) => ({ name: jobName, data, opts: { removeOnComplete: true } })),
      );
      if (jobs.length !== bodies.length)
        throw new Error(`addBulk added ${jobs.length} of ${bodies.length} jobs`);
      return bodies.map(() => undefined);
    }, producerUnconfirmedMax);
  }

  publish(body: BenchBody): Promise<void> {
    return this.adds.add(body);
  }

  receive(): Promise<Delivery[]> {
    return notPulled("BullMQ is consumed by a Worker");
  }

  ackLater(): Promise<boolean> {
    return notPulled("BullMQ is consumed by a Worker");
  }
}

/** A Worker whose processor records the job; its completion is the ack. */
function startWorker(
  connection: ConnectionOptions,
  name: string,
  credit: number,
  onMessage: OnMessage,
): SubscriptionConsumer {
  return new SubscriptionConsumer(name, onMessage, async (consumer) => {
    const worker = new Worker(
      name,
      async (job) => {
        consumer.deliver({
          body: readBenchBody(job.data),
          // attemptsStarted counts every time the job was moved to active: 1 on the first delivery.
          deliveryCount: job.attemptsStarted,
          receipt: job.id ?? "",
        });
      },
      { connection, prefix, concurrency: credit },
    );
    worker.on("completed", () => consumer.acksConfirmed(1));
    worker.on("failed", (_job, error) => consumer.fail(error));
    worker.on("error", (error) => consumer.fail(error));
    await worker.waitUntilReady();
    return {
      async stop() {
        await worker.close();
      },
    };
  });
}
