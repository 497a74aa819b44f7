/**
 * A purge of a large queue on SQLite does not stop the real server (invariants rule 20a): calls on
 * another queue, made while the purge runs, are answered between its steps instead of after it.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, putQueue, queuePath, send } from "../testing/http-calls.js";
import {
  createTempDir,
  type ServerProcess,
  startServerProcess,
  type TempDir,
} from "../testing/server-process.js";

/** Twelve steps of limits.purgeStepMax (5,000): long enough to call in between many times. */
const bigCount = 60_000;
const sendBatch = 100;
const sendsAtOnce = 20;
/** Stats calls answered before the purge's own answer: a purge in one commit allows one or two. */
const answeredDuringPurgeMin = 3;

let dir: TempDir;
let server: ServerProcess;

before(async () => {
  dir = createTempDir();
  server = await startServerProcess({ dataFile: dir.file("hopper.db"), durability: "os" });
  await putQueue(server, "big");
  await putQueue(server, "other");
  const batches = Array.from({ length: bigCount / sendBatch }, (_, i) => i);
  for (let i = 0; i < batches.length; i += sendsAtOnce) {
    await Promise.all(
      batches.slice(i, i + sendsAtOnce).map(() =>
        send(
          server,
          "big",
          Array.from({ length: sendBatch }, () => ({ body: { pad: "x".repeat(200) } })),
        ),
      ),
    );
  }
});

after(async () => {
  await server?.stop();
  dir?.remove();
});

test("calls on another queue are answered while a large purge runs, between its steps", async () => {
  let purgeAnswered = false;
  const purge = call(server, "POST", queuePath("big", "/purge")).then((answer) => {
    purgeAnswered = true;
    return answer;
  });
  let answeredDuringPurge = 0;
  while (!purgeAnswered) {
    const answer = await call(server, "GET", queuePath("other"));
    assert.equal(answer.status, 200);
    if (!purgeAnswered) answeredDuringPurge++;
  }
  const answer = await purge;
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body, { purged: bigCount });
  assert.ok(
    answeredDuringPurge >= answeredDuringPurgeMin,
    `${answeredDuringPurge} calls answered while the purge ran; one commit for the whole purge allows one or two`,
  );
  const stats = await call(server, "GET", queuePath("big"));
  assert.equal((stats.body as { stats: { available: number; purged: number } }).stats.available, 0);
  assert.equal((stats.body as { stats: { purged: number } }).stats.purged, bigCount);
});
