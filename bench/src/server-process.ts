/**
 * Runs `hopper serve` as a child process, on a fresh temporary SQLite file or on a PostgreSQL schema,
 * so the server has its own process (and so its own core) while the load generator runs in this one.
 * The child is killed when this process exits for any reason, so a failed run never leaves a broker
 * behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serverStartTimeoutMs, serverStderrTailBytesMax, serverStopTimeoutMs } from "./limits.js";
import type { Durability } from "./options.js";

/** The compiled CLI, found from this compiled file (bench/dist → packages/server/dist/cli). */
const serverMainPath = fileURLToPath(new URL("../../packages/server/dist/cli/main.js", import.meta.url));

const listeningPattern = /^Hopper listening on (http:\/\/\S+)$/m;

export interface BenchServer {
  /** The base URL the server printed. */
  readonly url: string;
  readonly pid: number;
  /** Stops the server (SIGTERM, then SIGKILL if it lingers) and removes its data directory, if any. */
  stop(): Promise<void>;
}

/** Where the server keeps its state: a fresh SQLite file or log directory, or a PostgreSQL schema that
 * nodes share. */
export type ServerStore =
  | { kind: "sqlite"; durability: Durability }
  | { kind: "log"; durability: Durability }
  | {
      kind: "postgres";
      url: string;
      schema: string;
      /** Given to the server as PGAPPNAME, so its sessions can be found in pg_stat_activity. */
      appName: string;
    };

const liveChildren = new Set<ChildProcess>();
// "exit" handlers must be synchronous; SIGKILL is, and it is enough to leave no server behind.
process.on("exit", () => {
  for (const child of liveChildren) child.kill("SIGKILL");
});

const rootPackagePath = fileURLToPath(new URL("../../package.json", import.meta.url));

/**
 * The node flags that `npm start` runs the server with (`node <flags> packages/server/dist/cli/main.js
 * serve` in the root package.json), so the bench runs the server as the README's way of starting it
 * does (docs/architecture.md "The Node process").
 */
export function serverNodeFlags(packagePath = rootPackagePath): string[] {
  const { scripts } = JSON.parse(readFileSync(packagePath, "utf8")) as { scripts?: Record<string, string> };
  const match = /\bnode((?:\s+--\S+)*)\s+packages\/server\/dist\/cli\/main\.js serve\b/.exec(
    scripts?.start ?? "",
  );
  return match ? (match[1] as string).split(/\s+/).filter((flag) => flag !== "") : [];
}

/** Starts the server and resolves once it has printed its URL. */
export async function startBenchServer(options: {
  store: ServerStore;
  profileDir?: string | undefined;
}): Promise<BenchServer> {
  const { store } = options;
  const dataDir = store.kind !== "postgres" ? mkdtempSync(join(tmpdir(), "hopper-bench-")) : undefined;
  const nodeFlags = [
    ...serverNodeFlags(),
    ...(options.profileDir === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", options.profileDir]),
  ];
  const storeFlags =
    store.kind === "sqlite"
      ? ["--data", join(dataDir as string, "hopper.db"), "--durability", store.durability]
      : store.kind === "log"
        ? ["--store", `log:${join(dataDir as string, "log")}`, "--durability", store.durability]
        : ["--store", store.url, "--pg-schema", store.schema];
  const args = [...nodeFlags, serverMainPath, "serve", "--port", "0", ...storeFlags];
  const env = withoutHopperSettings();
  if (store.kind === "postgres") env.PGAPPNAME = store.appName;
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env });
  liveChildren.add(child);
  let stderrTail = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderrTail = (stderrTail + chunk).slice(-serverStderrTailBytesMax);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  exited.then(() => liveChildren.delete(child));

  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => {
        console.error(
          `[bench] the server did not stop within ${serverStopTimeoutMs} ms of SIGTERM; killing it`,
        );
        child.kill("SIGKILL");
      }, serverStopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    const url = await waitForUrl(child, () => stderrTail);
    return { url, pid: child.pid as number, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * This process's environment without HOPPER_* variables: the server reads settings from them (API
 * keys, even another store), and the bench must measure the same server on every machine.
 */
function withoutHopperSettings(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("HOPPER_")));
}

/** Reads stdout until the listening line; fails if the child exits or stays silent too long. */
function waitForUrl(child: ChildProcess, stderrTail: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let found = false;
    const fail = (reason: string) => {
      clearTimeout(timer);
      reject(new Error(`the server did not start: ${reason}\nstderr:\n${stderrTail()}`));
    };
    const timer = setTimeout(() => fail(`no URL within ${serverStartTimeoutMs} ms`), serverStartTimeoutMs);
    child.once("exit", (code, signal) => fail(`it exited (code ${code}, signal ${signal})`));
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      // Once the URL is known the rest of stdout is still read, so the pipe never fills and blocks.
      if (found) return;
      stdout += chunk;
      const match = listeningPattern.exec(stdout);
      if (match) {
        found = true;
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    });
  });
}
