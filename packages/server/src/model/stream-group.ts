/**
 * A stream's consumer group as the domain knows it (DESIGN.md §5, docs/streams.md "Consumer groups"):
 * a committed offset per partition, each partition leased to one member at a time, and the rules that
 * move leases. Every store keeps a group as this one state and applies these pure functions to it
 * inside its transaction, so what a group means is written once, here.
 *
 * - A member is live while it fetched within the stream's memberTimeoutMs. Fetching renews it.
 * - A live member's share is ⌊partitions ÷ live members⌋, and one more for the first (by name)
 *   `partitions mod members` of them, so no one holds more than ⌈partitions ÷ live members⌉ and every
 *   partition has a place. At its fetch a member gives back what is above its share (the highest
 *   partitions first) and takes free ones (the lowest first) up to it. So a member that joins takes
 *   its share once the holders have fetched again.
 * - A partition is free when it has no holder, or its holder is no longer live (its lease ended).
 * - Each assignment of a partition gets the group's next generation. A commit names the generation
 *   its fetch answered; it is refused (`stale_generation`) for a partition the member no longer holds
 *   or that was assigned again since (Kafka's fencing).
 * - `position` is where the holder's next fetch reads (the offset after the last record it fetched);
 *   a commit beyond it is `commit_beyond_fetched`. A new holder starts at the committed offset, or,
 *   with none, at the partition's oldest (`start: "earliest"`, the default) or next (`"latest"`). A
 *   position that retention passed moves up to the oldest retained offset.
 */
import { HopperError, partitionNotFound } from "../errors.js";
import { bodyByteLength } from "./message.js";
import type { StoredStreamRecord } from "./stream.js";

export interface GroupPartition {
  holder: string | null;
  /** The generation of the partition's current (or last) assignment. */
  generation: number;
  /** The next offset to read, as committed; null: never committed. */
  committed: number | null;
  /** The holder's next fetch reads from here; null while unassigned. */
  position: number | null;
}

export interface GroupState {
  createdAt: number;
  /** The last fetch, commit or reset: idle expiry counts from it. */
  lastActiveAt: number;
  /** The last generation given to an assignment. */
  generation: number;
  /** Each member and when it last fetched. */
  members: Record<string, { lastSeenAt: number }>;
  /** One per partition of the stream, in partition order (a stream that grew gets more at its next
   * use). */
  partitions: GroupPartition[];
}

/** A partition's range, as the group rules need it. */
export interface HeadRange {
  oldest: number;
  next: number;
}

export type GroupStart = "earliest" | "latest";

/** Where a group reset moves the committed offsets. */
export type GroupResetTarget =
  | "earliest"
  | "latest"
  | { offset: number; partition?: number | undefined }
  | { time: number };

export type CommitResult = { ok: true } | { error: HopperError };

/** What a group shows: its members, and per partition the holder, the committed offset and the lag. */
export interface GroupInfo {
  name: string;
  generation: number;
  createdAt: number;
  lastActiveAt: number;
  members: { member: string; lastSeenAt: number; partitions: number[] }[];
  partitions: {
    partition: number;
    holder: string | null;
    generation: number;
    committed: number | null;
    /** Records from the committed offset (or the oldest, with none) to next. */
    lag: number;
  }[];
}

export function newGroupState(now: number): GroupState {
  return { createdAt: now, lastActiveAt: now, generation: 0, members: {}, partitions: [] };
}

function isLive(state: GroupState, member: string, now: number, memberTimeoutMs: number): boolean {
  const seen = state.members[member];
  return seen !== undefined && seen.lastSeenAt > now - memberTimeoutMs;
}

/** Forgets members that are no longer live, and frees what they held; grows to `partitions`. */
function settle(state: GroupState, partitions: number, now: number, memberTimeoutMs: number): void {
  for (const member of Object.keys(state.members)) {
    if (!isLive(state, member, now, memberTimeoutMs)) delete state.members[member];
  }
  while (state.partitions.length < partitions)
    state.partitions.push({ holder: null, generation: 0, committed: null, position: null });
  for (const partition of state.partitions) {
    if (partition.holder !== null && state.members[partition.holder] === undefined) release(partition);
  }
}

