/**
 * Runs the real `hopper serve` for the client's end-to-end tests: the server package's compiled CLI on
 * a free port and a temporary SQLite file. The client package does not depend on the server's code;
 * it only runs the server's build output, found at its place in this repository's workspace, so the
 * server must be built first (`tsc -b packages/client packages/server` builds both). Every child is
 * killed when the test process exits, so a failed test never leaves a broker running.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** packages/client/dist/testing → packages/server/dist/cli/main.js, whatever the working directory. */
const serverMainPath = fileURLToPath(new URL("../../../server/dist/cli/main.js", import.meta.url));

/** A cold start takes well under a second; ten leave room on a busy machine. */
const startTimeoutMs = 10_000;
/** A graceful stop ends long polls at once and closes the store. */
const stopTimeoutMs = 10_000;

const listeningPattern = /^Hopper listening on (http:\/\/\S+)$/m;

export interface TestServer {
  /** `http://127.0.0.1:PORT`, as the server printed it. */
  readonly url: string;
  /** Stops the server (SIGTERM) and removes its data directory. */
  stop(): Promise<void>;
}

const liveChildren = new Set<ChildProcess>();

process.on("exit", () => {
  for (const child of liveChildren) child.kill("SIGKILL");
});

/** Starts `hopper serve --port 0` on a fresh SQLite file and resolves once it listens. */
export async function startTestServer(): Promise<TestServer> {
  if (!existsSync(serverMainPath)) {
    throw new Error(`${serverMainPath} is missing; build the server first: tsc -b packages/server`);
  }
  const dir = mkdtempSync(join(tmpdir(), "hopper-client-e2e-"));
  const env = { ...process.env };
  // Keys or a store in the environment would change what the server does.
  for (const name of ["HOPPER_API_KEYS", "HOPPER_STORE", "HOPPER_PG_SCHEMA"]) delete env[name];
  const args = [serverMainPath, "serve", "--port", "0", "--data", join(dir, "hopper.db")];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env });
  liveChildren.add(child);
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      liveChildren.delete(child);
      resolve();
    });
  });

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the server did not start within ${startTimeoutMs} ms\n${output}`));
    }, startTimeoutMs);
    const onData = () => {
      const match = listeningPattern.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout.off("data", onData);
      resolve(match[1] as string);
    };
    child.stdout.on("data", onData);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`the server exited before it listened\n${output}`));
    });
  });

  return {
    url,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
