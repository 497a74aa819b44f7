/**
 * What the machine's disks did over a workload, from the kernel's per-device counters
 * (/proc/diskstats): flush requests completed (each fsync or fdatasync that reached the device, from
 * whichever process: the broker's, or PostgreSQL's for the targets that store there) and bytes
 * written. Every target on this machine writes to the same disk, so the figures compare across
 * targets — the "fsyncs per confirmed message" for the peers as well as for Hopper — with one
 * caveat: they count the whole machine, so another process's writes in the same seconds count too.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface DiskCounters {
  /** Flush requests completed; undefined when the kernel does not report them (before Linux 5.5). */
  flushes: number | undefined;
  bytesWritten: number;
}

/** Bytes per sector in /proc/diskstats, whatever the device's own sector size. */
const sectorBytes = 512;

/** Devices that hold no data of a broker: loop files, RAM disks, compressed swap. */
const virtualDevice = /^(loop|ram|zram)\d*$/;

/**
 * Sums the counters of `disks` in the text of /proc/diskstats. A line is `major minor name` and then
 * the counters: sectors written is the 7th, flush requests completed the 16th (since Linux 5.5).
 */
export function parseDiskstats(text: string, disks: ReadonlySet<string>): DiskCounters {
  let flushes: number | undefined = 0;
  let bytesWritten = 0;
  for (const line of text.split("\n")) {
    const fields = line.trim().split(/\s+/);
    const name = fields[2];
    if (name === undefined || !disks.has(name)) continue;
    const counters = fields.slice(3).map(Number);
    bytesWritten += (counters[6] ?? 0) * sectorBytes;
    const deviceFlushes = counters[15];
    flushes = flushes === undefined || deviceFlushes === undefined ? undefined : flushes + deviceFlushes;
  }
  return { flushes, bytesWritten };
}

/** The machine's whole disks (/sys/block lists no partitions), without the virtual ones. */
function wholeDisks(): Set<string> {
  return new Set(readdirSync("/sys/block").filter((name) => !virtualDevice.test(name)));
}

/** The counters now, or undefined where there is no /proc/diskstats (not Linux). */
export function readDiskCounters(): DiskCounters | undefined {
  try {
    return parseDiskstats(readFileSync("/proc/diskstats", "utf8"), wholeDisks());
  } catch {
    return undefined;
  }
}

/** after − before; flushes stay undefined if either reading lacked them. */
export function diskDelta(before: DiskCounters, after: DiskCounters): DiskCounters {
  return {
    flushes:
      before.flushes === undefined || after.flushes === undefined
        ? undefined
        : after.flushes - before.flushes,
    bytesWritten: after.bytesWritten - before.bytesWritten,
  };
}
