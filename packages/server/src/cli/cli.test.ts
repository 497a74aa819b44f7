/**
 * End-to-end tests of the client commands: the compiled `hopper` CLI, run as a child process, against
 * a real `hopper serve` on a free port and a temporary SQLite file. What each command prints is checked,
 * and what it did is checked again through the typed client, so a command cannot pass by printing the
 * right words while doing the wrong thing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { HopperClient, HopperError } from "@hopper/client";
import { type RunOptions, runCli, startCli } from "../testing/cli-process.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

/** The id lines `hopper send` prints, one per message sent. */
function idLines(stdout: string): string[] {
  return stdout.split("\n").filter((line) => line.trim() !== "");
}

describe("hopper client commands", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let dir: TempDir;
  let server: ServerProcess;
  let client: HopperClient;
  /** Runs the CLI against the test server. */
  const hopper = (args: string[], options: RunOptions = {}) =>
    runCli([...args, "--url", server.url], options);

  /**
   * Fills `dlq` with `count` messages of `queue`, each dead-lettered for max_deliveries after one
   * delivery, keys k0..k2 in turn.
   */
  async function deadLetters(queue: string, dlq: string, count: number): Promise<void> {
    await client.putQueue(dlq);
    await client.putQueue(queue, { deadLetter: { queue: dlq, maxDeliveries: 1 } });
    await client.send(
      queue,
      Array.from({ length: count }, (_, n) => ({ body: { n }, key: `k${n % 3}` })),
    );
    const received = await client.receive(queue, { max: 100 });
    await client.nack(
      queue,
      received.map((message) => message.receipt),
    );
    assert.equal((await client.getQueue(dlq)).stats.available, count);
  }

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

  test("queue create takes the FIFO, depth and dedup flags, and shows them", async () => {
    const fifo = await hopper(["queue", "create", "flagged-fifo", "--fifo", "--dedup-window", "2m"]);
    assert.equal(fifo.code, 0, fifo.stderr);
    assert.match(fifo.stdout, /^ {2}dedup +2m window$/m);
    const created = await client.getQueue("flagged-fifo");
    assert.equal(created.kind, "fifo");
    assert.equal(created.attributes.dedupWindowMs, 120_000);

    const bounded = ["queue", "create", "flagged", "--max-depth", "3", "--overflow", "drop-oldest"];
    const result = await hopper([...bounded, "--dedup-window", "1m", "--content-based-dedup"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^ {2}max depth +3, then drop-oldest$/m);
    assert.match(result.stdout, /^ {2}dedup +1m window, by body too$/m);
    const { attributes } = await client.getQueue("flagged");
    assert.deepEqual(
      [attributes.maxDepth, attributes.overflow, attributes.dedupWindowMs, attributes.contentBasedDedup],
      [3, "drop-oldest", 60_000, true],
    );

    const lifted = await hopper([
      "queue",
      "create",
      "flagged",
      "--max-depth",
      "none",
      "--no-content-based-dedup",
    ]);
    assert.equal(lifted.code, 0, lifted.stderr);
    const after = (await client.getQueue("flagged")).attributes;
    assert.deepEqual([after.maxDepth, after.contentBasedDedup, after.overflow], [null, false, "drop-oldest"]);

    const badPolicy = await hopper(["queue", "create", "never", "--overflow", "sideways"]);
    assert.equal(badPolicy.code, 2);
    assert.match(badPolicy.stderr, /Allowed choices are reject, drop-oldest, dead-letter-oldest/);
  });

  test("send --dedup-id prints the first id again and says it was a duplicate; --priority orders", async () => {
    await client.putQueue("deduped", { dedupWindowMs: 60_000 });
    const first = await hopper(["send", "deduped", "charge", "--dedup-id", "charge-1"]);
    const again = await hopper(["send", "deduped", "charge", "--dedup-id", "charge-1"]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(idLines(again.stdout), idLines(first.stdout));
    assert.equal(first.stderr, "");
    assert.match(again.stderr, /^duplicate: /);
    assert.equal((await client.getQueue("deduped")).stats.available, 1);

    await client.putQueue("prioritized");
    await hopper(["send", "prioritized", '"low"']);
    await hopper(["send", "prioritized", '"high"', "--priority", "9"]);
    const [peeked] = await client.peek("prioritized", { limit: 1 });
    assert.equal(peeked?.priority, 0, "peek shows arrival order");
    const [received] = await client.receive("prioritized");
    assert.equal(received?.body, "high");

    const lines = await hopper(["send", "never", "--file", "-", "--lines", "--dedup-id", "x"], {
      stdin: "a\n",
    });
    assert.equal(lines.code, 2);
    assert.match(lines.stderr, /--dedup-id names one message/);
    await client.putQueue("full", { maxDepth: 1 });
    await hopper(["send", "full", "1"]);
    const refused = await hopper(["send", "full", "2"]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error queue_full: /);
    const fifoPriority = await hopper(["send", "flagged-fifo", "x", "--key", "k", "--priority", "1"]);
    assert.equal(fifoPriority.code, 1, "a FIFO queue refuses a priority");
    assert.match(fifoPriority.stderr, /^error invalid_request: /m);
  });

  test("receive --auto-ack prints no receipt and leaves nothing in flight", async () => {
    await client.putQueue("auto-acked");
    await client.send("auto-acked", [{ body: 1 }]);
    const result = await hopper(["receive", "auto-acked", "--auto-ack"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^id +\S+$/m);
    assert.doesNotMatch(result.stdout, /receipt/);
    const { stats } = await client.getQueue("auto-acked");
    assert.deepEqual([stats.available, stats.inFlight, stats.acked], [0, 0, 1]);
    const both = await hopper(["receive", "auto-acked", "--auto-ack", "--ack"]);
    assert.equal(both.code, 2);
  });

  test("dlq peek shows each message's reason, origin and deliveries, and counts them", async () => {
    await deadLetters("peeked", "peeked-dlq", 3);
    // Two more pushed out by overflow: reason max_depth.
    await client.putQueue("overflowing", {
      maxDepth: 1,
      overflow: "dead-letter-oldest",
      deadLetter: { queue: "peeked-dlq", maxDeliveries: 5 },
    });
    await client.send("overflowing", [{ body: "a" }, { body: "b" }, { body: "c" }]);

    const result = await hopper(["dlq", "peek", "peeked-dlq"]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^ID +AGE +REASON +ORIGINAL-QUEUE +DELIVERIES +KEY +BODY$/m);
    assert.match(result.stdout, /^\S+ +\S+ +max_deliveries +peeked +1 +k0 +\{"n":0\}$/m);
    assert.match(result.stdout, /^\S+ +\S+ +max_depth +overflowing +0 +- +"a"$/m);
    assert.match(
      result.stdout,
      /^5 of 5 messages shown; by reason: max_deliveries 3, max_depth 2; by original queue: peeked 3, overflowing 2$/m,
    );

    const limited = await hopper(["dlq", "peek", "peeked-dlq", "--limit", "2"]);
    assert.match(limited.stdout, /^2 of 5 messages shown; by reason: max_deliveries 2; /m);
    const json = JSON.parse((await hopper(["dlq", "peek", "peeked-dlq", "--json", "--limit", "1"])).stdout);
    assert.equal(json.messages[0].headers["x-dead-letter-reason"], "max_deliveries");
    const missing = await hopper(["dlq", "peek", "no-such-dlq"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^error queue_not_found: /);
  });

  test("dlq redrive follows the task to done, with progress lines when stderr is not a terminal", async () => {
    await deadLetters("redriven", "redriven-dlq", 60);
    const result = await hopper(["dlq", "redrive", "redriven-dlq", "--rate", "40"]);
    assert.equal(result.code, 0, result.stderr);
    const id =
      /^started redrive (\S+): 60 messages from redriven-dlq to their original queues at 40 msg\/s$/m.exec(
        result.stdout,
      )?.[1];
    assert.ok(id, result.stdout);
    assert.match(result.stdout, new RegExp(`^redrive ${id} done: moved 60 of 60 from redriven-dlq`, "m"));
    assert.doesNotMatch(result.stderr, /\r/, "no redrawing without a terminal");
    const lines = result.stderr.trim().split("\n");
    assert.ok(
      lines.length >= 3,
      `a line at the start, at least one on the way, one at the end:\n${result.stderr}`,
    );
    for (const line of lines) {
      assert.match(line, new RegExp(`^redrive ${id}: \\d+/60 moved \\(\\d+%\\), \\S+ msg/s, ETA \\S+$`));
    }
    assert.match(lines[0] as string, /: 0\/60 moved \(0%\)/);
    assert.ok(
      lines.some((line) => /: ([1-9]|[1-5]\d)\/60 moved/.test(line)),
      `progress on the way:\n${result.stderr}`,
    );
    assert.match(lines.at(-1) as string, /: 60\/60 moved \(100%\), [\d.]+ msg\/s, ETA 0s$/);

    const task = await client.getTask(id);
    assert.deepEqual([task.state, task.moved], ["done", 60]);
    const [dlq, back] = await Promise.all([client.getQueue("redriven-dlq"), client.getQueue("redriven")]);
    assert.deepEqual([dlq.stats.available, back.stats.available], [0, 60]);
  });

  test("dlq redrive --to --max --no-wait --json prints the started task and returns", async () => {
    await deadLetters("partial", "partial-dlq", 5);
    await client.putQueue("partial-elsewhere");
    const args = ["dlq", "redrive", "partial-dlq", "--to", "partial-elsewhere", "--max", "2"];
    const result = await hopper([...args, "--no-wait", "--json"]);
    assert.equal(result.code, 0, result.stderr);
    const { task } = JSON.parse(result.stdout);
    assert.deepEqual([task.queue, task.to, task.total], ["partial-dlq", "partial-elsewhere", 2]);
    assert.equal(result.stderr, "", "no progress when not waiting");
    for (let polls = 0; (await client.getTask(task.id)).state === "running" && polls < 50; polls++) {
      await delay(20);
    }
    assert.equal((await client.getQueue("partial-elsewhere")).stats.available, 2);
  });

  test("a failed redrive exits 1 and prints the task's error", async () => {
    await client.putQueue("orphaned");
    await client.send("orphaned", [{ body: 1, headers: { "x-original-queue": "long-gone" } }]);
    const result = await hopper(["dlq", "redrive", "orphaned"]);
    assert.equal(result.code, 1, result.stdout);
    assert.match(result.stdout, /^redrive \S+ failed: moved 0 of 1 from orphaned/m);
    assert.match(result.stderr, /^error queue_not_found: Queue "long-gone" does not exist\.$/m);
    const json = await hopper(["dlq", "redrive", "orphaned", "--json"]);
    assert.equal(json.code, 1);
    assert.equal(JSON.parse(json.stdout).error.code, "queue_not_found");
  });

  test("Ctrl-C during dlq redrive cancels the task and exits 130", async () => {
    await deadLetters("interrupted", "interrupted-dlq", 100);
    const running = startCli(["dlq", "redrive", "interrupted-dlq", "--rate", "20", "--url", server.url]);
    // Wait for progress, so the interrupt comes while the task is moving messages.
    for (let polls = 0; !/: [1-9]\d*\/100 moved/.test(running.stderr()) && polls < 250; polls++) {
      await delay(20);
    }
    running.child.kill("SIGINT");
    const result = await running.result;
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /^cancelling the redrive/m);
    const id = /^started redrive (\S+):/m.exec(result.stdout)?.[1] as string;
    const printed = new RegExp(`^redrive ${id} cancelled: moved (\\d+) of 100`, "m").exec(result.stdout);
    assert.ok(printed, result.stdout);
    await delay(300);
    const task = await client.getTask(id);
    assert.equal(task.state, "cancelled");
    assert.ok(task.moved > 0 && task.moved < 100, `moved ${task.moved}`);
    assert.equal(Number(printed[1]), task.moved, "the printed count is where it stopped");
    assert.equal((await client.getQueue("interrupted")).stats.available, task.moved);
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
