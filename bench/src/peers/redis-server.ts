/**
 * A private redis-server for the Redis peers, started by the bench on a spare loopback port with an
 * append-only file fsynced on every write (`--appendonly yes --appendfsync always`), no snapshots, and
 * its files in a fresh temporary folder. Redis then answers a write only after the AOF has been
 * fsynced (it flushes the AOF before it sends the replies of an event-loop pass), which is the
 * durability the other targets confirm. The machine's own Redis keeps nothing on disk, so it is never
 * used. The server is killed when this process exits for any reason.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  redisStartPollMs,
  redisStartTimeoutMs,
  serverStderrTailBytesMax,
  serverStopTimeoutMs,
} from "../limits.js";

export interface PrivateRedisServer {
  readonly host: string;
  readonly port: number;
  readonly pid: number;
  /** Stops the server (SIGTERM, then SIGKILL if it lingers) and removes its folder; safe to repeat. */
  stop(): Promise<void>;
}

const host = "127.0.0.1";
const liveServers = new Set<ChildProcess>();
// "exit" handlers must be synchronous; SIGKILL is, and it leaves no server behind.
process.on("exit", () => {
  for (const child of liveServers) child.kill("SIGKILL");
});

/** Starts redis-server and resolves once it answers PING. */
export async function startPrivateRedis(serverPath: string): Promise<PrivateRedisServer> {
  const dir = mkdtempSync(join(tmpdir(), "hopper-bench-redis-"));
  const port = await spareLoopbackPort();
  const args = [
    "--bind",
    host,
    "--port",
    String(port),
    "--daemonize",
    "no",
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--dir",
    dir,
    "--logfile",
    "",
  ];
  const child = spawn(serverPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  liveServers.add(child);
  let outputTail = "";
  const keepTail = (chunk: string) => {
    outputTail = (outputTail + chunk).slice(-serverStderrTailBytesMax);
  };
  child.stdout.setEncoding("utf8").on("data", keepTail);
  child.stderr.setEncoding("utf8").on("data", keepTail);
  let spawnError: Error | undefined;
  child.once("error", (error) => {
    spawnError = error;
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  exited.then(() => liveServers.delete(child));
  const hasExited = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (!hasExited()) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), serverStopTimeoutMs);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopping;
  };

  const deadline = performance.now() + redisStartTimeoutMs;
  for (;;) {
    if (hasExited()) {
      await stop();
      throw new Error(`redis-server did not start: ${spawnError?.message ?? "it exited"}\n${outputTail}`);
    }
    if (await answersPing(port)) break;
    if (performance.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING within ${redisStartTimeoutMs} ms\n${outputTail}`);
    }
    await sleep(redisStartPollMs);
  }
  return { host, port, pid: child.pid as number, stop };
}

/** A port that was free a moment ago: the OS picks it for a listener that is closed at once. */
function spareLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("could not find a spare port"));
      });
    });
  });
}

/** One inline PING on a fresh connection; true if the answer is +PONG. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    let answer = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(redisStartPollMs * 10, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      answer += chunk;
      if (answer.includes("\r\n")) done(answer.startsWith("+PONG"));
    });
  });
}
