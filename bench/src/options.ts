/** The command line of `npm run bench -- queue|compare-pg …`, parsed and checked before anything starts. */
import { parseArgs } from "node:util";
import {
  backlogMessagesDefault,
  bodyBytesMax,
  bodyBytesMin,
  latencySecondsMax,
  messagesMax,
  nodesMax,
  pgUrlDefault,
  ratePerSecondMax,
} from "./limits.js";

export type Durability = "fsync" | "os";
export type Workload = "w1" | "w2" | "w3";
const workloadsAll: readonly Workload[] = ["w1", "w2", "w3"];

/** One system under test, as configured for one run. */
export type RunSpec =
  | { target: "hopper"; store: "sqlite" }
  | { target: "hopper"; store: "postgres"; nodes: number }
  | { target: "skiplocked" }
  | { target: "pgboss" };

/** compare-pg's runs, by the names `--targets` takes. */
const compareRuns = {
  "hopper-sqlite": () => ({ target: "hopper", store: "sqlite" }),
  "hopper-pg": () => ({ target: "hopper", store: "postgres", nodes: 1 }),
  "hopper-pg-cluster": (nodes: number) => ({ target: "hopper", store: "postgres", nodes }),
  skiplocked: () => ({ target: "skiplocked" }),
  pgboss: () => ({ target: "pgboss" }),
} satisfies Record<string, (nodes: number) => RunSpec>;
type CompareRunName = keyof typeof compareRuns;

export interface BenchOptions {
  command: "queue" | "compare-pg";
  /** The runs, one after the other: one for `queue`, several for `compare-pg`. */
  runs: RunSpec[];
  /** The workloads each run does, in order W1, W2, W3. */
  workloads: Workload[];
  /** W1: how many messages go through the queue. */
  messages: number;
  /** W3: how many messages are enqueued before the drain starts. */
  backlog: number;
  /** The size of each message body as stored: the serialized JSON, in bytes. */
  bodyBytes: number;
  /** Hopper on SQLite only; PostgreSQL commits as the server is configured (synchronous_commit on). */
  durability: Durability;
  /** W2: the fixed publish rate. */
  ratePerSecond: number;
  /** W2: how long the fixed-rate schedule runs. */
  latencySeconds: number;
  /** The PostgreSQL database of every PostgreSQL run; each run makes and drops its own schema. */
  pgUrl: string;
  /** Relay PostgreSQL traffic through a counter of round trips and statements (slows the runs). */
  countRoundTrips: boolean;
  /** Where to write the figures as JSON, if anywhere. */
  jsonPath: string | undefined;
  /** Where Hopper's servers write V8 CPU profiles (`node --cpu-prof`), if anywhere. */
  profileDir: string | undefined;
}

export const usage = `usage: npm run bench -- queue [--target hopper|skiplocked|pgboss] [--store sqlite|postgres] [--nodes 1]
       npm run bench -- compare-pg [--nodes 3] [--targets ${Object.keys(compareRuns).join(",")}]
  both take: [--workloads w1,w2,w3] [--messages 50000] [--backlog ${backlogMessagesDefault}] [--body-bytes 1024]
             [--rate 1000] [--latency-seconds 10] [--durability fsync|os] [--pg-url ${pgUrlDefault}]
             [--count-round-trips] [--json out.json] [--profile-dir dir]`;

