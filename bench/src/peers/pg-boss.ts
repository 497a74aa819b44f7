/**
 * pg-boss 10 as a benchmark target, used through its documented calls: `send` per message (one INSERT
 * each, committed before it answers), `fetch` with a batch size, `complete` with the ids of one turn
 * (up to 100, as Hopper's client batches acks). pg-boss has no long poll for `fetch`, so consumers
 * poll like the plain SKIP LOCKED peer. Its own schema, created by `start()` and dropped after.
 * Maintenance and scheduling run as pg-boss's defaults have them.
 */
import PgBoss from "pg-boss";
import { TurnBatcher } from "../batcher.js";
import { type BenchBody, readBenchBody } from "../bench-message.js";
import { batchItemsMax, pgPoolSize } from "../limits.js";
import { packageVersion } from "../package-version.js";
import { benchSchemaName, dropSchema, postgresVersion } from "../postgres.js";
import type { Delivery, QueueConnection, QueueTarget } from "../target.js";
import { pollUntilAny } from "./polling.js";

export async function startPgBossTarget(params: { url: string; connectUrl: string }): Promise<QueueTarget> {
  const schema = benchSchemaName("pgboss", params.url);
  const boss = new PgBoss({
    connectionString: params.connectUrl,
    schema,
    max: pgPoolSize,
    application_name: schema,
  });
  let failure: unknown;
  // pg-boss reports background errors (maintenance, a dropped connection) as events.
  boss.on("error", (error) => {
    failure ??= error;
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await boss.stop({ graceful: false, wait: true, close: true });
    await dropSchema(params.url, schema);
  };
  let version: string;
  try {
    await boss.start();
    version = await postgresVersion(params.url);
  } catch (error) {
    await close();
    throw error;
  }
  const throwIfFailed = () => {
    if (failure !== undefined) throw failure;
  };
  return {
    label: "pg-boss 10.4.2",
    kind: "pgboss",
    versions: `PostgreSQL ${version} · pg-boss ${packageVersion("pg-boss")}`,
    semantics:
      "confirm = send()'s INSERT committed (synchronous_commit on); ack = complete() committed, the same",
    confirmsAfterFsync: true,
    brokerPids: [],
    postgresAppName: schema,
    async createQueue(queue) {
      await boss.createQueue(queue);
    },
    connect: (queue) => new PgBossConnection(boss, queue, throwIfFailed),
    counters: () => ({}),
    close,
  };
}

class PgBossConnection implements QueueConnection {
  private readonly completes: TurnBatcher<string, boolean>;

  constructor(
    private readonly boss: PgBoss,
    private readonly queue: string,
    private readonly throwIfFailed: () => void,
  ) {
    this.completes = new TurnBatcher(async (ids) => {
      // The typings say void; the call answers how many jobs it completed.
      const answer = (await boss.complete(queue, ids)) as unknown as { affected: number };
      if (answer.affected !== ids.length) {
        throw new Error(`pg-boss completed ${answer.affected} of ${ids.length} jobs: some were not active`);
      }
      return ids.map(() => true);
    }, batchItemsMax);
  }

  async publish(body: BenchBody): Promise<void> {
    this.throwIfFailed();
    const id = await this.boss.send(this.queue, body);
    if (id === null) throw new Error("pg-boss did not create the job");
  }

  receive(max: number, signal: AbortSignal): Promise<Delivery[]> {
    return pollUntilAny(async () => {
      this.throwIfFailed();
      const jobs = await this.boss.fetch<BenchBody>(this.queue, { batchSize: max });
      return jobs.map((job) => ({
        body: readBenchBody(job.data),
        deliveryCount: undefined,
        receipt: job.id,
      }));
    }, signal);
  }

  ackLater(receipt: string): Promise<boolean> {
    return this.completes.add(receipt);
  }
}
