/**
 * End-to-end tests of the client commands: the compiled `hopper` CLI, run as a child process, against
 * a real `hopper serve` on a free port and a temporary SQLite file. What each command prints is checked,
 * and what it did is checked again through the typed client, so a command cannot pass by printing the
 * right words while doing the wrong thing.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { HopperClient, HopperError } from "@hopper/client";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

/** The compiled CLI beside this compiled test, whatever the working directory. */
const mainPath = fileURLToPath(new URL("./main.js", import.meta.url));

/** A CLI run talks to a local server; one that takes longer than this is hung, not slow. */
const runTimeoutMs = 15_000;

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface RunOptions {
  stdin?: string;
  env?: Record<string, string>;
}

/** Runs `hopper <args>` and resolves with its exit code and output once it exits. */
function runCli(args: string[], options: RunOptions = {}): Promise<RunResult> {
  // The caller's environment must not point the CLI at another broker or send a stray key.
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.HOPPER_URL) delete env.HOPPER_URL;
  if (!options.env?.HOPPER_API_KEY) delete env.HOPPER_API_KEY;
  const child = spawn(process.execPath, [mainPath, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.end(options.stdin ?? "");
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`hopper ${args.join(" ")} did not exit within ${runTimeoutMs} ms\n${stderr}`));
    }, runTimeoutMs);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The id lines `hopper send` prints, one per message sent. */
function idLines(stdout: string): string[] {
  return stdout.split("\n").filter((line) => line.trim() !== "");
}