/** How many partitions `member` may hold among `members` (all live, `member` one of them). */
function shareOf(members: readonly string[], member: string, partitions: number): number {
  const ranked = [...members].sort();
  const base = Math.floor(partitions / ranked.length);
  return ranked.indexOf(member) < partitions % ranked.length ? base + 1 : base;
}

function release(partition: GroupPartition): void {
  partition.holder = null;
  partition.position = null;
}

/**
 * A member's fetch: renews it, rebalances its share, and answers the partitions it holds with their
 * positions (the caller reads from there and then calls `advance`). `heads`: every partition's range.
 */
export function groupFetch(
  state: GroupState,
  params: {
    member: string;
    now: number;
    memberTimeoutMs: number;
    heads: readonly HeadRange[];
    start: GroupStart;
  },
): { partition: number; position: number }[] {
  const { member, now, heads } = params;
  state.members[member] = { lastSeenAt: now };
  state.lastActiveAt = now;
  settle(state, heads.length, now, params.memberTimeoutMs);
  const share = shareOf(Object.keys(state.members), member, heads.length);
  const held = state.partitions.flatMap((partition, index) => (partition.holder === member ? [index] : []));
  for (const index of held.slice(share)) release(state.partitions[index] as GroupPartition);
  let holding = Math.min(held.length, share);
  for (let index = 0; index < state.partitions.length && holding < share; index++) {
    const partition = state.partitions[index] as GroupPartition;
    if (partition.holder !== null) continue;
    const head = heads[index] as HeadRange;
    partition.holder = member;
    partition.generation = ++state.generation;
    partition.position = partition.committed ?? (params.start === "latest" ? head.next : head.oldest);
    holding++;
  }
  return state.partitions.flatMap((partition, index) => {
    if (partition.holder !== member) return [];
    const head = heads[index] as HeadRange;
    partition.position = Math.min(Math.max(partition.position ?? head.oldest, head.oldest), head.next);
    return [{ partition: index, position: partition.position }];
  });
}

/**
 * What one fetch answers, gathered partition by partition from the positions groupFetch gave: at most
 * `max` records and about `bytesMax` bytes of bodies. `ask` says how much the next read may take (or
 * undefined: nothing to read there, or the answer is full); `add` takes its records and advances the
 * partition's position past them.
 */
export class FetchAnswer {
  readonly records: StoredStreamRecord[] = [];
  private bytes = 0;

  constructor(
    private readonly max: number,
    private readonly bytesMax: number,
  ) {}

  ask(position: number, head: HeadRange): { limit: number; bytesMax: number } | undefined {
    const limit = this.max - this.records.length;
    if (limit <= 0 || this.bytes >= this.bytesMax || position >= head.next) return undefined;
    return { limit, bytesMax: this.bytesMax - this.bytes };
  }

  add(state: GroupState, partition: number, records: readonly StoredStreamRecord[]): void {
    for (const record of records) this.bytes += bodyByteLength(record.body);
    this.records.push(...records);
    const last = records.at(-1);
    const held = state.partitions[partition];
    if (last && held) held.position = last.offset + 1;
  }
}

/** A member's commit of next offsets to read, one result per offset, in order. */
export function groupCommit(
  state: GroupState,
  params: {
    stream: string;
    member: string;
    generation: number;
    offsets: readonly { partition: number; offset: number }[];
    now: number;
    memberTimeoutMs: number;
  },
): CommitResult[] {
  const live = isLive(state, params.member, params.now, params.memberTimeoutMs);
  if (live) state.lastActiveAt = params.now;
  return params.offsets.map(({ partition, offset }): CommitResult => {
    const held = state.partitions[partition];
    if (!held) return { error: partitionNotFound(params.stream, partition, state.partitions.length) };
    if (!live || held.holder !== params.member || held.generation > params.generation)
      return {
        error: new HopperError(
          "stale_generation",
          `Member "${params.member}" no longer holds partition ${partition} in generation ${params.generation}.`,
          { partition, generation: params.generation, current: state.generation },
        ),
      };
    if (held.position === null || offset > held.position)
      return {
        error: new HopperError(
          "commit_beyond_fetched",
          `Offset ${offset} of partition ${partition} is beyond what was fetched (${held.position ?? 0}).`,
          { partition, offset, fetched: held.position ?? 0 },
        ),
      };
    held.committed = offset;
    return { ok: true };
  });
}

