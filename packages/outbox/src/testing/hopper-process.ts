/**
 * A real `hopper serve` for the outbox's tests: the server package's compiled CLI on a SQLite file, on
 * a port chosen once, so a test can stop the broker and start it again where the relay expects it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

const mainPath = fileURLToPath(new URL("../../../server/dist/cli/main.js", import.meta.url));
const startTimeoutMs = 10_000;
const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export interface HopperProcess {
  readonly url: string;
  stop(): Promise<void>;
}

export async function startHopper(dataFile: string, port: number): Promise<HopperProcess> {
  if (!existsSync(mainPath)) throw new Error(`${mainPath} is missing: build the server first`);
  const env = { ...process.env };
  for (const name of ["HOPPER_API_KEYS", "HOPPER_STORE", "HOPPER_PG_SCHEMA", "HOPPER_JWT_SECRET"])
    delete env[name];
  const child = spawn(
    process.execPath,
    [mainPath, "serve", "--port", String(port), "--data", dataFile, "--durability", "os"],
    { stdio: ["ignore", "pipe", "pipe"], env },
  );
  live.add(child);
  let output = "";
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`hopper did not start in ${startTimeoutMs} ms: ${output}`)),
      startTimeoutMs,
    );
    child.stdout?.on("data", (chunk) => {
      output += chunk;
      if (/Hopper listening on/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(() => reject(new Error(`hopper exited before listening: ${output}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      live.delete(child);
    },
  };
}
