/**
 * What an fdatasync costs after a write that grows a file, against one over space written before (a
 * pre-zeroed file): the growing file's new size must reach the disk's journal too. 64 KiB writes, as
 * a log store's flush in W1 writes; two rounds of 400 each, in a scratch file at the repository's root:
 *
 *   node bench/dist/probes/fdatasync-growth.js
 */
import { closeSync, fdatasyncSync, openSync, unlinkSync, writeSync } from "node:fs";
import { fileURLToPath } from "node:url";

const writeBytes = 64 * 1024;
const writes = 400;
const chunk = Buffer.alloc(writeBytes, 7);

function measure(name: string, preZeroed: boolean): void {
  const path = fileURLToPath(new URL(`../../../fdatasync-growth-${process.pid}.bin`, import.meta.url));
  const fd = openSync(path, "w");
  try {
    if (preZeroed) {
      writeSync(fd, Buffer.alloc(writeBytes * writes));
      fdatasyncSync(fd);
    }
    const times: number[] = [];
    for (let i = 0; i < writes; i++) {
      writeSync(fd, chunk, 0, chunk.length, i * writeBytes);
      const started = performance.now();
      fdatasyncSync(fd);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => (times[Math.floor(writes * q)] as number).toFixed(3);
    console.log(`${name}: fdatasync after a 64 KiB write, p50 ${at(0.5)} ms, p90 ${at(0.9)} ms`);
  } finally {
    closeSync(fd);
    unlinkSync(path);
  }
}

for (let round = 0; round < 2; round++) {
  measure("growing the file", false);
  measure("over pre-zeroed space", true);
}
