/**
 * Measures how many flushes per second the disk under the data file can do, the way a WAL commit
 * uses it: append 4 KiB, then fdatasync. A confirm rate far above this rate can only come from
 * commits that share one flush, so the probe and the confirm rate are measured in the same run.
 */
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { probeFlushesMax, probeWriteBytes } from "./limits.js";
import { type Percentiles, percentiles } from "./statistics.js";

export interface FsyncProbeResult {
  durationMs: number;
  flushes: number;
  flushesPerSecond: number;
  /** Latency of one write + fdatasync, in ms. */
  latencyMs: Percentiles;
}

/** Appends and flushes in a loop for `durationMs` in a scratch file under `directory`, then removes it. */
export function probeFsync(directory: string, durationMs = 1000): FsyncProbeResult {
  const path = join(directory, "fsync-probe.bin");
  const block = Buffer.alloc(probeWriteBytes, 0x5a);
  const latencies: number[] = [];
  const fd = openSync(path, "a");
  try {
    const startedAt = performance.now();
    let now = startedAt;
    while (now - startedAt < durationMs && latencies.length < probeFlushesMax) {
      writeSync(fd, block);
      fdatasyncSync(fd);
      const flushedAt = performance.now();
      latencies.push(flushedAt - now);
      now = flushedAt;
    }
    const elapsedMs = now - startedAt;
    return {
      durationMs: elapsedMs,
      flushes: latencies.length,
      flushesPerSecond: (latencies.length * 1000) / elapsedMs,
      latencyMs: percentiles(latencies),
    };
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
}
