/**
 * Two `hopper serve` processes on one SQLite file: the second refuses to start, naming the file and
 * the first's pid, since their consumers' wake-ups would not cross processes; the first keeps serving;
 * once it stops, or is killed, a new one starts on the file.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, test } from "node:test";
import { HopperClient } from "@hopper/client";
import { createTempDir, startServerProcess, type TempDir } from "../testing/server-process.js";

let dir: TempDir;

before(() => {
  dir = createTempDir();
});

after(() => dir?.remove());

test("a second server on a served SQLite file exits non-zero, naming the file and the first's pid", async () => {
  const dataFile = dir.file("shared.db");
  const first = await startServerProcess({ dataFile });
  try {
    await new HopperClient({ url: first.url }).putQueue("kept");
    const refusal = await startServerProcess({ dataFile }).then(
      async (second) => {
        await second.stop();
        assert.fail("the second server started on a file the first serves");
      },
      (error: Error) => error.message,
    );
    assert.match(refusal, /exited \(code [1-9]\d*, signal null\) before it listened/);
    assert.ok(refusal.includes(`${dataFile} is served by process ${first.pid}`), refusal);

    // The first was not disturbed: it still serves what it held.
    const client = new HopperClient({ url: first.url });
    await client.send("kept", [{ body: "still here" }]);
    assert.equal((await client.getQueue("kept")).stats.available, 1);
  } finally {
    assert.deepEqual(await first.stop(), { code: 0, signal: null });
  }
  assert.ok(!existsSync(`${dataFile}.lock`), "a graceful stop removes the lock file");

  // After the first stopped, a new server starts on the file and finds what the first kept.
  const next = await startServerProcess({ dataFile });
  try {
    assert.equal((await new HopperClient({ url: next.url }).getQueue("kept")).stats.available, 1);
    // A server killed with kill -9 leaves its lock file naming a process that is gone: taken over.
    await next.kill9();
    assert.ok(existsSync(`${dataFile}.lock`));
    const afterCrash = await startServerProcess({ dataFile });
    assert.equal((await new HopperClient({ url: afterCrash.url }).getQueue("kept")).stats.available, 1);
    await afterCrash.stop();
  } finally {
    if (next.exitStatus() === undefined) await next.stop();
  }
});
