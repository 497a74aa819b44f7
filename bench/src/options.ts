/**
 * The command line of `npm run bench -- queue|compare|compare-pg|compare-consumers …`, parsed and
 * checked before anything starts.
 */
import { parseArgs } from "node:util";
import {
  backlogMessagesDefault,
  bodyBytesMax,
  bodyBytesMin,
  fanoutMessagesDefault,
  fifoConsumersDefault,
  fifoConsumersMax,
  fifoGroupsDefault,
  fifoGroupsMax,
  fifoMessagesDefault,
  latencyConsumersMax,
  latencySecondsMax,
  messagesMax,
  natsUrlDefault,
  nodesMax,
  pgUrlDefault,
  rabbitmqUrlDefault,
  ratePerSecondMax,
  redisServerPathDefault,
} from "./limits.js";

export type Durability = "fsync" | "os";
export type Workload = "w1" | "w2" | "w3" | "fanout" | "fifo";
const workloadsAll: readonly Workload[] = ["w1", "w2", "w3", "fanout", "fifo"];
/** Workloads that need what only Hopper has: exchanges, FIFO queues. */
const hopperOnlyWorkloads: readonly Workload[] = ["fanout", "fifo"];
/** What `queue` and `compare-pg` run unless told: the fan-out and FIFO are asked for by name. */
const workloadsDefault = "w1,w2,w3";
/** compare-consumers compares pull and push on W1 and W2 unless told otherwise. */
const compareConsumersWorkloadsDefault = "w1,w2";

/** How Hopper's consumers get messages: long-polled `receive` over HTTP, or pushed over a WebSocket. */
export type ConsumerMode = "pull" | "push";

export type Command = "queue" | "compare" | "compare-pg" | "compare-consumers";
const commands: readonly Command[] = ["queue", "compare", "compare-pg", "compare-consumers"];

/**
 * Which client drives Hopper: its own (@hopper/client: sends and acks of one turn coalesced, batched
 * deliveries) or the frozen plain one (plain-hopper-client.ts: what a client written from the docs does).
 */
export type HopperClientMode = "sdk" | "plain";
const hopperClientModes: readonly HopperClientMode[] = ["sdk", "plain"];

/** One system under test, as configured for one run; a Hopper run without `client` uses the sdk. */
export type RunSpec =
  | { target: "hopper"; store: "sqlite"; consumer: ConsumerMode; client?: HopperClientMode }
  | { target: "hopper"; store: "log"; consumer: ConsumerMode; client?: HopperClientMode }
  | { target: "hopper"; store: "postgres"; nodes: number; consumer: ConsumerMode; client?: HopperClientMode }
  | { target: "skiplocked" }
  | { target: "pgboss" }
  | { target: "rabbitmq"; queueType: "classic" | "quorum" }
  | { target: "nats" }
  | { target: "redis-streams" }
  | { target: "bullmq" };

/** The brokers that are neither Hopper nor a PostgreSQL library, by the names --target(s) take. */
const brokerRuns = {
  "rabbitmq-classic": () => ({ target: "rabbitmq", queueType: "classic" }),
  "rabbitmq-quorum": () => ({ target: "rabbitmq", queueType: "quorum" }),
  nats: () => ({ target: "nats" }),
  "redis-streams": () => ({ target: "redis-streams" }),
  bullmq: () => ({ target: "bullmq" }),
} satisfies Record<string, () => RunSpec>;

/**
 * compare's runs: Hopper on SQLite by pull and by push, Hopper on PostgreSQL (1 node, pull and push), the two
 * PostgreSQL peers and the other brokers, in this order unless --targets names others.
 */
const compareAllRuns = {
  "hopper-sqlite": () => ({ target: "hopper", store: "sqlite", consumer: "pull" }),
  "hopper-sqlite-push": () => ({ target: "hopper", store: "sqlite", consumer: "push" }),
  "hopper-log": () => ({ target: "hopper", store: "log", consumer: "pull" }),
  "hopper-log-push": () => ({ target: "hopper", store: "log", consumer: "push" }),
  "hopper-pg": () => ({ target: "hopper", store: "postgres", nodes: 1, consumer: "pull" }),
  "hopper-pg-push": () => ({ target: "hopper", store: "postgres", nodes: 1, consumer: "push" }),
  skiplocked: () => ({ target: "skiplocked" }),
  pgboss: () => ({ target: "pgboss" }),
  ...brokerRuns,
} satisfies Record<string, () => RunSpec>;

