/**
 * `npm run bench -- inbox`: Hopper's inboxes (docs/inboxes.md) against what a user would build
 * instead, one Redis Stream per recipient (peers/redis-inbox.ts), in one invocation. Per target, on a
 * fresh server:
 *
 * 1. idle devices: the server's RSS (/proc/<pid>/status) before and after `--idle-devices` devices
 *    subscribe, `--subs-per-connection` on each connection, and sit idle;
 * 2. fan-out: `--fanout-appends` messages, each appended to the same `--fanout-recipients` recipients,
 *    with at most `--in-flight` appends unanswered; entries/s = appends × recipients ÷ (first append →
 *    last answer);
 * 3. replay: `--replay-entries` entries appended to one recipient whose device was seen at cursor 0,
 *    then the device reconnects `--replay-rounds` times from cursor 0; ms from opening the connection
 *    until it is caught up (Hopper's `inbox.live`);
 * 4. latency: `--rate` appends/s for `--latency-seconds`, each to one of `--latency-devices` recipients
 *    in turn, each with one live device; latency runs from the append's intended time (open loop) to the
 *    entry reaching the device's handler.
 *
 * Bodies are the bench's JSON padded to `--body-bytes`.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { benchBody, readBenchBody } from "./bench-message.js";
import { processCpuSeconds } from "./cpu.js";
import { startHopperInboxTarget } from "./inbox-hopper.js";
import type { InboxTarget } from "./inbox-target.js";
import { residentBytes } from "./inbox-target.js";
import { redisServerPathDefault } from "./limits.js";
import { startRedisInboxTarget } from "./peers/redis-inbox.js";
import { type Percentiles, percentiles } from "./statistics.js";

const targetNames = ["hopper-sqlite", "hopper-log", "redis-streams-inbox"] as const;
type TargetName = (typeof targetNames)[number];
const phasesAll = ["memory", "fanout", "replay", "latency"] as const;
type Phase = (typeof phasesAll)[number];

/** How long the server is left to settle before its RSS is read. */
const settleMs = 2000;
/** A phase that makes no progress this long fails. */
const stallMs = 30_000;

interface InboxBenchOptions {
  targets: TargetName[];
  phases: Phase[];
  bodyBytes: number;
  fanoutAppends: number;
  fanoutRecipients: number;
  inFlight: number;
  replayEntries: number;
  replayRounds: number;
  rate: number;
  latencySeconds: number;
  latencyDevices: number;
  idleDevices: number;
  subsPerConnection: number;
  redisServer: string;
  json: string | undefined;
  profileDir: string | undefined;
  devices: "client" | "raw";
}

export const inboxUsage = `usage: npm run bench -- inbox [--targets ${targetNames.join(",")}] [--phases ${phasesAll.join(",")}]
         [--body-bytes 1024] [--fanout-appends 4000] [--fanout-recipients 50] [--in-flight 100]
         [--replay-entries 10000] [--replay-rounds 5] [--rate 1000] [--latency-seconds 10]
         [--latency-devices 50] [--idle-devices 10000] [--subs-per-connection 50]
         [--redis-server ${redisServerPathDefault}] [--json out.json] [--profile-dir dir]
         [--devices client|raw]`;

