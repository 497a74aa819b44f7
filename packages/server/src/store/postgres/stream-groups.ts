/**
 * The PostgreSQL store's consumer groups: each call is one transaction that locks the stream row (KEY
 * SHARE, stream-store.ts lock 1) and then the group's row FOR UPDATE, applies model/stream-group.ts
 * (where what a group means is written) to the state it holds, reads the fetched records, and writes
 * the state back. Calls on one group therefore apply one after another on every node.
 */
import { groupNotFound } from "../../errors.js";
import {
  FetchAnswer,
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
import type { Client, PostgresDatabase } from "./database.js";
import * as sql from "./statements/index.js";
import { lockStreamShared } from "./stream-append.js";
import type { PostgresStreamStore } from "./stream-store.js";

type LockedStream = Awaited<ReturnType<typeof lockStreamShared>> & { name: string };

export class StreamGroups {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly streams: PostgresStreamStore,
  ) {}

  private async heads(client: Client, stream: LockedStream): Promise<HeadRange[]> {
    const { rows } = await client.query<{ oldest: number; next: number }>(sql.streamHeads, [
      stream.stream_id,
    ]);
    return rows.map((row) => ({ oldest: row.oldest, next: row.next }));
  }

  /** The group's state, locked; created first when `create` gives its first state. */
  private async lock(
    client: Client,
    stream: LockedStream,
    group: string,
    create?: GroupState,
  ): Promise<GroupState> {
    if (create) await client.query(sql.streamGroupEnsure, [stream.stream_id, group, JSON.stringify(create)]);
    const row = (await client.query<{ state: GroupState }>(sql.streamGroupLock, [stream.stream_id, group]))
      .rows[0];
    if (!row) throw groupNotFound(stream.name, group);
    return row.state;
  }

  private async save(client: Client, stream: LockedStream, group: string, state: GroupState): Promise<void> {
    await client.query(sql.streamGroupSave, [stream.stream_id, group, JSON.stringify(state)]);
  }

  /** Runs `work` on the locked stream in one transaction. */
  private inStream<T>(name: string, work: (client: Client, stream: LockedStream) => Promise<T>): Promise<T> {
    return this.db.transaction(async (client) =>
      work(client, { ...(await lockStreamShared(client, name)), name }),
    );
  }

  fetch(params: Parameters<StreamStore["streamGroupFetch"]>[0]): ReturnType<StreamStore["streamGroupFetch"]> {
    return this.inStream(params.name, async (client, stream) => {
      const state = await this.lock(client, stream, params.group, newGroupState(params.now));
      const heads = await this.heads(client, stream);
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
        if (!ask) continue;
        const read = await this.streams.readIn(client, {
          name: params.name,
          partition,
          position: { offset: position },
          ...ask,
        });
        answer.add(state, partition, read.records);
      }
      await this.save(client, stream, params.group, state);
      return { generation: state.generation, records: answer.records };
    });
  }

  commit(
    params: Parameters<StreamStore["streamGroupCommit"]>[0],
  ): ReturnType<StreamStore["streamGroupCommit"]> {
    return this.inStream(params.name, async (client, stream) => {
      const state = await this.lock(client, stream, params.group);
      const results = groupCommit(state, {
        ...params,
        stream: params.name,
        memberTimeoutMs: stream.attributes.memberTimeoutMs,
      });
      await this.save(client, stream, params.group, state);
      return results;
    });
  }

  leave(params: { name: string; group: string; member: string; now: number }): Promise<{ left: boolean }> {
    return this.inStream(params.name, async (client, stream) => {
      const state = await this.lock(client, stream, params.group);
      const left = groupLeave(state, params.member);
      await this.save(client, stream, params.group, state);
      return { left };
    });
  }

  reset(params: Parameters<StreamStore["streamGroupReset"]>[0]): ReturnType<StreamStore["streamGroupReset"]> {
    return this.inStream(params.name, async (client, stream) => {
      const state = await this.lock(client, stream, params.group, newGroupState(params.now));
      const heads = await this.heads(client, stream);
      const { memberTimeoutMs } = stream.attributes;
      const to = params.to;
      const atTime =
        typeof to === "object" && "time" in to
          ? (
              await client.query<{ found: number | null }>(sql.streamOffsetsAtTime, [
                stream.stream_id,
                to.time,
              ])
            ).rows
          : [];
      groupReset(state, {
        ...params,
        memberTimeoutMs,
        heads,
        stream: params.name,
        offsetAt: (partition) => atTime[partition]?.found ?? (heads[partition] as HeadRange).next,
      });
      await this.save(client, stream, params.group, state);
      return groupInfo(params.group, state, { now: params.now, memberTimeoutMs, heads });
    });
  }

  delete(params: { name: string; group: string }): Promise<void> {
    return this.inStream(params.name, async (client, stream) => {
      const { rowCount } = await client.query(sql.streamGroupDelete, [stream.stream_id, params.group]);
      if (!rowCount) throw groupNotFound(params.name, params.group);
    });
  }

  list(params: { name: string; now: number }): ReturnType<StreamStore["streamGroupList"]> {
    return this.inStream(params.name, async (client, stream) => {
      const heads = await this.heads(client, stream);
      const { rows } = await client.query<{ name: string; state: GroupState }>(sql.streamGroupSelectAll, [
        params.name,
      ]);
      const { memberTimeoutMs } = stream.attributes;
      return rows.map((row) => groupInfo(row.name, row.state, { now: params.now, memberTimeoutMs, heads }));
    });
  }

  expire(params: { name: string; now: number }): Promise<{ expired: number }> {
    return this.inStream(params.name, async (client, stream) => {
      const { rows } = await client.query<{ name: string; state: GroupState }>(sql.streamGroupSelectAll, [
        params.name,
      ]);
      const { memberTimeoutMs, groupIdleExpiryMs } = stream.attributes;
      let expired = 0;
      for (const row of rows) {
        // Locked and checked again: a fetch may have renewed it since the listing.
        const state = await this.lock(client, stream, row.name).catch(() => undefined);
        if (!state || !groupIdle(state, params.now, memberTimeoutMs, groupIdleExpiryMs)) continue;
        await client.query(sql.streamGroupDelete, [stream.stream_id, row.name]);
        expired++;
      }
      return { expired };
    });
  }
}
