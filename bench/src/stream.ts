/**
 * `npm run bench -- stream`: Hopper's streams beside Redis Streams (a private redis-server with
 * `appendfsync always`) and NATS JetStream (which confirms before fsync: shown, not a target), on one
 * machine, one target after the other. Phases, with 1 KiB records over `--partitions` partitions:
 *   append  `--producers` producers append `--records` records in batches of 100, each batch one
 *           confirmed call (records/s);
 *   read    every partition read from its first record to its end in pages of 1,000 (records/s);
 *   group   a group of one member per partition consumes every record, committing (acking) each
 *           batch of 100 (records/s);
 * and the server's resident memory (VmHWM, for a target this bench starts) after them.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { redisServerPathDefault } from "./limits.js";
import {
  hopperStreamTarget,
  natsStreamTarget,
  redisStreamTarget,
  type StreamTarget,
} from "./stream-targets.js";

const recordBytes = 1024;
const batchRecords = 100;

const usage = `usage: npm run bench -- stream [--records 100000] [--partitions 4] [--producers 4]
         [--targets hopper-log,hopper-sqlite,redis,nats] [--redis-server ${redisServerPathDefault}]
         [--nats-url nats://127.0.0.1:4222] [--json out.json]`;

interface PhaseFigures {
  target: string;
  appendPerSecond: number;
  readPerSecond: number;
  groupPerSecond: number;
  peakResidentMiB: number | null;
  error?: string;
}

function log(message: string): void {
  console.error(`[bench] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

function peakResidentMiB(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const kib = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
    return Number.isFinite(kib) ? Math.round(kib / 1024) : null;
  } catch {
    return null;
  }
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function runTarget(
  target: StreamTarget,
  options: { records: number; partitions: number; producers: number },
): Promise<PhaseFigures> {
  const { records, partitions, producers } = options;
  await target.prepare(partitions);
  const body = "x".repeat(recordBytes);
  const bodies = Array.from({ length: batchRecords }, () => body);
  const batches = Math.ceil(records / batchRecords);
  let nextBatch = 0;
  const producer = async () => {
    for (let batch = nextBatch++; batch < batches; batch = nextBatch++)
      await target.append(batch % partitions, bodies);
  };
  log(`${target.name}: append ${batches * batchRecords} records`);
  const appendSeconds = await timed(() => Promise.all(Array.from({ length: producers }, producer)));
  log(`${target.name}: read every partition from its start`);
  let read = 0;
  const readSeconds = await timed(async () => {
    for (let partition = 0; partition < partitions; partition++) read += await target.readAll(partition);
  });
  if (read !== batches * batchRecords) throw new Error(`read ${read} of ${batches * batchRecords} records`);
  log(`${target.name}: a group of ${partitions} members consumes them`);
  const perPartition = Array.from(
    { length: partitions },
    (_, partition) =>
      Math.floor(batches / partitions) * batchRecords + (partition < batches % partitions ? batchRecords : 0),
  );
  const groupSeconds = await timed(() =>
    Promise.all(perPartition.map((count, partition) => target.consumeGroup(partition, partition, count))),
  );
  const total = batches * batchRecords;
  return {
    target: target.name,
    appendPerSecond: Math.round(total / appendSeconds),
    readPerSecond: Math.round(total / readSeconds),
    groupPerSecond: Math.round(total / groupSeconds),
    peakResidentMiB: peakResidentMiB(target.pid),
  };
}

export async function runStreamBench(argv: string[]): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args: argv,
      options: {
        records: { type: "string", default: "100000" },
        partitions: { type: "string", default: "4" },
        producers: { type: "string", default: "4" },
        targets: { type: "string", default: "hopper-log,hopper-sqlite,redis,nats" },
        "redis-server": { type: "string", default: redisServerPathDefault },
        "nats-url": { type: "string", default: "nats://127.0.0.1:4222" },
        json: { type: "string" },
      },
    }).values as Record<string, string | undefined>;
  } catch (error) {
    console.error(`${(error as Error).message}\n${usage}`);
    return 2;
  }
  const options = {
    records: Number(values.records),
    partitions: Number(values.partitions),
    producers: Number(values.producers),
  };
  if (
    ![options.records, options.partitions, options.producers].every((n) => Number.isSafeInteger(n) && n > 0)
  ) {
    console.error(usage);
    return 2;
  }
  const starts: Record<string, () => Promise<StreamTarget>> = {
    "hopper-log": () => hopperStreamTarget("log"),
    "hopper-sqlite": () => hopperStreamTarget("sqlite"),
    redis: () => redisStreamTarget(values["redis-server"] as string),
    nats: () => natsStreamTarget(values["nats-url"] as string),
  };
  const figures: PhaseFigures[] = [];
  for (const name of (values.targets ?? "").split(",")) {
    const start = starts[name.trim()];
    if (!start) {
      console.error(`unknown target ${name}\n${usage}`);
      return 2;
    }
    let target: StreamTarget | undefined;
    try {
      target = await start();
      figures.push(await runTarget(target, options));
    } catch (error) {
      log(`${name}: FAILED ${(error as Error).message}`);
      figures.push({
        target: name,
        appendPerSecond: 0,
        readPerSecond: 0,
        groupPerSecond: 0,
        peakResidentMiB: null,
        error: String(error),
      });
    } finally {
      await target?.close().catch(() => {});
    }
  }
  const lines = [
    `${options.records} records of ${recordBytes} B, ${options.partitions} partitions, ${options.producers} producers, batches of ${batchRecords}; ${cpus().length} cores, load ${loadavg()[0]?.toFixed(2)}`,
    "",
    "| target | append (records/s) | read from 0 (records/s) | group of members (records/s) | peak RSS (MiB) |",
    "|---|---:|---:|---:|---:|",
    ...figures.map(
      (f) =>
        `| ${f.target}${f.error ? " (failed)" : ""} | ${f.appendPerSecond} | ${f.readPerSecond} | ${f.groupPerSecond} | ${f.peakResidentMiB ?? "-"} |`,
    ),
  ];
  console.log(`\n${lines.join("\n")}`);
  if (values.json !== undefined)
    writeFileSync(values.json, `${JSON.stringify({ options, figures }, null, 2)}\n`);
  return figures.every((f) => f.error === undefined) ? 0 : 1;
}
