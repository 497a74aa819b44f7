/**
 * `npm start -- <flags>` as README.md documents it: npm appends the flags after `--` to the start
 * script, which must therefore end in `hopper serve`, so `--port` and `--data` reach the server. The
 * script builds first; with the build up to date (npm test has just built) that is a few seconds.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { createTempDir } from "../testing/server-process.js";

/** The repository's root, from packages/server/dist/e2e. */
const rootPath = fileURLToPath(new URL("../../../../", import.meta.url));
/** An incremental build of the three projects, then the server's start, on a busy machine. */
const startTimeoutMs = 120_000;

/** A port that was free a moment ago: the test must name one to see that --port reached the server. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test("npm start -- --port N --data FILE serves on that port and that file", {
  timeout: startTimeoutMs + 10_000,
}, async () => {
  const dir = createTempDir();
  const port = await freePort();
  const dataFile = dir.file("started.db");
  // Settings in the environment must not decide what the flags are there to decide.
  const env = { ...process.env };
  for (const name of ["HOPPER_PORT", "HOPPER_DATA", "HOPPER_STORE", "HOPPER_API_KEYS"]) delete env[name];
  // Its own process group, so that the shell and the server under npm end with it.
  const child = spawn("npm", ["start", "--silent", "--", "--port", String(port), "--data", dataFile], {
    cwd: rootPath,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    const deadline = Date.now() + startTimeoutMs;
    while (!/^Hopper listening on /m.test(output)) {
      if (child.exitCode !== null) assert.fail(`npm start exited with ${child.exitCode}:\n${output}`);
      if (Date.now() > deadline)
        assert.fail(`npm start did not listen within ${startTimeoutMs} ms:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.match(output, new RegExp(`^Hopper listening on http://127\\.0\\.0\\.1:${port}$`, "m"));
    assert.match(output, new RegExp(`store: +SQLite ${dataFile.replace(/[.\\]/g, "\\$&")} `));
    const health = await fetch(`http://127.0.0.1:${port}/v1/queues`);
    assert.equal(health.status, 200);
    assert.ok(existsSync(dataFile), "the server keeps its data in the file --data named");
  } finally {
    if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
    await exited;
    dir.remove();
  }
});