/**
 * compare-pg's runs, by the names `--targets` takes. Hopper consumes by pull (long polls, as the peers
 * poll) and, in the -push runs, over WebSockets, as a Hopper worker would.
 */
const compareRuns = {
  "hopper-sqlite": () => ({ target: "hopper", store: "sqlite", consumer: "pull" }),
  "hopper-pg": () => ({ target: "hopper", store: "postgres", nodes: 1, consumer: "pull" }),
  "hopper-pg-push": () => ({ target: "hopper", store: "postgres", nodes: 1, consumer: "push" }),
  "hopper-pg-cluster": (nodes: number) => ({ target: "hopper", store: "postgres", nodes, consumer: "pull" }),
  "hopper-pg-cluster-push": (nodes: number) => ({
    target: "hopper",
    store: "postgres",
    nodes,
    consumer: "push",
  }),
  skiplocked: () => ({ target: "skiplocked" }),
  pgboss: () => ({ target: "pgboss" }),
} satisfies Record<string, (nodes: number) => RunSpec>;
type CompareRunName = keyof typeof compareRuns;

export interface BenchOptions {
  command: Command;
  /** The runs, one after the other: one for `queue`, several for the comparisons. */
  runs: RunSpec[];
  /** The workloads each run does, in order W1, W2, W3, fan-out, FIFO. */
  workloads: Workload[];
  /** W1: how many messages go through the queue. */
  messages: number;
  /** Fan-out: how many messages are published to the exchange (each reaches every bound queue). */
  fanoutMessages: number;
  /** FIFO: messages per queue, their groups (keys g0…, round-robin), the consumers, and which queues
   * run in which order (both by default: standard first). */
  fifoMessages: number;
  fifoGroups: number;
  fifoConsumers: number;
  fifoQueues: ("standard" | "fifo")[];
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
  /** W2: how many consumers share the queue (1: one consumer; more: many idle workers, as a pool). */
  latencyConsumers: number;
  /** The PostgreSQL database of every PostgreSQL run; each run makes and drops its own schema. */
  pgUrl: string;
  /** The RabbitMQ and NATS servers of the compare runs, and the redis-server binary the bench starts. */
  rabbitmqUrl: string;
  natsUrl: string;
  redisServerPath: string;
  /** Relay PostgreSQL traffic through a counter of round trips and statements (slows the runs). */
  countRoundTrips: boolean;
  /** Relay push consumers' WebSockets through a counter of frames by op (slows the runs). */
  countFrames: boolean;
  /** Where to write the figures as JSON, if anywhere. */
  jsonPath: string | undefined;
  /** Where Hopper's servers write V8 CPU profiles (`node --cpu-prof`), if anywhere. */
  profileDir: string | undefined;
}

export const usage = `usage: npm run bench -- queue [--target hopper|skiplocked|pgboss|${Object.keys(brokerRuns).join("|")}]
                                [--store sqlite|log|postgres] [--nodes 1] [--consumer pull|push]
       npm run bench -- compare [--targets ${Object.keys(compareAllRuns).join(",")}]
                                [--rabbitmq-url ${rabbitmqUrlDefault}] [--nats-url ${natsUrlDefault}]
                                [--redis-server ${redisServerPathDefault}] [--hopper-client sdk|plain|sdk,plain]
       npm run bench -- standalone [--peer rabbitmq-classic,rabbitmq-quorum,nats,redis-streams]
       npm run bench -- compare-pg [--nodes 3] [--targets ${Object.keys(compareRuns).join(",")}]
       npm run bench -- compare-consumers [--consumers pull,push] [--store sqlite|log|postgres] [--nodes 1]
       npm run bench -- inbox …  (inboxes against per-recipient Redis Streams; its own flags, bench/src/inbox.ts)
       npm run bench -- stream …  (streams against Redis Streams and NATS JetStream; its own flags, bench/src/stream.ts)
  all take: [--workloads w1,w2,w3,fanout,fifo] [--messages 50000] [--backlog ${backlogMessagesDefault}]
            [--fanout-messages ${fanoutMessagesDefault}] [--fifo-messages ${fifoMessagesDefault}] [--fifo-groups ${fifoGroupsDefault}]
            [--fifo-consumers ${fifoConsumersDefault}] [--fifo-queues standard,fifo]
            [--body-bytes 1024] [--rate 1000] [--latency-seconds 10] [--latency-consumers 1]
            [--durability fsync|os] [--pg-url ${pgUrlDefault}] [--count-round-trips] [--count-frames]
            [--json out.json] [--profile-dir dir]
  workloads default to ${workloadsDefault} (compare-consumers: ${compareConsumersWorkloadsDefault}); fanout and fifo run only when named`;