function parseInboxOptions(argv: string[]): InboxBenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      targets: { type: "string", default: targetNames.join(",") },
      phases: { type: "string", default: phasesAll.join(",") },
      "body-bytes": { type: "string", default: "1024" },
      "fanout-appends": { type: "string", default: "4000" },
      "fanout-recipients": { type: "string", default: "50" },
      "in-flight": { type: "string", default: "100" },
      "replay-entries": { type: "string", default: "10000" },
      "replay-rounds": { type: "string", default: "5" },
      rate: { type: "string", default: "1000" },
      "latency-seconds": { type: "string", default: "10" },
      "latency-devices": { type: "string", default: "50" },
      "idle-devices": { type: "string", default: "10000" },
      "subs-per-connection": { type: "string", default: "50" },
      "redis-server": { type: "string", default: redisServerPathDefault },
      json: { type: "string" },
      "profile-dir": { type: "string" },
      devices: { type: "string", default: "client" },
    },
  });
  const list = <T extends string>(flag: string, text: string, allowed: readonly T[]): T[] => {
    const names = text.split(",").map((name) => name.trim());
    for (const name of names) {
      if (!allowed.includes(name as T))
        throw new Error(`--${flag} takes ${allowed.join(", ")}; not "${name}"`);
    }
    return names as T[];
  };
  const int = (flag: keyof typeof values, min: number, max: number): number => {
    const value = Number(values[flag]);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Error(`--${flag} must be an integer from ${min} to ${max}, not "${values[flag]}"`);
    }
    return value;
  };
  return {
    targets: list("targets", values.targets, targetNames),
    phases: phasesAll.filter((phase) => list("phases", values.phases, phasesAll).includes(phase)),
    bodyBytes: int("body-bytes", 64, 1024 * 1024),
    fanoutAppends: int("fanout-appends", 1, 1_000_000),
    fanoutRecipients: int("fanout-recipients", 1, 5000),
    inFlight: int("in-flight", 1, 1000),
    // Hopper's default maxDepth keeps 10,000 entries a recipient: more would be trimmed before the replay.
    replayEntries: int("replay-entries", 1, 10_000),
    replayRounds: int("replay-rounds", 1, 100),
    rate: int("rate", 1, 100_000),
    latencySeconds: int("latency-seconds", 1, 3600),
    latencyDevices: int("latency-devices", 1, 1000),
    idleDevices: int("idle-devices", 0, 100_000),
    // A Hopper connection holds at most 64 inbox subscriptions.
    subsPerConnection: int("subs-per-connection", 1, 64),
    redisServer: values["redis-server"],
    json: values.json,
    profileDir: values["profile-dir"],
    devices: list("devices", values.devices, ["client", "raw"] as const)[0] as "client" | "raw",
  };
}

interface MemoryResult {
  devices: number;
  connections: number;
  idleRssBytes: number;
  withDevicesRssBytes: number;
  openMs: number;
}
interface FanoutResult {
  appends: number;
  recipients: number;
  entriesPerSecond: number;
  appendsPerSecond: number;
  elapsedMs: number;
  serverCpuUsPerEntry: number | undefined;
  /** Hopper: the store's group commits over the fan-out, and the store calls they carried. */
  commits?: number;
  commitJobs?: number;
}
interface ReplayResult {
  entries: number;
  rounds: { connectToLiveMs: number; requestToLiveMs: number }[];
  connectToLiveMedianMs: number;
  requestToLiveMedianMs: number;
}
interface LatencyResult {
  appends: number;
  devices: number;
  endToEndMs: Percentiles;
  afterFirstSecondMs: Percentiles;
  /** Intended time → the append answered (durable). */
  appendMs: Percentiles;
  scheduleLagMsMax: number;
  serverCpuUsPerAppend: number | undefined;
  benchCpuUsPerAppend: number;
}
interface TargetReport {
  name: TargetName;
  label?: string;
  versions?: string;
  semantics?: string;
  memory?: MemoryResult;
  fanout?: FanoutResult;
  replay?: ReplayResult;
  latency?: LatencyResult;
  error?: string;
}

