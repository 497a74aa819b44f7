/**
 * Helpers of the append log's tests (store/log/append-log*.test.ts): temporary directories, records
 * that show a misplaced byte, segment files by name, and an io whose first fdatasync waits.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { AppendLog, type AppendLogOptions } from "../store/log/append-log.js";
import { type AppendLogIo, fileIo } from "../store/log/append-log-io.js";
import type { SegmentFile } from "../store/log/log-format.js";

/** A new temporary directory, removed when the test ends. */
export function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "hopper-append-log-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `size` bytes that differ with `seed`, so a record in the wrong place or with a wrong byte shows. */
export function payload(size: number, seed: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let index = 0; index < size; index++) bytes[index] = (seed * 131 + index * 7) & 0xff;
  return bytes;
}

/** `count` records of 100 bytes, payload(100, 0) to payload(100, count - 1). */
export function records100(count: number): Buffer[] {
  return Array.from({ length: count }, (_, index) => payload(100, index));
}

/** The replay callback of a log that must be new: any record fails the test. */
export function noReplay(): void {
  assert.fail("a new log replays nothing");
}

/** Opens the log, collecting a copy of each record it replays. */
export function openLog(options: AppendLogOptions): { log: AppendLog; records: Buffer[] } {
  const records: Buffer[] = [];
  const log = AppendLog.open(options, (record) => records.push(Buffer.from(record)));
  return { log, records };
}

/** The records a reopen of the log replays, the log closed again. */
export async function reopenRecords(options: AppendLogOptions): Promise<Buffer[]> {
  const { log, records } = openLog(options);
  await log.close();
  return records;
}

/** The segment files of a log directory, in order. */
export function segmentNames(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort();
}

/** The path of segment `seq`, named as log-format.ts names it. */
export function segmentPath(dir: string, seq: number): string {
  return join(dir, `${String(seq).padStart(20, "0")}.log`);
}

/** Inverts one byte of a file, in place. */
export function flipByte(path: string, offset: number): void {
  const bytes = readFileSync(path);
  bytes[offset] = (bytes[offset] ?? 0) ^ 0xff;
  writeFileSync(path, bytes);
}

/** A promise with its resolve in hand. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}

/** A pending promise, with its resolve. */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((resolvePromise) => {
    resolve = resolvePromise;
  });
  return { promise, resolve };
}

/** An io whose first fdatasync waits for `gate`; `firstSyncStarted` resolves when it is reached. */
export function gatedFirstSync(): {
  io: Partial<AppendLogIo>;
  firstSyncStarted: Deferred<void>;
  gate: Deferred<void>;
} {
  const firstSyncStarted = deferred();
  const gate = deferred();
  let syncs = 0;
  const io = {
    async sync(file: SegmentFile) {
      syncs += 1;
      if (syncs === 1) {
        firstSyncStarted.resolve();
        await gate.promise;
      }
      await fileIo.sync(file);
    },
  };
  return { io, firstSyncStarted, gate };
}

/** Appends `records`, flushing after every `perFlush` of them. */
export async function appendFlushing(
  log: AppendLog,
  records: readonly Buffer[],
  perFlush: number,
): Promise<void> {
  for (let index = 0; index < records.length; index++) {
    log.append(records[index] ?? assert.fail());
    if ((index + 1) % perFlush === 0) await log.flush();
  }
  await log.flush();
}
