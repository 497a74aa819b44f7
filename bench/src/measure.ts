/**
 * What a workload cost, measured around it: CPU by process, the target's counters, the store's group
 * commits, PostgreSQL traffic, the disks' flushes and writes.
 */
import { type CpuSpent, measureCpu } from "./cpu.js";
import { type DiskCounters, diskDelta, readDiskCounters } from "./disk-activity.js";
import type { ConsumerMode } from "./options.js";
import type { PgWireCounter, WireCounts } from "./pg-wire-counter.js";
import type { BackendWatch } from "./postgres.js";
import type { QueueTarget } from "./target.js";

/** What every workload is given besides its own parameters. */
export interface WorkloadContext {
  target: QueueTarget;
  /** Finds the target's PostgreSQL backends; undefined for SQLite. */
  backends: BackendWatch | undefined;
  /** Counts the target's PostgreSQL round trips and statements, with --count-round-trips. */
  wireCounter: PgWireCounter | undefined;
  /** How consumers get messages: pull (every target) or push (Hopper's WebSocket consumer). */
  consumer: ConsumerMode;
}

export interface WorkloadCosts {
  cpu: CpuSpent;
  /** The target's own counters over the workload (Hopper: HTTP requests by kind). */
  counters: Record<string, number>;
  /** Round trips and statements sent to PostgreSQL over the workload, when counted. */
  wire: WireCounts | undefined;
  /** Hopper on SQLite: commits and store calls committed over the workload (from `/metrics`). */
  store: { commits: number; jobs: number } | undefined;
  /** The machine's disks over the workload (flushes, bytes written); undefined without /proc/diskstats. */
  disk: DiskCounters | undefined;
}

export async function startMeasuring(
  context: WorkloadContext,
): Promise<{ finish(): Promise<WorkloadCosts> }> {
  const { target, wireCounter } = context;
  const countersBefore = target.counters();
  const wireBefore = wireCounter?.snapshot();
  const storeBefore = await target.storeCounters?.();
  const diskBefore = readDiskCounters();
  const cpu = await measureCpu({
    brokerPids: target.brokerPids,
    backends: context.backends,
    postgresAppName: target.postgresAppName,
  });
  return {
    async finish() {
      const cpuSpent = await cpu.finish();
      const diskAfter = readDiskCounters();
      const wireAfter = wireCounter?.snapshot();
      const storeAfter = await target.storeCounters?.();
      return {
        cpu: cpuSpent,
        counters: difference(countersBefore, target.counters()),
        wire:
          wireBefore && wireAfter
            ? {
                roundTrips: wireAfter.roundTrips - wireBefore.roundTrips,
                statements: difference(wireBefore.statements, wireAfter.statements),
              }
            : undefined,
        store:
          storeBefore && storeAfter
            ? { commits: storeAfter.commits - storeBefore.commits, jobs: storeAfter.jobs - storeBefore.jobs }
            : undefined,
        disk: diskBefore && diskAfter ? diskDelta(diskBefore, diskAfter) : undefined,
      };
    },
  };
}

/** after − before for every name, leaving out names that did not change. */
function difference(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const changed: Record<string, number> = {};
  for (const [name, value] of Object.entries(after)) {
    const delta = value - (before[name] ?? 0);
    if (delta !== 0) changed[name] = delta;
  }
  return changed;
}
