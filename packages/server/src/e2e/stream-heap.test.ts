/**
 * The log store keeps a stream's records in its segment files, not in memory (docs/streams.md "Where
 * records live"): a server process with a 256 MiB heap (`--max-old-space-size=256`) takes 512 MiB of
 * records, serves every one of them back from offset 0 byte for byte, and does so again after a
 * restart, whose replay places the records without loading them. The process's peak resident memory
 * stays below the heap cap plus 192 MiB, since the cap alone does not bound Buffers.
 *
 * HOPPER_TEST_STREAM_MIB sets the stream's size in MiB (default 512), so that a slow CI machine can run
 * a smaller one; the heap cap stays 256 MiB.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { e2eStores } from "../testing/e2e-stores.js";
import { call, results } from "../testing/http-calls.js";
import { patternedBody } from "../testing/log-store-helpers.js";
import { type ServerProcess, startServerProcess } from "../testing/server-process.js";

const streamMiB = Number(process.env.HOPPER_TEST_STREAM_MIB ?? 512);
const heapMiB = 256;
const recordBytes = 64 * 1024;
/** 100 records of 64 KiB: a request of 8.5 MiB of base64, under the 10 MiB request limit. */
const recordsPerAppend = 100;
const records = Math.ceil((streamMiB * 1024 * 1024) / recordBytes);
const callTimeoutMs = 120_000;

async function append(server: ServerProcess, first: number, count: number): Promise<void> {
  const batch = Array.from({ length: count }, (_, i) => ({
    partition: 0,
    bodyBase64: patternedBody(first + i, recordBytes).toString("base64"),
  }));
  const answer = await call(
    server,
    "POST",
    "/v1/streams/big/records",
    { records: batch },
    { timeoutMs: callTimeoutMs },
  );
  const appended = results(answer) as { offset: number }[];
  assert.deepEqual(
    appended.map((result) => result.offset),
    Array.from({ length: count }, (_, i) => first + i),
  );
}

/** Reads offsets [from, to) back page by page, checking each body against what was appended. */
async function readBack(server: ServerProcess, from: number, to: number): Promise<void> {
  for (let offset = from; offset < to; ) {
    const answer = await call(
      server,
      "GET",
      `/v1/streams/big/partitions/0/records?from=${offset}&limit=1000`,
      undefined,
      {
        timeoutMs: callTimeoutMs,
      },
    );
    assert.equal(answer.status, 200, JSON.stringify(answer.body).slice(0, 500));
    const page = answer.body as { records: { offset: number; bodyBase64: string }[] };
    assert.ok(page.records.length > 0, `records from ${offset}`);
    for (const record of page.records) {
      if (record.offset >= to) return;
      assert.equal(record.offset, offset);
      assert.ok(
        Buffer.from(record.bodyBase64, "base64").equals(patternedBody(offset, recordBytes)),
        `record ${offset}`,
      );
      offset++;
    }
  }
}

/** The process's peak resident memory, from /proc (Linux): what the records would fill if it held them,
 * since a Buffer's bytes lie outside the V8 heap that --max-old-space-size caps. */
function peakResidentMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
  assert.ok(Number.isFinite(kib), "VmHWM is in /proc/<pid>/status");
  return kib / 1024;
}

/** Peak resident memory allowed: the heap cap, and room for the runtime, buffers and one request. */
const residentMiBMax = heapMiB + 192;

const log = e2eStores.find((store) => store.name === "log");

test(`log store: ${streamMiB} MiB of stream records served under a ${heapMiB} MiB heap, before and after a restart`, {
  skip: log?.skip,
  timeout: 20 * 60_000,
}, async () => {
  assert.ok(log);
  const opened = await log.open("stream_heap", { env: { NODE_OPTIONS: `--max-old-space-size=${heapMiB}` } });
  let server = await startServerProcess({ ...opened.options, startTimeoutMs: 300_000 });
  try {
    assert.equal((await call(server, "PUT", "/v1/streams/big", { retentionMs: null })).status, 201);
    for (let first = 0; first < records; first += recordsPerAppend)
      await append(server, first, Math.min(recordsPerAppend, records - first));
    await readBack(server, 0, records);
    const peakWritten = peakResidentMiB(server.pid);
    server = await server.restart();
    const stats = (await call(server, "GET", "/v1/streams/big")).body as {
      stats: { partitions: { next: number; bytes: number }[] };
    };
    assert.deepEqual(
      [stats.stats.partitions[0]?.next, stats.stats.partitions[0]?.bytes],
      [records, records * recordBytes],
    );
    await readBack(server, 0, records);
    const peakReplayed = peakResidentMiB(server.pid);
    console.log(
      `peak resident memory: ${peakWritten.toFixed(0)} MiB writing and reading, ${peakReplayed.toFixed(0)} MiB after the restart, for ${streamMiB} MiB of records`,
    );
    assert.ok(
      peakWritten < residentMiBMax && peakReplayed < residentMiBMax,
      `peak resident ${peakWritten} and ${peakReplayed} MiB, allowed ${residentMiBMax}`,
    );
    assert.equal(
      server.exitStatus(),
      undefined,
      `the server is still running: ${server.stderr().slice(-2000)}`,
    );
  } finally {
    await server.stop();
    await opened.close();
  }
});
