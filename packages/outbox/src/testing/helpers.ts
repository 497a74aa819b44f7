/** Small helpers of the outbox's end-to-end tests: child processes, waits for a condition, writes. */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { HopperClient, type ReceivedMessage } from "@hopper/client";
import type { Database } from "better-sqlite3";
import type { Pool } from "pg";
import type { OutboxEvent } from "../event.js";
import type { OpenedDatabase } from "../open-database.js";
import type { TableOptions } from "../tables.js";
import { writeOutbox } from "../write-outbox.js";

const childPath = fileURLToPath(new URL("./outbox-child.js", import.meta.url));
const pauseTimeoutMs = 15_000;

export interface PausedChild {
  readonly child: ChildProcess;
  /** Resolves with the point and the row ids once the child printed `paused …`. */
  paused: Promise<{ point: string; ids: string[] }>;
  kill9(): Promise<void>;
}

export function spawnOutboxChild(env: Record<string, string>): PausedChild {
  const child = spawn(process.execPath, [childPath], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let output = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const paused = new Promise<{ point: string; ids: string[] }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`child did not pause in ${pauseTimeoutMs} ms: ${output}`)),
      pauseTimeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /^paused (\S+) (.*)$/m.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ point: match[1] as string, ids: JSON.parse(match[2] as string) });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`child exited before pausing: ${output}`));
    });
  });
  paused.catch(() => {});
  return {
    child,
    paused,
    async kill9() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** Polls `check` every 20 ms until it returns a value that is not undefined; fails after the timeout. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Writes the events in one transaction of the application, as an application would. */
export async function writeEvents(
  opened: OpenedDatabase,
  events: OutboxEvent[],
  tables: TableOptions & { mode?: "poll" | "wal" },
): Promise<string[]> {
  if (opened.dialect === "sqlite") {
    const db = opened.db as Database;
    return db.transaction(() => events.map((event) => writeOutbox(db, event, tables).id))();
  }
  const client = await (opened.db as Pool).connect();
  try {
    await client.query("BEGIN");
    const ids: string[] = [];
    for (const event of events) ids.push((await writeOutbox(client, event, tables)).id);
    await client.query("COMMIT");
    return ids;
  } finally {
    client.release();
  }
}

/** Receives (and acks) until `count` messages came, in the order received. */
export async function receiveAll(url: string, queue: string, count: number): Promise<ReceivedMessage[]> {
  const hopper = new HopperClient({ url });
  const messages: ReceivedMessage[] = [];
  try {
    await waitFor(`${count} messages in ${queue}`, async () => {
      const batch = await hopper.receive(queue, { max: 100, waitMs: 200 });
      if (batch.length > 0)
        await hopper.ack(
          queue,
          batch.map((message) => message.receipt),
        );
      messages.push(...batch);
      return messages.length >= count ? true : undefined;
    });
    return messages;
  } finally {
    await hopper.close();
  }
}

/** Asserts that each key's messages were stored with bodies `{ n }` counting 0, 1, … `perKey - 1`. */
export function assertOrderPerKey(messages: ReceivedMessage[], keys: string[], perKey: number): void {
  // Server ids are UUIDv7 that increase in store order: sorted by them, the order stored.
  const stored = [...messages].sort((left, right) => (left.id < right.id ? -1 : 1));
  const expected = Array.from({ length: perKey }, (_, n) => n);
  for (const key of keys) {
    const sequence = stored
      .filter((message) => message.key === key)
      .map((message) => (message.body as { n: number }).n);
    assert.deepEqual(sequence, expected, `key ${key} in order`);
  }
}

/** A topic exchange `<queue>.events` whose `order.*` routing keys reach `queue`. */
export async function routeToQueue(hopper: HopperClient, queue: string): Promise<string> {
  await hopper.putExchange(`${queue}.events`, { type: "topic" });
  await hopper.bind(`${queue}.events`, { queue, pattern: "order.*" });
  return `${queue}.events`;
}

/** A queue that refuses bodies over 1 KiB, and the events of the poison tests: key a's first event is
 * too large, one more of key a and two of key b behind it. */
export async function poisonQueueEvents(hopper: HopperClient, queue: string): Promise<OutboxEvent[]> {
  await hopper.putQueue(queue, { maxMessageBytes: 1024 });
  return [
    { destination: { queue }, key: "a", body: { big: "x".repeat(2000) } },
    { destination: { queue }, key: "a", body: { n: 2 } },
    { destination: { queue }, key: "b", body: { n: 1 } },
    { destination: { queue }, key: "b", body: { n: 2 } },
  ];
}

/** Fetches `url` until its body matches `pattern` (a relay process's /metrics coming up); answers the body. */
export async function fetchUntil(url: string, pattern: RegExp): Promise<string> {
  return waitFor(`${url} to show ${pattern}`, async () => {
    const body = await fetch(url).then(
      (response) => response.text(),
      () => "",
    );
    return pattern.test(body) ? body : undefined;
  });
}

/** Starts `hopper-outbox` with `args` as a process of its own; `stop()` sends SIGTERM and waits. */
export function spawnOutboxCommand(args: string[]): {
  /** Resolves with the exit code once the command ended by itself. */
  exited: Promise<number | null>;
  stop(): Promise<number | null>;
  output(): string;
} {
  const bin = fileURLToPath(new URL("../../bin/hopper-outbox.js", import.meta.url));
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    exited,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}