/** Parses the command line; throws an Error whose message is fit to print with the usage. */
export function parseBenchOptions(argv: string[]): BenchOptions {
  // Over 80 lines: the table of every flag for parseArgs, then the checks of their values.
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      target: { type: "string" },
      store: { type: "string" },
      nodes: { type: "string" },
      targets: { type: "string" },
      consumer: { type: "string" },
      consumers: { type: "string" },
      workloads: { type: "string" },
      messages: { type: "string", default: "50000" },
      "fanout-messages": { type: "string", default: String(fanoutMessagesDefault) },
      "fifo-messages": { type: "string", default: String(fifoMessagesDefault) },
      "fifo-groups": { type: "string", default: String(fifoGroupsDefault) },
      "fifo-consumers": { type: "string", default: String(fifoConsumersDefault) },
      "fifo-queues": { type: "string", default: "standard,fifo" },
      backlog: { type: "string", default: String(backlogMessagesDefault) },
      "body-bytes": { type: "string", default: "1024" },
      durability: { type: "string", default: "fsync" },
      rate: { type: "string", default: "1000" },
      "latency-seconds": { type: "string", default: "10" },
      "latency-consumers": { type: "string", default: "1" },
      "pg-url": { type: "string", default: pgUrlDefault },
      "rabbitmq-url": { type: "string", default: rabbitmqUrlDefault },
      "nats-url": { type: "string", default: natsUrlDefault },
      "redis-server": { type: "string", default: redisServerPathDefault },
      "count-round-trips": { type: "boolean", default: false },
      "count-frames": { type: "boolean", default: false },
      "hopper-client": { type: "string", default: "sdk" },
      json: { type: "string" },
      "profile-dir": { type: "string" },
    },
  });
  const command = positionals[0] as Command | undefined;
  if (positionals.length !== 1 || command === undefined || !commands.includes(command)) {
    throw new Error(`expected the benchmark name ${commands.join(", ")}; got ${JSON.stringify(positionals)}`);
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
  const consumer = parseConsumer(values.consumer);
  if (command !== "queue" && consumer !== undefined) {
    throw new Error(`--consumer applies to "queue"; ${command} chooses its consumers itself`);
  }
  if (command !== "compare-pg" && command !== "compare" && values.targets !== undefined) {
    throw new Error("--targets applies to compare and compare-pg");
  }
  if (command !== "compare" && values["hopper-client"] !== "sdk") {
    throw new Error("--hopper-client applies to compare");
  }
  if (command !== "compare-consumers" && values.consumers !== undefined) {
    throw new Error("--consumers applies to compare-consumers");
  }
  let runs: RunSpec[];
  if (command === "queue") runs = [queueRun(values.target ?? "hopper", values.store, nodes, consumer)];
  else if (command === "compare-pg") runs = compareRunsFrom(values.targets, nodes ?? 3, values);
  else if (command === "compare")
    runs = withHopperClients(compareAllRunsFrom(values.targets, nodes, values), values["hopper-client"]);
  else runs = compareConsumerRuns(values.target, values.store, nodes, values.consumers ?? "pull,push");
  const workloads = parseWorkloads(
    values.workloads ??
      (command === "compare-consumers" ? compareConsumersWorkloadsDefault : workloadsDefault),
  );
  const hopperOnly = workloads.find((workload) => hopperOnlyWorkloads.includes(workload));
  if (hopperOnly) {
    const peer = runs.find((run) => run.target !== "hopper");
    if (peer) {
      const needs = hopperOnly === "fanout" ? "exchanges" : "FIFO queues";
      throw new Error(
        `the ${hopperOnly} workload needs ${needs}, which the bench drives only on Hopper; leave out ${peer.target} (--targets)`,
      );
    }
  }
  if (values["count-frames"] && !runs.some((run) => run.target === "hopper" && run.consumer === "push")) {
    throw new Error("--count-frames counts push consumers' WebSocket frames; no run here consumes by push");
  }
  return {
    command,
    runs,
    workloads,
    messages: integerFlag("messages", values.messages, 1, messagesMax),
    fanoutMessages: integerFlag("fanout-messages", values["fanout-messages"], 1, messagesMax),
    fifoMessages: integerFlag("fifo-messages", values["fifo-messages"], 1, messagesMax),
    fifoGroups: integerFlag("fifo-groups", values["fifo-groups"], 1, fifoGroupsMax),
    fifoConsumers: integerFlag("fifo-consumers", values["fifo-consumers"], 1, fifoConsumersMax),
    fifoQueues: parseFifoQueues(values["fifo-queues"]),
    backlog: integerFlag("backlog", values.backlog, 1, messagesMax),
    bodyBytes: integerFlag("body-bytes", values["body-bytes"], bodyBytesMin, bodyBytesMax),
    durability,
    ratePerSecond: integerFlag("rate", values.rate, 1, ratePerSecondMax),
    latencySeconds: integerFlag("latency-seconds", values["latency-seconds"], 1, latencySecondsMax),
    latencyConsumers: integerFlag("latency-consumers", values["latency-consumers"], 1, latencyConsumersMax),
    pgUrl: values["pg-url"],
    rabbitmqUrl: values["rabbitmq-url"],
    natsUrl: values["nats-url"],
    redisServerPath: values["redis-server"],
    countRoundTrips: values["count-round-trips"],
    countFrames: values["count-frames"],
    jsonPath: values.json,
    profileDir: values["profile-dir"],
  };
}

