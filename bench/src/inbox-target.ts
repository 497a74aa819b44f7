/**
 * What the inbox bench (inbox.ts) needs of a system under test: Hopper's inboxes (inbox-hopper.ts) or
 * what a user would build instead, per-recipient Redis Streams (peers/redis-inbox.ts). Every recipient
 * has one ordered log; a device reads its recipient's log from a cursor.
 */

/** One entry as a device received it: its body (the bench's JSON) and when it reached the device. */
export type OnDeviceEntry = (recipient: string, bodyJson: unknown, receivedAtMs: number) => void;

export interface ReplayTiming {
  /** A new connection opened → the device caught up (Hopper: `inbox.live`; Redis: a short XREAD). */
  connectToLiveMs: number;
  /** The subscribe (or the first XREAD) sent → caught up. */
  requestToLiveMs: number;
  /** Entries the device received before it was caught up. */
  entries: number;
}

export interface IdleDevices {
  /** Connections that carry the subscriptions. */
  connections: number;
  close(): Promise<void>;
}

export interface InboxTarget {
  readonly label: string;
  readonly versions: string;
  /** What an append's answer and a device's read mean here. */
  readonly semantics: string;
  /** The server process: its CPU and RSS are read from /proc. */
  readonly pid: number;
  /** Appends one message to every recipient named; resolves once it is durable. */
  append(id: string, recipients: readonly string[], bodyJson: string): Promise<void>;
  /** Makes the device known at cursor 0 before its recipient's backlog is written (a device that was online once). */
  prepareDevice(recipient: string, device: string): Promise<void>;
  /** A device reconnects with cursor 0 and reads until it is caught up; it must receive `expected` entries. */
  replay(recipient: string, device: string, expected: number): Promise<ReplayTiming>;
  /** One device per recipient, each reading live; resolves once every one is subscribed. */
  subscribeDevices(recipients: readonly string[], onEntry: OnDeviceEntry): Promise<() => Promise<void>>;
  /** One idle device per recipient, `perConnection` of them on each connection. */
  openIdleDevices(recipients: readonly string[], perConnection: number): Promise<IdleDevices>;
  /** Hopper: the store's group commits and the calls they carried so far (`/metrics`). */
  storeCommits?(): Promise<{ commits: number; jobs: number }>;
  close(): Promise<void>;
}

/** Resident set size of `pid` in bytes, from /proc/<pid>/status (VmRSS). */
export async function residentBytes(pid: number): Promise<number> {
  const { readFileSync } = await import("node:fs");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!match) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Runs `work` over `items` with at most `concurrency` at a time, in order of start. */
export async function forEachLimited<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