/** Parses the command line; throws an Error whose message is fit to print with the usage. */
export function parseBenchOptions(argv: string[]): BenchOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      target: { type: "string" },
      store: { type: "string" },
      nodes: { type: "string" },
      targets: { type: "string" },
      workloads: { type: "string", default: workloadsAll.join(",") },
      messages: { type: "string", default: "50000" },
      backlog: { type: "string", default: String(backlogMessagesDefault) },
      "body-bytes": { type: "string", default: "1024" },
      durability: { type: "string", default: "fsync" },
      rate: { type: "string", default: "1000" },
      "latency-seconds": { type: "string", default: "10" },
      "pg-url": { type: "string", default: pgUrlDefault },
      "count-round-trips": { type: "boolean", default: false },
      json: { type: "string" },
      "profile-dir": { type: "string" },
    },
  });
  const command = positionals[0];
  if (positionals.length !== 1 || (command !== "queue" && command !== "compare-pg")) {
    throw new Error(
      `expected the benchmark name "queue" or "compare-pg", got ${JSON.stringify(positionals)}`,
    );
  }
  const durability = values.durability;
  if (durability !== "fsync" && durability !== "os") {
    throw new Error(`--durability is "fsync" or "os", not "${durability}"`);
  }
  if (!/^postgres(ql)?:\/\//.test(values["pg-url"])) {
    throw new Error(`--pg-url takes a postgres:// URL, not "${values["pg-url"]}"`);
  }
  const nodesText = values.nodes;
  const nodes = nodesText === undefined ? undefined : integerFlag("nodes", nodesText, 1, nodesMax);
  const runs =
    command === "queue"
      ? [queueRun(values.target ?? "hopper", values.store, nodes)]
      : compareRunsFrom(values.targets, nodes ?? 3, values);
  return {
    command,
    runs,
    workloads: parseWorkloads(values.workloads),
    messages: integerFlag("messages", values.messages, 1, messagesMax),
    backlog: integerFlag("backlog", values.backlog, 1, messagesMax),
    bodyBytes: integerFlag("body-bytes", values["body-bytes"], bodyBytesMin, bodyBytesMax),
    durability,
    ratePerSecond: integerFlag("rate", values.rate, 1, ratePerSecondMax),
    latencySeconds: integerFlag("latency-seconds", values["latency-seconds"], 1, latencySecondsMax),
    pgUrl: values["pg-url"],
    countRoundTrips: values["count-round-trips"],
    jsonPath: values.json,
    profileDir: values["profile-dir"],
  };
}

function queueRun(target: string, store: string | undefined, nodes: number | undefined): RunSpec {
  if (target === "hopper") {
    if (store === undefined || store === "sqlite") {
      if (nodes !== undefined && nodes !== 1) {
        throw new Error("--nodes above 1 needs --store postgres: SQLite nodes cannot share one file");
      }
      return { target, store: "sqlite" };
    }
    if (store === "postgres") return { target, store, nodes: nodes ?? 1 };
    throw new Error(`--store is "sqlite" or "postgres", not "${store}"`);
  }
  if (target === "skiplocked" || target === "pgboss") {
    if (store !== undefined && store !== "postgres")
      throw new Error(`--target ${target} runs on PostgreSQL only`);
    if (nodes !== undefined && nodes !== 1) {
      throw new Error(`--nodes applies to Hopper: ${target} is a library in the bench's one process`);
    }
    return { target };
  }
  throw new Error(`--target is "hopper", "skiplocked" or "pgboss", not "${target}"`);
}

function compareRunsFrom(
  targets: string | undefined,
  clusterNodes: number,
  values: { target?: string | undefined; store?: string | undefined },
): RunSpec[] {
  if (values.target !== undefined || values.store !== undefined) {
    throw new Error("compare-pg chooses its targets and stores itself; use --targets to run a subset");
  }
  if (clusterNodes < 2) throw new Error("compare-pg's --nodes is the cluster's size: at least 2");
  const names =
    targets === undefined ? Object.keys(compareRuns) : targets.split(",").map((name) => name.trim());
  return names.map((name) => {
    if (!(name in compareRuns)) {
      throw new Error(`--targets takes ${Object.keys(compareRuns).join(", ")}; not "${name}"`);
    }
    return compareRuns[name as CompareRunName](clusterNodes) as RunSpec;
  });
}

function parseWorkloads(text: string): Workload[] {
  const named = new Set(text.split(",").map((name) => name.trim().toLowerCase()));
  for (const name of named) {
    if (!workloadsAll.includes(name as Workload)) {
      throw new Error(`--workloads takes a list of ${workloadsAll.join(", ")}; not "${name}"`);
    }
  }
  return workloadsAll.filter((workload) => named.has(workload));
}

function integerFlag(name: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`--${name} must be an integer from ${min} to ${max}, not "${text}"`);
  }
  return value;
}