function parseConsumer(text: string | undefined): ConsumerMode | undefined {
  if (text === undefined || text === "pull" || text === "push") return text;
  throw new Error(`--consumer is "pull" or "push", not "${text}"`);
}

function hopperRun(store: string | undefined, nodes: number | undefined, consumer: ConsumerMode): RunSpec {
  if (store === undefined || store === "sqlite") {
    if (nodes !== undefined && nodes !== 1) {
      throw new Error("--nodes above 1 needs --store postgres: SQLite nodes cannot share one file");
    }
    return { target: "hopper", store: "sqlite", consumer };
  }
  if (store === "postgres") return { target: "hopper", store, nodes: nodes ?? 1, consumer };
  if (store === "log") {
    if (nodes !== undefined && nodes !== 1) throw new Error("--nodes above 1 needs --store postgres");
    return { target: "hopper", store, consumer };
  }
  throw new Error(`--store is "sqlite", "log" or "postgres", not "${store}"`);
}

function queueRun(
  target: string,
  store: string | undefined,
  nodes: number | undefined,
  consumer: ConsumerMode | undefined,
): RunSpec {
  if (target === "hopper") return hopperRun(store, nodes, consumer ?? "pull");
  if (consumer !== undefined) {
    throw new Error(`--consumer chooses Hopper's consumer; ${target} is consumed its own way`);
  }
  if (target === "skiplocked" || target === "pgboss") {
    if (store !== undefined && store !== "postgres")
      throw new Error(`--target ${target} runs on PostgreSQL only`);
    if (nodes !== undefined && nodes !== 1) {
      throw new Error(`--nodes applies to Hopper: ${target} is a library in the bench's one process`);
    }
    return { target };
  }
  if (target in brokerRuns) {
    if (store !== undefined || nodes !== undefined) {
      throw new Error(`--store and --nodes apply to Hopper and the PostgreSQL peers, not ${target}`);
    }
    return brokerRuns[target as keyof typeof brokerRuns]() as RunSpec;
  }
  throw new Error(
    `--target is "hopper", "skiplocked", "pgboss" or one of ${Object.keys(brokerRuns).join(", ")}; not "${target}"`,
  );
}