/** A member leaves: its partitions are free at once. Answers whether it was a member. */
export function groupLeave(state: GroupState, member: string): boolean {
  const was = state.members[member] !== undefined;
  delete state.members[member];
  for (const partition of state.partitions) if (partition.holder === member) release(partition);
  return was;
}

/**
 * Moves the committed offsets (of every partition, or the one named) to the target, and frees every
 * lease. Refused with `group_in_use` while a live member holds a partition, unless `force`.
 * `offsetAt(partition, time)`: the first offset appended at or after `time` (next when none).
 */
export function groupReset(
  state: GroupState,
  params: {
    to: GroupResetTarget;
    force: boolean;
    now: number;
    memberTimeoutMs: number;
    heads: readonly HeadRange[];
    stream: string;
    offsetAt: (partition: number, time: number) => number;
  },
): void {
  settle(state, params.heads.length, params.now, params.memberTimeoutMs);
  const holders = state.partitions.some((partition) => partition.holder !== null);
  if (holders && !params.force)
    throw new HopperError(
      "group_in_use",
      "Members hold partitions of this group; stop them, or reset with force.",
      {
        members: Object.keys(state.members).sort(),
      },
    );
  const { to, heads } = params;
  const only = typeof to === "object" && "offset" in to ? to.partition : undefined;
  if (only !== undefined && (only < 0 || only >= heads.length))
    throw partitionNotFound(params.stream, only, heads.length);
  state.partitions.forEach((partition, index) => {
    if (only !== undefined && index !== only) return;
    const head = heads[index] as HeadRange;
    let committed: number;
    if (to === "earliest") committed = head.oldest;
    else if (to === "latest") committed = head.next;
    else if ("time" in to) committed = params.offsetAt(index, to.time);
    else committed = Math.min(Math.max(to.offset, head.oldest), head.next);
    if (partition.holder !== null) partition.generation = ++state.generation;
    release(partition);
    partition.committed = committed;
  });
  state.members = {};
  state.lastActiveAt = params.now;
}

/** Whether the group has been idle past groupIdleExpiryMs: no live member, no use since. */
export function groupIdle(
  state: GroupState,
  now: number,
  memberTimeoutMs: number,
  idleExpiryMs: number,
): boolean {
  const live = Object.keys(state.members).some((member) => isLive(state, member, now, memberTimeoutMs));
  return !live && state.lastActiveAt <= now - idleExpiryMs;
}

/** The group as shown: live members with their partitions, and each partition's lag. */
export function groupInfo(
  name: string,
  state: GroupState,
  params: { now: number; memberTimeoutMs: number; heads: readonly HeadRange[] },
): GroupInfo {
  const live = Object.keys(state.members)
    .filter((member) => isLive(state, member, params.now, params.memberTimeoutMs))
    .sort();
  const partitions = params.heads.map((head, index) => {
    const partition = state.partitions[index];
    const holder = partition?.holder ?? null;
    const committed = partition?.committed ?? null;
    return {
      partition: index,
      holder: holder !== null && live.includes(holder) ? holder : null,
      generation: partition?.generation ?? 0,
      committed,
      lag: head.next - Math.max(committed ?? head.oldest, head.oldest),
    };
  });
  return {
    name,
    generation: state.generation,
    createdAt: state.createdAt,
    lastActiveAt: state.lastActiveAt,
    members: live.map((member) => ({
      member,
      lastSeenAt: state.members[member]?.lastSeenAt ?? 0,
      partitions: partitions.filter((p) => p.holder === member).map((p) => p.partition),
    })),
    partitions,
  };
}
