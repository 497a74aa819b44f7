/**
 * Runs the real `hopper serve` as a child process for end-to-end tests: the compiled CLI, a real port
 * and a real SQLite file or PostgreSQL schema, so a test sees exactly what a user's process would,
 * including what survives `kill -9`. Every child is killed when the test process exits, so a failed test
 * never leaves a broker running.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Durability } from "../store/store.js";

/** The compiled CLI, found beside this compiled file (dist/testing → dist/cli), whatever the cwd. */
const mainPath = fileURLToPath(new URL("../cli/main.js", import.meta.url));

/** A debug build with a cold disk cache starts in well under a second; ten leaves room on a busy CI. */
const startTimeoutMs = 10_000;
/** A graceful stop drains the HTTP server and closes the store; long polls end at once on stop. */
const stopTimeoutMs = 10_000;
/** SIGKILL cannot be caught, so the exit comes as soon as the kernel reaps the process. */
const killTimeoutMs = 5_000;
/** Output kept for failure messages: the tail is what explains a crash. */
const outputBytesMax = 64 * 1024;

const listeningPattern = /^Hopper listening on (http:\/\/\S+)$/m;

export interface ServerProcessOptions {
  /**
   * The SQLite file; restart a server on the same file to see what it kept. Required unless `store`
   * names PostgreSQL.
   */
  dataFile?: string;
  durability?: Durability;
  apiKeys?: readonly string[];
  /** `--jwt-secret`: device tokens signed HS256 with it are accepted. */
  jwtSecret?: string;
  /** `--jwt-jwks`: device tokens signed by a key of this JWKS file are accepted. */
  jwtJwks?: string;
  /** `--store`: a postgres:// URL (the node keeps its state there, shared with every node on it), or
   * log:<directory> for the log store. */
  store?: string;
  /** The PostgreSQL schema (`--pg-schema`); one per test run, so runs never see each other's rows. */
  pgSchema?: string;
  /** `--skip-integrity-check`: a SQLite server starts without PRAGMA quick_check. */
  skipIntegrityCheck?: boolean;
  /** How long the start may take (default startTimeoutMs): a store with a large log to replay. */
  startTimeoutMs?: number;
  /** Added to the child's environment, e.g. PGAPPNAME to tell its PostgreSQL sessions apart. */
  env?: Readonly<Record<string, string>>;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServerProcess {
  /** The base URL, as the server printed it: `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly pid: number;
  /** What the server wrote to stderr so far (the last 64 KiB), for assertion messages. */
  stderr(): string;
  /** What the server wrote to stdout so far (the last 64 KiB). */
  stdout(): string;
  /** Sends SIGTERM and resolves with the exit status once the process is gone. */
  stop(): Promise<ExitStatus>;
  /** Sends SIGKILL, as a crash or `kill -9` would, and resolves once the process is gone. */
  kill9(): Promise<ExitStatus>;
  /** How the process ended, or undefined while it runs: a test can tell a crash from a slow answer. */
  exitStatus(): ExitStatus | undefined;
  /** The options it was started with. */
  readonly options: ServerProcessOptions;
  /**
   * Starts a new process on the same options, after a graceful stop of this one if it still runs. The
   * new process listens on a new port: use its `url`.
   */
  restart(): Promise<ServerProcess>;
}

/** A fresh directory under the OS temp dir, and a way to remove it with everything in it. */
export interface TempDir {
  readonly path: string;
  file(name: string): string;
  remove(): void;
}

export function createTempDir(prefix = "hopper-e2e-"): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    file: (name) => join(path, name),
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}

const liveChildren = new Set<ChildProcess>();
let exitHooksInstalled = false;

function killLiveChildren(): void {
  for (const child of liveChildren) child.kill("SIGKILL");
  liveChildren.clear();
}

/**
 * Kills every child when this process ends: on a normal or uncaught-error exit, and on SIGINT or
 * SIGTERM (the test runner's timeout), after which the signal is raised again so the default action
 * (ending this process) still happens.
 */
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", killLiveChildren);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      killLiveChildren();
      process.kill(process.pid, signal);
    });
  }
}

/** Keeps the last `outputBytesMax` characters of a stream. */
function tail(stream: NodeJS.ReadableStream | null): { text(): string } {
  let text = "";
  stream?.setEncoding("utf8");
  stream?.on("data", (chunk: string) => {
    text += chunk;
    if (text.length > outputBytesMax) text = text.slice(-outputBytesMax);
  });
  return { text: () => text };
}

/** Starts `hopper serve --port 0` and resolves once it prints the URL it listens on. */
export async function startServerProcess(options: ServerProcessOptions): Promise<ServerProcess> {
  // Over 80 lines: one process start whose listeners share its output, exit and URL.
  if (!existsSync(mainPath)) {
    throw new Error(`${mainPath} is missing; build first: npx tsc -b packages/server`);
  }
  if (options.dataFile === undefined && options.store === undefined) {
    throw new Error("a server process needs a dataFile (SQLite) or a store (postgres:// URL or log:<dir>)");
  }
  const args = [mainPath, "serve", "--port", "0"];
  if (options.dataFile !== undefined) args.push("--data", options.dataFile);
  if (options.durability) args.push("--durability", options.durability);
  if (options.store !== undefined) args.push("--store", options.store);
  if (options.pgSchema !== undefined) args.push("--pg-schema", options.pgSchema);
  for (const key of options.apiKeys ?? []) args.push("--api-key", key);
  if (options.skipIntegrityCheck) args.push("--skip-integrity-check");
  if (options.jwtSecret !== undefined) args.push("--jwt-secret", options.jwtSecret);
  if (options.jwtJwks !== undefined) args.push("--jwt-jwks", options.jwtJwks);

  installExitHooks();
  // Keys or a store in the environment would change what the server does; each test says what it wants.
  const env = { ...process.env, ...options.env };
  for (const name of ["HOPPER_API_KEYS", "HOPPER_STORE", "HOPPER_PG_SCHEMA", "HOPPER_JWT_SECRET"]) {
    if (options.env?.[name] === undefined) delete env[name];
  }
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env });
  liveChildren.add(child);
  const stdout = tail(child.stdout);
  const stderr = tail(child.stderr);

  let exitStatus: ExitStatus | undefined;
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once("exit", (code, signal) => {
      liveChildren.delete(child);
      exitStatus = { code, signal };
      resolve(exitStatus);
    });
  });
  const describe = () => `stdout:\n${stdout.text()}\nstderr:\n${stderr.text()}`;

  const timeoutMs = options.startTimeoutMs ?? startTimeoutMs;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the server did not start within ${timeoutMs} ms\n${describe()}`));
    }, timeoutMs);
    const onData = () => {
      const match = listeningPattern.exec(stdout.text());
      if (!match) return;
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      resolve(match[1] as string);
    };
    child.stdout?.on("data", onData);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(
        new Error(`the server exited (code ${code}, signal ${signal}) before it listened\n${describe()}`),
      );
    });
  });

  const endWith = async (signal: NodeJS.Signals, timeoutMs: number): Promise<ExitStatus> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`the server did not exit within ${timeoutMs} ms of ${signal}\n${describe()}`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };

  const stop = () => endWith("SIGTERM", stopTimeoutMs);
  return {
    url,
    pid: child.pid as number,
    stderr: stderr.text,
    stdout: stdout.text,
    stop,
    kill9: () => endWith("SIGKILL", killTimeoutMs),
    exitStatus: () => exitStatus,
    options,
    restart: async () => {
      await stop();
      return startServerProcess(options);
    },
  };
}
