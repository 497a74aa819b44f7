/**
 * What a stream's consumer groups do at the broker (docs/streams.md "Consumer groups"): checks every
 * input, and makes a fetch wait (`waitMs`) on the stream's topic (wake.ts) until records are appended.
 * What a group means (leases, spread, generations, commits) is model/stream-group.ts's, applied by the
 * store.
 */
import type { Clock } from "../clock.js";
import { groupNotFound, HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { StoredStreamRecord } from "../model/stream.js";
import type { CommitResult, GroupInfo, GroupResetTarget, GroupStart } from "../model/stream-group.js";
import type { ClusterLink } from "../store/cluster-link.js";
import type { StreamStore } from "../store/stream-store.js";
import { checkName } from "./queue-context.js";
import type { Wakeups } from "./wake.js";

/** What a stream broker needs of the store: the streams, and the cluster's housekeeping leader. */
export type StreamBrokerStore = StreamStore & Pick<ClusterLink, "housekeepingLeader" | "watch">;

/** The topic of a stream's wake-ups (wake.ts): it advances whenever records may have been appended. */
export function streamTopic(stream: string): string {
  return `stream:${stream}`;
}

export interface FetchOptions {
  max?: number | undefined;
  waitMs?: number | undefined;
  start?: GroupStart | undefined;
  /** Ends the wait when the caller goes away. */
  signal?: AbortSignal | undefined;
}

function checkCount(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new HopperError("invalid_request", `${name} must be an integer from ${min} to ${max}.`, {
      [name]: value,
    });
}

export class StreamGroupBroker {
  constructor(
    private readonly store: StreamBrokerStore,
    private readonly clock: Clock,
    private readonly wake: Wakeups,
    private readonly stopped: () => boolean,
  ) {}

  /**
   * A member's fetch: renews its lease, takes or gives back partitions for its share, and answers the
   * records from its positions. With `waitMs` and nothing to read, it waits for an append (or the end
   * of the wait), renewing the lease when it looks again.
   */
  async fetch(
    name: string,
    group: string,
    member: string,
    options: FetchOptions,
  ): Promise<{ generation: number; records: StoredStreamRecord[] }> {
    checkName(name);
    checkName(group);
    checkName(member);
    const max = options.max ?? limits.streamReadLimitDefault;
    checkCount("max", max, 1, limits.streamReadLimitMax);
    const waitMs = options.waitMs ?? 0;
    checkCount("waitMs", waitMs, 0, limits.waitMsMax);
    const topic = streamTopic(name);
    const deadline = this.clock.now() + waitMs;
    // Bounded: each turn answers, or waits until the head moves or the deadline passes.
    for (;;) {
      // The head is read before the store (wake.ts): an append between the two is never missed.
      const position = this.wake.head(topic);
      const fetched = await this.store.streamGroupFetch({
        name,
        group,
        member,
        max,
        bytesMax: limits.streamReadBytesMax,
        start: options.start ?? "earliest",
        now: this.clock.now(),
      });
      const leftMs = deadline - this.clock.now();
      if (fetched.records.length > 0 || leftMs <= 0 || this.stopped()) return fetched;
      const end = await this.wake.waitAfter(topic, position, { timeoutMs: leftMs, signal: options.signal });
      if (end === "cancelled" || this.stopped()) return fetched;
    }
  }

  commit(
    name: string,
    group: string,
    member: string,
    generation: number,
    offsets: readonly { partition: number; offset: number }[],
  ): Promise<CommitResult[]> {
    checkName(name);
    checkName(group);
    checkName(member);
    checkCount("generation", generation, 0, Number.MAX_SAFE_INTEGER);
    checkCount("offsets", offsets.length, 1, limits.streamPartitionsMax);
    for (const { offset } of offsets) checkCount("offset", offset, 0, Number.MAX_SAFE_INTEGER);
    return this.store.streamGroupCommit({ name, group, member, generation, offsets, now: this.clock.now() });
  }

  leave(name: string, group: string, member: string): Promise<{ left: boolean }> {
    checkName(name);
    checkName(group);
    checkName(member);
    return this.store.streamGroupLeave({ name, group, member, now: this.clock.now() });
  }

  listGroups(name: string): Promise<GroupInfo[]> {
    checkName(name);
    return this.store.streamGroupList({ name, now: this.clock.now() });
  }

  async getGroup(name: string, group: string): Promise<GroupInfo> {
    checkName(group);
    const found = (await this.listGroups(name)).find((info) => info.name === group);
    if (!found) throw groupNotFound(name, group);
    return found;
  }

  deleteGroup(name: string, group: string): Promise<void> {
    checkName(name);
    checkName(group);
    return this.store.streamGroupDelete({ name, group });
  }

  /** Moves the committed offsets; refused (`group_in_use`) while members hold partitions, unless `force`. */
  resetGroup(name: string, group: string, to: GroupResetTarget, force: boolean): Promise<GroupInfo> {
    checkName(name);
    checkName(group);
    if (typeof to === "object" && "offset" in to) checkCount("offset", to.offset, 0, Number.MAX_SAFE_INTEGER);
    return this.store.streamGroupReset({ name, group, to, force, now: this.clock.now() });
  }
}
