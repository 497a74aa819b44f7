/**
 * `hopper stream …` end to end: the compiled CLI against a real `hopper serve`. What each command
 * prints is checked, and what it did is checked again through the typed client.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HopperClient } from "@hopper/client";
import { type RunOptions, runCli } from "../testing/cli-process.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";
import { resetTarget, streamAttributesFromFlags } from "./stream-commands.js";

test("stream create flags become the attributes given, and only those", () => {
  assert.deepEqual(streamAttributesFromFlags({ partitions: 3, retention: "none", retentionRecords: 10 }), {
    partitions: 3,
    retentionMs: null,
    retentionRecords: 10,
  });
  assert.deepEqual(["earliest", "latest", "42", "2026-01-01T00:00:00Z"].map(resetTarget), [
    "earliest",
    "latest",
    { offset: 42 },
    { time: "2026-01-01T00:00:00.000Z" },
  ]);
  assert.throws(() => resetTarget("soon"), /--to is earliest/);
});

describe("hopper stream commands", () => {
  let dir: TempDir;
  let server: ServerProcess;
  let client: HopperClient;
  const hopper = (args: string[], options: RunOptions = {}) =>
    runCli([...args, "--url", server.url], options);

  before(async () => {
    dir = createTempDir("hopper-cli-stream-");
    server = await startServerProcess({ dataFile: dir.file("hopper.db") });
    client = new HopperClient({ url: server.url });
  });

  after(async () => {
    await server?.stop();
    dir?.remove();
  });

  test("create, append, read --from, stats and ls", async () => {
    const created = await hopper(["stream", "create", "audit", "--partitions", "2", "--retention", "none"]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /^stream audit, 2 partitions$/m);
    const appended = await hopper([
      "stream",
      "append",
      "audit",
      '{"n":1}',
      "--partition",
      "1",
      "--header",
      "h=v",
    ]);
    assert.equal(appended.code, 0, appended.stderr);
    assert.match(appended.stdout, /^partition 1, offset 0$/m);
    await hopper(["stream", "append", "audit", "plain words", "--partition", "1", "--key", "k"]);
    const read = await hopper(["stream", "read", "audit", "1", "--from", "0"]);
    assert.equal(read.code, 0, read.stderr);
    const lines = read.stdout.trim().split("\n");
    assert.equal(lines.length, 2);
    assert.match(lines[0] as string, /^0\t\S+\t-\t\{"n":1\}$/);
    assert.match(lines[1] as string, /^1\t\S+\tk\t/);
    const fromTime = await hopper([
      "stream",
      "read",
      "audit",
      "1",
      "--from-time",
      new Date(Date.now() + 60_000).toISOString(),
    ]);
    assert.equal(fromTime.stdout.trim(), "", "nothing appended after a minute from now");
    const stats = await hopper(["stream", "stats", "audit"]);
    assert.match(stats.stdout, /partition 1: offsets 0\.\.2 \(2 records/);
    assert.match((await hopper(["stream", "ls"])).stdout, /^audit\t2 partitions\t2 records$/m);
    const refused = await hopper(["stream", "read", "audit", "1", "--from", "9"]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /offset_out_of_range/);
  });

  test("group ls shows lag; group reset moves the committed offsets", async () => {
    await client.streams.put("jobs");
    await client.streams.append("jobs", [{ body: 1 }, { body: 2 }, { body: 3 }]);
    const fetched = await client.streams.fetch("jobs", "g", { member: "m" });
    await client.streams.commit("jobs", "g", {
      member: "m",
      generation: fetched.generation,
      offsets: [{ partition: 0, offset: 1 }],
    });
    assert.match(
      (await hopper(["stream", "group", "ls", "jobs"])).stdout,
      /^g\tgeneration \d+\t1 members\tlag 2$/m,
    );
    const refused = await hopper(["stream", "group", "reset", "jobs", "g", "--to", "latest"]);
    assert.match(refused.stderr, /group_in_use/);
    const reset = await hopper(["stream", "group", "reset", "jobs", "g", "--to", "latest", "--force"]);
    assert.equal(reset.code, 0, reset.stderr);
    assert.match(reset.stdout, /^partition 0: committed 3, lag 0$/m);
    assert.equal((await client.streams.getGroup("jobs", "g")).partitions[0]?.committed, 3);
  });
});
