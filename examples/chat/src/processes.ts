/**
 * Starts the application's processes: Hopper itself (`hopper serve`, the CLI a user runs, from
 * @hopper/server's package) and each role of role.ts. The launcher (main.ts) and the tests use the
 * same calls, so a test runs the processes a user runs. A child is killed when this process exits.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** A role or Hopper starts in well under a second; this leaves room on a loaded 2-core machine. */
const startTimeoutMs = 20_000;
/** A graceful stop drains connections; a kill -9 is reaped at once. */
const exitTimeoutMs = 10_000;
/** Output kept for failure messages. */
const outputCharsMax = 32 * 1024;

const hopperCli = join(
  dirname(fileURLToPath(import.meta.resolve("@hopper/server"))),
  "..",
  "bin",
  "hopper.js",
);
const roleEntry = fileURLToPath(new URL("./role.js", import.meta.url));

const children = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

export interface RunningProcess {
  readonly name: string;
  /** The URL it printed when ready (Hopper, the API, a stand-in), or "". */
  readonly url: string;
  readonly pid: number;
  output(): string;
  /** Resolves with the first line of stdout that matches, waiting for it. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

function spawnProcess(name: string, args: string[], env: NodeJS.ProcessEnv, readyPattern: RegExp) {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let output = "";
  const waiters = new Set<() => void>();
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-outputCharsMax);
    for (const wake of waiters) wake();
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => {
    children.delete(child);
    for (const wake of waiters) wake();
  });
  const waitFor = (pattern: RegExp, timeoutMs = startTimeoutMs) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const timer = setTimeout(
        () => finish(new Error(`${name}: no ${pattern} within ${timeoutMs} ms:\n${output}`)),
        timeoutMs,
      );
      const check = () => {
        const match = pattern.exec(output);
        if (match) finish(undefined, match);
        else if (child.exitCode !== null || child.signalCode !== null)
          finish(new Error(`${name} exited:\n${output}`));
      };
      const finish = (error?: Error, match?: RegExpMatchArray) => {
        clearTimeout(timer);
        waiters.delete(check);
        if (match) resolve(match);
        else reject(error);
      };
      waiters.add(check);
      check();
    });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), exitTimeoutMs);
    await exited;
    clearTimeout(timer);
  };
  return waitFor(readyPattern).then(
    (match): RunningProcess => ({
      name,
      url: match[1] ?? "",
      pid: child.pid ?? 0,
      output: () => output,
      waitFor,
      stop: () => end("SIGTERM"),
      kill9: () => end("SIGKILL"),
    }),
  );
}

export interface HopperProcessOptions {
  dataFile: string;
  apiKey: string;
  jwtSecret: string;
  port?: number;
}

/** `hopper serve` on an embedded SQLite file, with an API key for services and device tokens. */
export function startHopper(options: HopperProcessOptions): Promise<RunningProcess> {
  const args = [hopperCli, "serve", "--data", options.dataFile, "--port", String(options.port ?? 0)];
  args.push("--api-key", options.apiKey, "--jwt-secret", options.jwtSecret);
  return spawnProcess("hopper", args, {}, /^Hopper listening on (http:\/\/\S+)$/m);
}

/** One role of role.ts with the given environment (config.ts names the variables). */
export function startRole(role: string, env: NodeJS.ProcessEnv): Promise<RunningProcess> {
  return spawnProcess(role, [roleEntry, role], env, new RegExp(`^ready ${role}(?: (\\S+))?$`, "m"));
}