describe("hopper client commands", () => {
  let dir: TempDir;
  let server: ServerProcess;
  let client: HopperClient;
  /** Runs the CLI against the test server. */
  const hopper = (args: string[], options: RunOptions = {}) =>
    runCli([...args, "--url", server.url], options);

  before(async () => {
    dir = createTempDir("hopper-cli-");
    server = await startServerProcess({ dataFile: dir.file("hopper.db") });
    client = new HopperClient({ url: server.url });
  });

  after(async () => {
    await server?.stop();
    dir?.remove();
  });

  test("queue create sends the durations it is given, in milliseconds", async () => {
    const args = ["queue", "create", "created", "--visibility-timeout", "45s", "--retention", "4d"];
    const extra = ["--delay", "2s", "--receive-wait", "5s", "--max-message-bytes", "2048"];
    const result = await hopper([...args, ...extra]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^created queue created$/m);
    assert.match(result.stdout, /visibility timeout +45s$/m);
    assert.match(result.stdout, /retention +4d$/m);
    assert.match(result.stdout, /max message size +2 KiB$/m);
    const { attributes } = await client.getQueue("created");
    assert.equal(attributes.visibilityTimeoutMs, 45_000);
    assert.equal(attributes.retentionMs, 4 * 86_400_000);
    assert.equal(attributes.delayMs, 2000);
    assert.equal(attributes.receiveWaitMs, 5000);
    assert.equal(attributes.maxMessageBytes, 2048);
  });

  test("queue create on an existing queue updates only the attributes given", async () => {
    await client.putQueue("updated-dlq");
    await client.putQueue("updated", { visibilityTimeoutMs: 45_000 });
    const args = ["queue", "create", "updated", "--dead-letter", "updated-dlq", "--max-deliveries", "5"];
    const result = await hopper(args);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^updated queue updated$/m);
    assert.match(result.stdout, /dead letter +to updated-dlq after 5 deliveries$/m);
    const { attributes } = await client.getQueue("updated");
    assert.equal(attributes.visibilityTimeoutMs, 45_000, "an attribute not given keeps its value");
    assert.deepEqual(attributes.deadLetter, { queue: "updated-dlq", maxDeliveries: 5 });
  });

  test("send and receive --ack carry JSON and text bodies and leave the queue empty", async () => {
    await client.putQueue("roundtrip");
    const json = await hopper(["send", "roundtrip", '{"order":7,"items":["a"]}', "--header", "x-source=cli"]);
    assert.equal(json.code, 0, json.stderr);
    const text = await hopper(["send", "roundtrip", "hello there", "--key", "k1"]);
    assert.equal(text.code, 0, text.stderr);
    const [jsonId, textId] = [...idLines(json.stdout), ...idLines(text.stdout)];

    const result = await hopper(["receive", "roundtrip", "--max", "10", "--ack"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^id +${jsonId}$`, "m"));
    assert.match(result.stdout, new RegExp(`^id +${textId}$`, "m"));
    assert.match(result.stdout, /^header +x-source: cli$/m);
    assert.match(result.stdout, /^key +k1$/m);
    assert.match(result.stdout, /^content type +text\/plain$/m);
    assert.match(result.stdout, /^ {2}\{\n {4}"order": 7,\n {4}"items": \[\n {6}"a"\n {4}\]\n {2}\}$/m);
    assert.match(result.stdout, /^ {2}hello there$/m);
    assert.doesNotMatch(result.stdout, /receipt/, "an acked message's receipt is of no use");

    const { stats } = await client.getQueue("roundtrip");
    assert.deepEqual([stats.available, stats.inFlight, stats.acked], [0, 0, 2]);
  });

  test("receive without --ack prints the receipt and leaves the message leased", async () => {
    await client.putQueue("leased");
    await hopper(["send", "leased", "[1,2]"]);
    const result = await hopper(["receive", "leased", "--visibility-timeout", "1m"]);
    assert.equal(result.code, 0, result.stderr);
    const receipt = /^receipt +(\S+)$/m.exec(result.stdout)?.[1];
    assert.ok(receipt, result.stdout);
    const { stats } = await client.getQueue("leased");
    assert.equal(stats.inFlight, 1);
    const [acked] = await client.ack("leased", [receipt]);
    assert.deepEqual(acked, { ok: true }, "the printed receipt is the lease's");
  });

  test("send --file - --lines sends one message per non-blank line, in batches of 100", async () => {
    await client.putQueue("lines");
    const lines = Array.from({ length: 250 }, (_, index) =>
      index % 2 === 0 ? `{"n":${index}}` : `line ${index}`,
    );
    const result = await hopper(["send", "lines", "--file", "-", "--lines"], {
      stdin: `${lines.join("\r\n")}\n\n`,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(new Set(idLines(result.stdout)).size, 250);
    const { stats } = await client.getQueue("lines");
    assert.equal(stats.available, 250);
    const [first, second] = await client.peek("lines", { limit: 2 });
    assert.deepEqual(first?.body, { n: 0 });
    assert.equal(Buffer.from(second?.bodyBase64 ?? "", "base64").toString("utf8"), "line 1");
  });

  test("--json prints the server's answers", async () => {
    const created = await hopper(["queue", "create", "json-out", "--json"]);
    assert.equal(JSON.parse(created.stdout).attributes.visibilityTimeoutMs, 30_000);
    const sent = await hopper(["send", "json-out", "true", "--json"]);
    const [result] = JSON.parse(sent.stdout).results;
    const received = await hopper(["--url", server.url, "--json", "receive", "json-out"]);
    const [message] = JSON.parse(received.stdout).messages;
    assert.equal(message.id, result.id);
    assert.equal(message.body, true);
    const listed = JSON.parse((await hopper(["queue", "ls", "--json"])).stdout);
    assert.ok(listed.queues.some((queue: { name: string }) => queue.name === "json-out"));
  });

  test("queue ls lists each queue with its depths", async () => {
    await client.putQueue("listed");
    await client.send("listed", [{ body: 1 }, { body: 2 }]);
    const result = await hopper(["queue", "ls"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^NAME +KIND +AVAILABLE +IN-FLIGHT +DELAYED +OLDEST +DEAD-LETTERED$/m);
    assert.match(result.stdout, /^listed +standard +2 +0 +0 +\S+ +0$/m);
  });

  test("queue stats shows attributes and statistics", async () => {
    await client.putQueue("inspected", { visibilityTimeoutMs: 90_000 });
    await client.send("inspected", [{ body: 1 }]);
    const result = await hopper(["queue", "stats", "inspected"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^queue inspected \(standard\)$/m);
    assert.match(result.stdout, /^ {2}visibility timeout +90s$/m);
    assert.match(result.stdout, /^ {2}available +1$/m);
    assert.match(result.stdout, /^ {2}published +1$/m);
  });

  test("queue purge reports how many messages it deleted", async () => {
    await client.putQueue("purged");
    await client.send("purged", [{ body: 1 }, { body: 2 }, { body: 3 }]);
    const result = await hopper(["queue", "purge", "purged"]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, "purged 3 messages from purged\n");
    assert.equal((await client.getQueue("purged")).stats.available, 0);
  });

  test("queue rm deletes the queue", async () => {
    await client.putQueue("removed");
    const result = await hopper(["queue", "rm", "removed"]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, "deleted queue removed\n");
    await assert.rejects(client.getQueue("removed"), (error: HopperError) => {
      return error instanceof HopperError && error.code === "queue_not_found";
    });
  });

  test("an unknown queue exits 1 with the server's error code", async () => {
    for (const args of [
      ["queue", "stats", "missing"],
      ["send", "missing", "x"],
      ["receive", "missing"],
    ]) {
      const result = await hopper(args);
      assert.equal(result.code, 1, args.join(" "));
      assert.match(result.stderr, /^error queue_not_found: /, args.join(" "));
    }
  });

  test("a bad flag exits 2 with a clear message and sends nothing", async () => {
    const duration = await hopper(["queue", "create", "never", "--visibility-timeout", "45 seconds"]);
    assert.equal(duration.code, 2);
    assert.match(duration.stderr, /"45 seconds" is not a duration/);
    const pair = await hopper(["queue", "create", "never", "--dead-letter", "elsewhere"]);
    assert.equal(pair.code, 2);
    assert.match(pair.stderr, /--dead-letter and --max-deliveries go together/);
    const noBody = await hopper(["send", "never"]);
    assert.equal(noBody.code, 2);
    assert.match(noBody.stderr, /give a body, or --file/);
    const names = (await client.listQueues()).map((queue) => queue.name);
    assert.ok(!names.includes("never"));
  });

  test("HOPPER_URL is used when --url is not given", async () => {
    const result = await runCli(["queue", "create", "from-env"], { env: { HOPPER_URL: server.url } });
    assert.equal(result.code, 0, result.stderr);
    assert.equal((await client.getQueue("from-env")).name, "from-env");
  });

  test("a broker that is not there exits 1 with network_error", async () => {
    const result = await runCli(["queue", "ls", "--url", "http://127.0.0.1:9"]);
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /^error network_error: .*is hopper serve running at http:\/\/127\.0\.0\.1:9\?/,
    );
  });
});

describe("hopper client commands with API keys", () => {
  test("serve --api-key still names a key to accept; --api-key on a client command sends it", async () => {
    const dir = createTempDir("hopper-cli-keys-");
    const server = await startServerProcess({ dataFile: dir.file("hopper.db"), apiKeys: ["secret-1"] });
    try {
      const refused = await runCli(["queue", "ls", "--url", server.url]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /^error unauthorized: /);
      const accepted = await runCli([
        "--api-key",
        "secret-1",
        "queue",
        "create",
        "keyed",
        "--url",
        server.url,
      ]);
      assert.equal(accepted.code, 0, accepted.stderr);
      const fromEnv = await runCli(["queue", "ls", "--url", server.url], {
        env: { HOPPER_API_KEY: "secret-1" },
      });
      assert.match(fromEnv.stdout, /^keyed +standard/m);
    } finally {
      await server.stop();
      dir.remove();
    }
  });
});
