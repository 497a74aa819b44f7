/**
 * The child process of append-log.test.ts's crash test. It appends numbered records to a fresh log in
 * a tight loop, calls flush() every few records (several flushes in flight, so they coalesce), starts a
 * rewrite now and then (the snapshot is every record so far, so replay gives the same numbers), and
 * after each flush resolves prints the highest record number it made durable, one per line, until the
 * parent kills it with SIGKILL.
 *
 *   node append-log-crash-child.js <dir>
 */
import { fileURLToPath } from "node:url";
import { AppendLog } from "../store/log/append-log.js";

export const crashRecordBytes = 200;
/** Small, so that the log rolls several times before it is killed. */
export const crashSegmentBytesMax = 64 * 1024;
const recordsPerFlush = 10;
/** Flushes in flight at once: bounds the records held in memory while the disk catches up. */
const flushesInFlightMax = 16;
const recordsPerRewrite = 2000;
/** The child stops by itself if no one kills it, so a broken parent leaves no process behind. */
const lifetimeMsMax = 30_000;

/** Record `number`: the number in its first 4 bytes, then bytes derived from it, so replay can check
 * every byte. */
export function crashRecord(number: number): Buffer {
  const record = Buffer.allocUnsafe(crashRecordBytes);
  record.writeUInt32LE(number, 0);
  for (let index = 4; index < crashRecordBytes; index++) record[index] = (number * 31 + index) & 0xff;
  return record;
}

function run(dir: string): void {
  const log = AppendLog.open({ dir, segmentBytesMax: crashSegmentBytesMax }, () => {
    throw new Error("the crash child starts on an empty directory");
  });
  const records: Buffer[] = [];
  let number = 0;
  let flushesInFlight = 0;
  let rewriting = false;

  const appendSome = (): void => {
    while (flushesInFlight < flushesInFlightMax) {
      for (let count = 0; count < recordsPerFlush; count++) {
        number += 1;
        const record = crashRecord(number);
        records.push(record);
        log.append(record);
      }
      const durableNumber = number;
      flushesInFlight += 1;
      void log.flush().then(() => {
        // A pipe's writes are synchronous on Linux: the parent has the line before anything else runs.
        process.stdout.write(`${durableNumber}\n`);
        flushesInFlight -= 1;
        setImmediate(appendSome);
      });
      if (number % recordsPerRewrite === 0 && !rewriting) {
        rewriting = true;
        void log.rewrite(records.slice()).then(() => {
          rewriting = false;
        });
      }
    }
  };
  appendSome();
  setTimeout(() => process.exit(2), lifetimeMsMax).unref();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2];
  if (dir === undefined) throw new Error("usage: append-log-crash-child.js <dir>");
  run(dir);
}
