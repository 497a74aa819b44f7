/**
 * Damage to a SQLite server's files between two runs, through the real server process and the real
 * client (docs/reliability.md): a body edited in the database file is never delivered; a damaged
 * b-tree page is refused at start unless --skip-integrity-check; and a damaged frame early in a WAL
 * left by `kill -9`, which makes SQLite drop every later commit, is refused at start.
 */
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { test } from "node:test";
import { HopperClient } from "@hopper/client";
import Database from "better-sqlite3";
import { commitCountPath, readCommitCount } from "../store/sqlite/commit-count.js";
import {
  flipByte,
  framePageOffset,
  framesCopied,
  overwritePage,
  replaceBytes,
  walFrames,
} from "../testing/file-damage.js";
import {
  createTempDir,
  type ServerProcess,
  type ServerProcessOptions,
  startServerProcess,
} from "../testing/server-process.js";

/** Runs `body` with a server on a fresh data file, in a directory removed afterwards. */
async function onFreshServer(
  body: (dataFile: string, server: ServerProcess, client: HopperClient) => Promise<void>,
): Promise<void> {
  const dir = createTempDir();
  try {
    const dataFile = dir.file("hopper.db");
    const server = await startServerProcess({ dataFile });
    await body(dataFile, server, new HopperClient({ url: server.url }));
  } finally {
    dir.remove();
  }
}

/** Resolves with the error a start that must fail gave, which includes the server's stderr. */
async function refusedStart(options: ServerProcessOptions): Promise<string> {
  const server = await startServerProcess(options).then(
    (started) => started,
    (error: unknown) => error as Error,
  );
  if (!(server instanceof Error)) {
    await server.stop();
    assert.fail("the server started on a damaged file");
  }
  return server.message;
}

test("e2e sqlite: AMOUNT-1000-EUR edited to AMOUNT-9000-EUR in the file is never received", () =>
  onFreshServer(async (dataFile, first, firstClient) => {
    let server = first;
    let client = firstClient;
    await client.putQueue("orders-dlq");
    await client.putQueue("orders", { deadLetter: { queue: "orders-dlq", maxDeliveries: 5 } });
    await client.putQueue("ledger");
    for (const queue of ["orders", "ledger"])
      await client.send(queue, [{ body: { amount: "AMOUNT-1000-EUR" } }]);
    // A graceful stop checkpoints the WAL into the database file and removes it: the bodies are there.
    await server.stop();
    assert.equal(replaceBytes(dataFile, "AMOUNT-1000-EUR", "AMOUNT-9000-EUR"), 2);

    server = await startServerProcess({ dataFile });
    client = new HopperClient({ url: server.url });
    assert.deepEqual(await client.receive("orders", { max: 10, waitMs: 0 }), []);
    assert.deepEqual(await client.receive("ledger", { max: 10, waitMs: 0 }), []);

    // With a dead-letter queue it lands there, saying why, and is not delivered from there either.
    const [dead] = await client.peek("orders-dlq");
    assert.equal(dead?.headers["x-dead-letter-reason"], "corrupt");
    assert.equal(dead?.corrupt, true);
    assert.deepEqual(await client.receive("orders-dlq", { max: 10, waitMs: 0 }), []);

    // Without one it stays, counted, shown by peek as corrupt, and a purge removes it.
    const stats = (await client.getQueue("ledger")).stats;
    assert.deepEqual([stats.corrupt, stats.available, stats.inFlight], [1, 0, 0]);
    const [kept] = await client.peek("ledger");
    assert.equal(kept?.corrupt, true);
    assert.equal(kept?.body, undefined, "a damaged body is not shown as JSON");
    assert.match(Buffer.from(kept?.bodyBase64 ?? "", "base64").toString(), /AMOUNT-9000-EUR/);
    assert.deepEqual(await client.purge("ledger"), { purged: 1 });
    assert.equal((await client.getQueue("ledger")).stats.corrupt, 0);
    await server.stop();
  }));

test("e2e sqlite: a page of the database overwritten is refused at start; --skip-integrity-check starts", () =>
  onFreshServer(async (dataFile, server, client) => {
    await client.putQueue("q");
    const body = { text: "x".repeat(900) };
    for (let i = 0; i < 4; i++)
      await client.send(
        "q",
        Array.from({ length: 50 }, () => ({ body })),
      );
    await server.stop();
    const pages = statSync(dataFile).size / 4096;
    overwritePage(dataFile, Math.floor(pages / 2), () => 0);

    const refusal = await refusedStart({ dataFile });
    assert.ok(refusal.includes(`${dataFile}: `), refusal);
    assert.match(refusal, /refuses to serve it/);
    assert.match(refusal, /quick_check/);
    const skipped = await startServerProcess({ dataFile, skipIntegrityCheck: true });
    await skipped.stop();
  }));

test("e2e sqlite: one byte changed in an early WAL frame after kill -9 is refused at start, not served short", () =>
  onFreshServer(async (dataFile, server, client) => {
    await client.putQueue("q");
    // A reader holding a snapshot keeps the checkpoint thread from copying later frames into the
    // database; read-only, it never checkpoints as it closes, so the WAL stays as the kill left it.
    const reader = new Database(dataFile, { readonly: true });
    reader.prepare("BEGIN").run();
    reader.prepare("SELECT count(*) FROM queues").get();
    const sends = 10;
    for (let i = 0; i < sends; i++) await client.send("q", [{ body: { i } }]);
    await server.kill9();
    reader.prepare("COMMIT").run();
    reader.close();

    // The first frame the checkpoint thread had not copied: damage there loses the sends after it
    // and leaves the database consistent as of the commit before, which quick_check finds sound.
    const frames = walFrames(`${dataFile}-wal`);
    const copied = framesCopied(`${dataFile}-shm`);
    const uncopied = frames.slice(copied);
    const commits = uncopied.filter((frame) => frame.commitSize > 0);
    assert.ok(
      commits.length >= sends,
      `the WAL holds ${commits.length} uncopied commits, not the ${sends} sends`,
    );
    const recorded = readCommitCount(commitCountPath(dataFile));
    assert.ok(recorded !== undefined && recorded >= sends);
    flipByte(`${dataFile}-wal`, framePageOffset(uncopied[0] as (typeof frames)[0]) + 100);

    const refusal = await refusedStart({ dataFile });
    assert.match(refusal, /refuses to serve it/);
    assert.match(refusal, new RegExp(`but ${dataFile}-commits records that ${recorded} were made`));
    assert.ok(refusal.includes(`${dataFile}-commits`), refusal);
    // The refusal changed nothing: the WAL's frames are all still there for an operator to recover.
    assert.equal(walFrames(`${dataFile}-wal`).length, frames.length);
  }));