/** compare's runs by the names --targets takes, in the order given; all of them by default. */
function compareAllRunsFrom(
  targets: string | undefined,
  nodes: number | undefined,
  values: { target?: string | undefined; store?: string | undefined },
): RunSpec[] {
  if (values.target !== undefined || values.store !== undefined || nodes !== undefined) {
    throw new Error("compare chooses its targets, stores and nodes itself; use --targets to run a subset");
  }
  const names =
    targets === undefined ? Object.keys(compareAllRuns) : targets.split(",").map((name) => name.trim());
  if (new Set(names).size !== names.length) throw new Error(`--targets names a target twice: "${targets}"`);
  return names.map((name) => {
    if (!(name in compareAllRuns)) {
      throw new Error(`--targets takes ${Object.keys(compareAllRuns).join(", ")}; not "${name}"`);
    }
    return compareAllRuns[name as keyof typeof compareAllRuns]() as RunSpec;
  });
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

/**
 * Hopper with the pull consumer, then the same with the push consumer, so the ratio comes from one
 * invocation. `--consumers push,pull` swaps the order (load on a shared machine drifts), and one name
 * runs one of them.
 */
function compareConsumerRuns(
  target: string | undefined,
  store: string | undefined,
  nodes: number | undefined,
  consumers: string,
): RunSpec[] {
  if (target !== undefined && target !== "hopper") {
    throw new Error("compare-consumers runs Hopper: only Hopper has a push consumer");
  }
  const modes = consumers.split(",").map((name) => name.trim());
  if (modes.length === 0 || modes.length > 2 || new Set(modes).size !== modes.length) {
    throw new Error(`--consumers takes pull,push in either order, or one of them; not "${consumers}"`);
  }
  return modes.map((mode) => {
    if (mode !== "pull" && mode !== "push") throw new Error(`--consumers takes pull and push; not "${mode}"`);
    return hopperRun(store, nodes, mode);
  });
}

/**
 * Each Hopper run once per client named, in the order named. The plain client consumes by push only
 * (its consumer is a WebSocket), so a pull run goes with the sdk alone, and naming only plain for a
 * pull run is refused.
 */
function withHopperClients(runs: RunSpec[], text: string): RunSpec[] {
  const clients = text.split(",").map((name) => name.trim());
  if (clients.length === 0 || new Set(clients).size !== clients.length) {
    throw new Error(`--hopper-client takes sdk, plain or both; not "${text}"`);
  }
  for (const client of clients) {
    if (!hopperClientModes.includes(client as HopperClientMode)) {
      throw new Error(`--hopper-client takes ${hopperClientModes.join(", ")}; not "${client}"`);
    }
  }
  return runs.flatMap((run): RunSpec[] => {
    if (run.target !== "hopper") return [run];
    const usable = clients.filter((client) => client === "sdk" || run.consumer === "push");
    if (usable.length === 0) {
      throw new Error(`the plain client consumes by push: name the -push Hopper targets, or add sdk`);
    }
    return usable.map((client) => (client === "sdk" ? run : { ...run, client: "plain" }));
  });
}

/** `standard,fifo` (the default), `fifo,standard` (load drifts, so the order can be swapped), or one. */
function parseFifoQueues(text: string): ("standard" | "fifo")[] {
  const kinds = text.split(",").map((name) => name.trim());
  if (kinds.length === 0 || kinds.length > 2 || new Set(kinds).size !== kinds.length) {
    throw new Error(`--fifo-queues takes standard,fifo in either order, or one of them; not "${text}"`);
  }
  return kinds.map((kind) => {
    if (kind !== "standard" && kind !== "fifo") {
      throw new Error(`--fifo-queues takes standard and fifo; not "${kind}"`);
    }
    return kind;
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
