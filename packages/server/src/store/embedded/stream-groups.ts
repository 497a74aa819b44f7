/**
 * A stream's consumer groups on the embedded stores: each call loads the group's state through the
 * stream rows, applies model/stream-group.ts (where what a group means is written), reads the fetched
 * records, and stores the state again, all inside one write of the store.
 */
import { groupNotFound } from "../../errors.js";
import type { StoredStreamRecord } from "../../model/stream.js";
import {
  type CommitResult,
  FetchAnswer,
  type GroupInfo,
  type GroupState,
  groupCommit,
  groupFetch,
  groupIdle,
  groupInfo,
  groupLeave,
  groupReset,
  type HeadRange,
  newGroupState,
} from "../../model/stream-group.js";
import type { StreamStore } from "../stream-store.js";
import type { StreamRows, StreamSlot } from "./stream-rows.js";
import type { EmbeddedStreams } from "./streams.js";

export class EmbeddedStreamGroups<S extends StreamSlot> {
  constructor(
    private readonly rows: StreamRows<S>,
    private readonly streams: EmbeddedStreams<S>,
  ) {}

  private heads(stream: S): HeadRange[] {
    return Array.from({ length: stream.partitionCount }, (_, partition) => this.rows.head(stream, partition));
  }

  private existing(stream: S, group: string): GroupState {
    const state = this.rows.groupGet(stream, group);
    if (!state) throw groupNotFound(stream.name, group);
    return state;
  }

  fetch(params: Parameters<StreamStore["streamGroupFetch"]>[0]): {
    generation: number;
    records: StoredStreamRecord[];
  } {
    const stream = this.streams.require(params.name);
    const state = this.rows.groupGet(stream, params.group) ?? newGroupState(params.now);
    const heads = this.heads(stream);
    const held = groupFetch(state, {
      member: params.member,
      now: params.now,
      memberTimeoutMs: stream.attributes.memberTimeoutMs,
      heads,
      start: params.start,
    });
    const answer = new FetchAnswer(params.max, params.bytesMax);
    for (const { partition, position } of held) {
      const ask = answer.ask(position, heads[partition] as HeadRange);
      if (ask)
        answer.add(
          state,
          partition,
          this.rows.recordsRead(stream, partition, position, ask.limit, ask.bytesMax),
        );
    }
    this.rows.groupPut(stream, params.group, state);
    return { generation: state.generation, records: answer.records };
  }

  commit(params: Parameters<StreamStore["streamGroupCommit"]>[0]): CommitResult[] {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const results = groupCommit(state, {
      ...params,
      stream: stream.name,
      memberTimeoutMs: stream.attributes.memberTimeoutMs,
    });
    this.rows.groupPut(stream, params.group, state);
    return results;
  }

  leave(params: { name: string; group: string; member: string; now: number }): { left: boolean } {
    const stream = this.streams.require(params.name);
    const state = this.existing(stream, params.group);
    const left = groupLeave(state, params.member);
    this.rows.groupPut(stream, params.group, state);
    return { left };
  }

  reset(params: Parameters<StreamStore["streamGroupReset"]>[0]): GroupInfo {
    const stream = this.streams.require(params.name);
    const state = this.rows.groupGet(stream, params.group) ?? newGroupState(params.now);
    const heads = this.heads(stream);
    const { memberTimeoutMs } = stream.attributes;
    groupReset(state, {
      ...params,
      memberTimeoutMs,
      heads,
      stream: stream.name,
      offsetAt: (partition, time) =>
        this.rows.offsetAtTime(stream, partition, time) ?? (heads[partition] as HeadRange).next,
    });
    this.rows.groupPut(stream, params.group, state);
    return groupInfo(params.group, state, { now: params.now, memberTimeoutMs, heads });
  }

  delete(params: { name: string; group: string }): void {
    const stream = this.streams.require(params.name);
    this.existing(stream, params.group);
    this.rows.groupRemove(stream, params.group);
  }

  list(params: { name: string; now: number }): GroupInfo[] {
    const stream = this.streams.require(params.name);
    const heads = this.heads(stream);
    const { memberTimeoutMs } = stream.attributes;
    return this.rows
      .groupNames(stream)
      .map((group) =>
        groupInfo(group, this.existing(stream, group), { now: params.now, memberTimeoutMs, heads }),
      );
  }

  expire(params: { name: string; now: number }): { expired: number } {
    const stream = this.streams.require(params.name);
    const { memberTimeoutMs, groupIdleExpiryMs } = stream.attributes;
    let expired = 0;
    for (const group of this.rows.groupNames(stream)) {
      if (!groupIdle(this.existing(stream, group), params.now, memberTimeoutMs, groupIdleExpiryMs)) continue;
      this.rows.groupRemove(stream, group);
      expired++;
    }
    return { expired };
  }
}