function log(message: string): void {
  console.error(`[bench inbox] ${new Date().toISOString().slice(11, 19)} ${message}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

function cpuMeter(pid: number): () => number | undefined {
  const start = processCpuSeconds(pid);
  return () => {
    const end = processCpuSeconds(pid);
    return start === undefined || end === undefined ? undefined : end - start;
  };
}

async function startTarget(name: TargetName, options: InboxBenchOptions): Promise<InboxTarget> {
  if (name === "redis-streams-inbox") {
    return startRedisInboxTarget({ serverPath: options.redisServer, appendConnections: options.inFlight });
  }
  return startHopperInboxTarget({
    store: name === "hopper-sqlite" ? "sqlite" : "log",
    profileDir: options.profileDir,
    appendConnections: options.inFlight,
    devices: options.devices,
  });
}

async function runMemory(target: InboxTarget, options: InboxBenchOptions): Promise<MemoryResult> {
  await sleep(settleMs);
  const idleRssBytes = await residentBytes(target.pid);
  const recipients = Array.from({ length: options.idleDevices }, (_, i) => `idle${i}`);
  const startedAt = performance.now();
  const idle = await target.openIdleDevices(recipients, options.subsPerConnection);
  const openMs = performance.now() - startedAt;
  await sleep(settleMs);
  const withDevicesRssBytes = await residentBytes(target.pid);
  await idle.close();
  return {
    devices: recipients.length,
    connections: idle.connections,
    idleRssBytes,
    withDevicesRssBytes,
    openMs,
  };
}

/** Appends `count` messages, at most `inFlight` unanswered; resolves with the elapsed ms. */
async function appendAll(
  target: InboxTarget,
  count: number,
  inFlight: number,
  message: (index: number) => { id: string; recipients: readonly string[]; bodyJson: string },
): Promise<number> {
  let next = 0;
  let lastProgressAt = performance.now();
  const startedAt = performance.now();
  const watchdog = setInterval(() => {
    if (performance.now() - lastProgressAt > stallMs) {
      console.error(`[bench inbox] no append answered for ${stallMs} ms`);
      process.exit(1);
    }
  }, 1000);
  try {
    const worker = async () => {
      while (next < count) {
        const { id, recipients, bodyJson } = message(next++);
        await target.append(id, recipients, bodyJson);
        lastProgressAt = performance.now();
      }
    };
    await Promise.all(Array.from({ length: Math.min(inFlight, count) }, worker));
  } finally {
    clearInterval(watchdog);
  }
  return performance.now() - startedAt;
}

async function runFanout(target: InboxTarget, options: InboxBenchOptions): Promise<FanoutResult> {
  const recipients = Array.from({ length: options.fanoutRecipients }, (_, i) => `member${i}`);
  const bodyJson = JSON.stringify(benchBody(0, 0, options.bodyBytes));
  // A short warm-up on other recipients, so that the figure is not the first compile of the path.
  const warm = Array.from({ length: options.fanoutRecipients }, (_, i) => `warm${i}`);
  await appendAll(target, 200, options.inFlight, (i) => ({ id: `w-${i}`, recipients: warm, bodyJson }));
  const commitsBefore = await target.storeCommits?.();
  const cpu = cpuMeter(target.pid);
  const elapsedMs = await appendAll(target, options.fanoutAppends, options.inFlight, (i) => ({
    id: `f-${i}`,
    recipients,
    bodyJson,
  }));
  const entries = options.fanoutAppends * options.fanoutRecipients;
  const cpuSeconds = cpu();
  const commitsAfter = await target.storeCommits?.();
  return {
    ...(commitsBefore &&
      commitsAfter && {
        commits: commitsAfter.commits - commitsBefore.commits,
        commitJobs: commitsAfter.jobs - commitsBefore.jobs,
      }),
    appends: options.fanoutAppends,
    recipients: options.fanoutRecipients,
    entriesPerSecond: entries / (elapsedMs / 1000),
    appendsPerSecond: options.fanoutAppends / (elapsedMs / 1000),
    elapsedMs,
    serverCpuUsPerEntry: cpuSeconds === undefined ? undefined : (cpuSeconds * 1e6) / entries,
  };
}

async function runReplay(target: InboxTarget, options: InboxBenchOptions): Promise<ReplayResult> {
  const recipient = "replay0";
  await target.prepareDevice(recipient, "phone");
  await appendAll(target, options.replayEntries, options.inFlight, (i) => ({
    id: `r-${i}`,
    recipients: [recipient],
    bodyJson: JSON.stringify(benchBody(i, 0, options.bodyBytes)),
  }));
  const rounds: ReplayResult["rounds"] = [];
  for (let round = 0; round < options.replayRounds; round++) {
    const timing = await target.replay(recipient, "phone", options.replayEntries);
    rounds.push({ connectToLiveMs: timing.connectToLiveMs, requestToLiveMs: timing.requestToLiveMs });
  }
  return {
    entries: options.replayEntries,
    rounds,
    connectToLiveMedianMs: median(rounds.map((round) => round.connectToLiveMs)),
    requestToLiveMedianMs: median(rounds.map((round) => round.requestToLiveMs)),
  };
}

async function runLatency(target: InboxTarget, options: InboxBenchOptions): Promise<LatencyResult> {
  // Over 80 lines: the latency workload's devices, pacing and figures share one measurement window.
  const recipients = Array.from({ length: options.latencyDevices }, (_, i) => `device${i}`);
  const appends = options.rate * options.latencySeconds;
  const received = new Uint8Array(appends);
  const samples: number[] = [];
  const afterFirstSecond: number[] = [];
  let count = 0;
  let duplicates = 0;
  let failure: unknown;
  let scheduleStart = 0;
  let allReceived: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allReceived = resolve;
  });
  const stop = await target.subscribeDevices(recipients, (recipient, body, receivedAtMs) => {
    const { seq, intendedAtMs } = readBenchBody(body);
    if (recipient !== recipients[seq % recipients.length]) {
      failure ??= new Error(`entry ${seq} reached ${recipient}`);
    }
    if (received[seq]) {
      duplicates++;
      return;
    }
    received[seq] = 1;
    const latency = receivedAtMs - intendedAtMs;
    samples.push(latency);
    if (intendedAtMs - scheduleStart >= 1000) afterFirstSecond.push(latency);
    if (++count === appends) allReceived();
  });
  const cpu = cpuMeter(target.pid);
  const benchCpu = process.cpuUsage();
  const appendSamples: number[] = [];
  const intervalMs = 1000 / options.rate;
  scheduleStart = performance.now() + 20;
  let issued = 0;
  let scheduleLagMsMax = 0;
  const pending = new Set<Promise<void>>();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (issued < appends && scheduleStart + issued * intervalMs <= now) {
        const seq = issued++;
        const intendedAtMs = scheduleStart + seq * intervalMs;
        scheduleLagMsMax = Math.max(scheduleLagMsMax, now - intendedAtMs);
        const append = target
          .append(
            `l-${seq}`,
            [recipients[seq % recipients.length] as string],
            JSON.stringify(benchBody(seq, intendedAtMs, options.bodyBytes)),
          )
          .then(() => {
            appendSamples.push(performance.now() - intendedAtMs);
          })
          .catch((error: unknown) => {
            failure ??= error;
          });
        pending.add(append);
        void append.finally(() => pending.delete(append));
      }
      if (issued < appends) setTimeout(tick, Math.max(0, scheduleStart + issued * intervalMs - now));
      else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  const timeout = sleep(stallMs).then(() => "timeout" as const);
  const outcome = await Promise.race([done.then(() => "done" as const), timeout]);
  const cpuSeconds = cpu();
  const benchCpuUsed = process.cpuUsage(benchCpu);
  await stop();
  if (failure) throw failure;
  if (outcome === "timeout") throw new Error(`only ${count} of ${appends} entries reached their devices`);
  if (duplicates > 0) log(`${duplicates} duplicate deliveries`);
  return {
    appends,
    devices: recipients.length,
    endToEndMs: percentiles(samples),
    afterFirstSecondMs: percentiles(afterFirstSecond),
    appendMs: percentiles(appendSamples),
    scheduleLagMsMax,
    serverCpuUsPerAppend: cpuSeconds === undefined ? undefined : (cpuSeconds * 1e6) / appends,
    benchCpuUsPerAppend: (benchCpuUsed.user + benchCpuUsed.system) / appends,
  };
}

async function runTarget(name: TargetName, options: InboxBenchOptions): Promise<TargetReport> {
  const report: TargetReport = { name };
  let target: InboxTarget | undefined;
  try {
    log(`${name}: starting`);
    target = await startTarget(name, options);
    Object.assign(report, { label: target.label, versions: target.versions, semantics: target.semantics });
    for (const phase of options.phases) {
      log(`${name}: ${phase}`);
      if (phase === "memory" && options.idleDevices > 0) report.memory = await runMemory(target, options);
      if (phase === "fanout") report.fanout = await runFanout(target, options);
      if (phase === "replay") report.replay = await runReplay(target, options);
      if (phase === "latency") report.latency = await runLatency(target, options);
    }
  } catch (error) {
    report.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
    log(`${name}: FAILED ${report.error}`);
  } finally {
    await target?.close();
  }
  return report;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const int = (value: number) => Math.round(value).toLocaleString("en-US");
const ms = (value: number) => (value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2));

function table(reports: TargetReport[], options: InboxBenchOptions): string {
  const cells = (figure: (report: TargetReport) => string | undefined) =>
    reports.map((report) => (report.error ? "failed" : (figure(report) ?? "–")));
  const rows: [string, string[]][] = [
    [
      `Fan-out: 1 message → ${options.fanoutRecipients} recipients, ${options.inFlight} appends in flight, entries/s`,
      cells((r) => r.fanout && int(r.fanout.entriesPerSecond)),
    ],
    ["Fan-out, appends/s", cells((r) => r.fanout && int(r.fanout.appendsPerSecond))],
    [
      "Fan-out, store commits/s · appends per commit",
      cells((r) =>
        r.fanout?.commits !== undefined && r.fanout.commitJobs !== undefined
          ? `${int(r.fanout.commits / (r.fanout.elapsedMs / 1000))} · ${(r.fanout.commitJobs / r.fanout.commits).toFixed(1)}`
          : undefined,
      ),
    ],
    ["Fan-out, server CPU per entry, µs", cells((r) => r.fanout?.serverCpuUsPerEntry?.toFixed(1))],
    [
      `Replay of ${int(options.replayEntries)} on reconnect, ms to live: median (min–max) of ${options.replayRounds}`,
      cells(
        (r) =>
          r.replay &&
          `${ms(r.replay.connectToLiveMedianMs)} (${ms(Math.min(...r.replay.rounds.map((x) => x.connectToLiveMs)))}–${ms(Math.max(...r.replay.rounds.map((x) => x.connectToLiveMs)))})`,
      ),
    ],
    [
      "Replay, subscribe sent → live, median ms",
      cells((r) => r.replay && ms(r.replay.requestToLiveMedianMs)),
    ],
    [
      `Append → device at ${int(options.rate)}/s, ${options.latencyDevices} devices: p50 · p99 · max, ms`,
      cells(
        (r) =>
          r.latency &&
          `${ms(r.latency.endToEndMs.p50)} · ${ms(r.latency.endToEndMs.p99)} · ${ms(r.latency.endToEndMs.max)}`,
      ),
    ],
    [
      "Append → device after the first second: p50 · p99, ms",
      cells(
        (r) =>
          r.latency && `${ms(r.latency.afterFirstSecondMs.p50)} · ${ms(r.latency.afterFirstSecondMs.p99)}`,
      ),
    ],
    [
      "Append answered (durable): p50 · p99, ms",
      cells((r) => r.latency && `${ms(r.latency.appendMs.p50)} · ${ms(r.latency.appendMs.p99)}`),
    ],
    [
      "Latency run, CPU per append, µs: server · bench",
      cells(
        (r) =>
          r.latency &&
          `${r.latency.serverCpuUsPerAppend?.toFixed(0) ?? "?"} · ${r.latency.benchCpuUsPerAppend.toFixed(0)}`,
      ),
    ],
    [
      `${int(options.idleDevices)} idle devices: RSS idle → with devices, MiB (connections)`,
      cells(
        (r) =>
          r.memory &&
          `${mib(r.memory.idleRssBytes)} → ${mib(r.memory.withDevicesRssBytes)} (${r.memory.connections})`,
      ),
    ],
    [
      "Idle devices: RSS over the idle server, MiB",
      cells((r) => r.memory && mib(r.memory.withDevicesRssBytes - r.memory.idleRssBytes)),
    ],
  ];
  const header = `| Figure | ${reports.map((r) => r.label ?? r.name).join(" | ")} |`;
  const rule = `|---|${reports.map(() => "---").join("|")}|`;
  return [header, rule, ...rows.map(([name, values]) => `| ${name} | ${values.join(" | ")} |`)].join("\n");
}

function targetsStatus(reports: TargetReport[]): string[] {
  const byName = new Map(reports.map((report) => [report.name, report]));
  const sqlite = byName.get("hopper-sqlite");
  const logStore = byName.get("hopper-log");
  const redis = byName.get("redis-streams-inbox");
  const lines: string[] = [];
  const status = (met: boolean) => (met ? "met" : "NOT met");
  if (sqlite?.fanout && redis?.fanout) {
    const ratio = sqlite.fanout.entriesPerSecond / redis.fanout.entriesPerSecond;
    lines.push(`- fan-out on SQLite ≥ 1.0× Redis: ${status(ratio >= 1)} (${ratio.toFixed(2)}×)`);
  }
  if (logStore?.fanout) {
    const rate = logStore.fanout.entriesPerSecond;
    lines.push(
      `- fan-out on the log store ≥ 100,000 entries/s: ${status(rate >= 100_000)} (${int(rate)}${redis?.fanout ? `, ${(rate / redis.fanout.entriesPerSecond).toFixed(2)}× Redis` : ""})`,
    );
  }
  for (const report of [sqlite, logStore]) {
    if (report?.replay) {
      const value = report.replay.connectToLiveMedianMs;
      lines.push(`- ${report.label}: replay ≤ 100 ms: ${status(value <= 100)} (median ${ms(value)} ms)`);
    }
    if (report?.memory) {
      const value = (report.memory.withDevicesRssBytes - report.memory.idleRssBytes) / 1024 / 1024;
      lines.push(
        `- ${report.label}: idle devices ≤ 200 MiB: ${status(value <= 200)} (${value.toFixed(1)} MiB)`,
      );
    }
  }
  return lines;
}

export async function runInboxBench(argv: string[]): Promise<number> {
  let options: InboxBenchOptions;
  try {
    options = parseInboxOptions(argv);
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${inboxUsage}`);
    return 2;
  }
  const startedAt = new Date().toISOString();
  const loadAverage = loadavg();
  const reports: TargetReport[] = [];
  for (const name of options.targets) reports.push(await runTarget(name, options));
  console.log(
    `\ninbox bench, ${startedAt}, load average ${loadAverage.map((x) => x.toFixed(2)).join(", ")}, ${options.bodyBytes}-byte bodies\n`,
  );
  console.log(table(reports, options));
  console.log("");
  for (const line of targetsStatus(reports)) console.log(line);
  for (const report of reports) {
    if (report.semantics) console.log(`- ${report.label} (${report.versions}): ${report.semantics}`);
  }
  if (options.json !== undefined) {
    writeFileSync(
      options.json,
      `${JSON.stringify({ benchmark: "inbox", startedAt, loadAverage, options, reports }, null, 2)}\n`,
    );
    log(`wrote ${options.json}`);
  }
  return reports.every((report) => report.error === undefined) ? 0 : 1;
}
