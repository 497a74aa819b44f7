// Streams over HTTP (docs/streams.md): streams, appends and reads, consumer groups and share groups,
// and `groupConsumer`, which runs a handler over a group member's records and commits each partition's
// offset once the handler has returned for every record fetched.
import type {
  AppendRecord,
  GroupInfo,
  PutShareBody,
  PutStreamBody,
  ResetBody,
  StreamAppendResult,
  StreamInfo,
  StreamRecordOut,
  StreamRecords,
} from "@hopper/wire";
import { type Clock, interruptibleWait, systemClock } from "./clock.js";
import type { HopperError } from "./errors.js";
import type { ItemResult } from "./types.js";

/** How Streams makes its calls: the client's own request (its auth, timeouts and errors). */
export type StreamRequest = (
  method: string,
  path: string,
  options?: { body?: unknown; signal?: AbortSignal; timeoutMs?: number },
) => Promise<{ status: number; body: unknown }>;

/** A record a share receive handed out, with its receipt. */
export type SharedRecord = StreamRecordOut & { receipt: string; deliveryCount: number };

export interface GroupFetchOptions {
  member: string;
  max?: number;
  waitMs?: number;
  start?: "earliest" | "latest";
  signal?: AbortSignal;
}

export interface GroupConsumerOptions {
  /** The member's id: one per process (or worker) of the group. */
  member: string;
  /** Records per fetch (default 100). */
  max?: number;
  /** How long each fetch waits for records (default 20 s). */
  waitMs?: number;
  start?: "earliest" | "latest";
  /** Handler failures and failed calls. Default: console.error. The consumer goes on after a pause. */
  onError?: (error: unknown) => void;
}

export interface GroupConsumer {
  /** Stops fetching; resolves once the batch in hand is handled and committed, and the member left. */
  stop(): Promise<void>;
}

/** Pause after a failed fetch, commit or handler, before fetching again. */
const retryPauseMs = 1_000;

function streamPath(stream: string, suffix = ""): string {
  return `/v1/streams/${encodeURIComponent(stream)}${suffix}`;
}

function field<T>(answer: { body: unknown }, name: string): T {
  return (answer.body as Record<string, T>)[name] as T;
}

export class Streams {
  constructor(
    private readonly request: StreamRequest,
    /** The client's clock: the pause after a failure. */
    private readonly clock: Clock = systemClock,
  ) {}

  /** Creates the stream (`created: true`) or updates it; partitions may grow, never shrink. */
  async put(
    stream: string,
    attributes: PutStreamBody = {},
  ): Promise<{ created: boolean; stream: StreamInfo }> {
    const answer = await this.request("PUT", streamPath(stream), { body: attributes });
    return { created: answer.status === 201, stream: answer.body as StreamInfo };
  }

  async get(stream: string): Promise<StreamInfo> {
    return (await this.request("GET", streamPath(stream))).body as StreamInfo;
  }

  async list(): Promise<StreamInfo[]> {
    return field<StreamInfo[]>(await this.request("GET", "/v1/streams"), "streams");
  }

  async delete(stream: string): Promise<void> {
    await this.request("DELETE", streamPath(stream));
  }

  /** Appends up to 100 records; each answers its partition and offset, or its error. */
  async append(
    stream: string,
    records: AppendRecord[],
  ): Promise<(StreamAppendResult | { error: HopperError })[]> {
    const answer = await this.request("POST", streamPath(stream, "/records"), { body: { records } });
    return field<(StreamAppendResult | { error: HopperError })[]>(answer, "results");
  }

  /** A partition's records from an offset (`from`), or a time (`fromTime`), at most `limit`. */
  async read(
    stream: string,
    partition: number,
    options: { from?: number; fromTime?: Date | number; limit?: number } = {},
  ): Promise<StreamRecords> {
    const { from, fromTime, limit } = options;
    const query = new URLSearchParams({
      ...(from !== undefined && { from: String(from) }),
      ...(fromTime !== undefined && {
        fromTime: fromTime instanceof Date ? fromTime.toISOString() : String(fromTime),
      }),
      ...(limit !== undefined && { limit: String(limit) }),
    });
    const text = query.toString();
    const suffix = `/partitions/${partition}/records${text === "" ? "" : `?${text}`}`;
    return (await this.request("GET", streamPath(stream, suffix))).body as StreamRecords;
  }

  /** A consumer-group member's fetch: it renews the member's partitions and answers their records. */
  async fetch(
    stream: string,
    group: string,
    options: GroupFetchOptions,
  ): Promise<{ generation: number; records: StreamRecordOut[] }> {
    const { signal, ...body } = options;
    const answer = await this.request(
      "POST",
      streamPath(stream, `/groups/${encodeURIComponent(group)}/fetch`),
      {
        body,
        ...(signal && { signal }),
        timeoutMs: 30_000 + (body.waitMs ?? 0),
      },
    );
    return answer.body as { generation: number; records: StreamRecordOut[] };
  }

  /** Commits next offsets to read; each answers ok, or `stale_generation` / `commit_beyond_fetched`. */
  async commit(
    stream: string,
    group: string,
    commit: { member: string; generation: number; offsets: { partition: number; offset: number }[] },
  ): Promise<ItemResult[]> {
    const answer = await this.request(
      "POST",
      streamPath(stream, `/groups/${encodeURIComponent(group)}/commit`),
      {
        body: commit,
      },
    );
    return field<ItemResult[]>(answer, "results");
  }

  async leave(stream: string, group: string, member: string): Promise<{ left: boolean }> {
    const path = streamPath(stream, `/groups/${encodeURIComponent(group)}/leave`);
    return (await this.request("POST", path, { body: { member } })).body as { left: boolean };
  }

  async listGroups(stream: string): Promise<GroupInfo[]> {
    return field<GroupInfo[]>(await this.request("GET", streamPath(stream, "/groups")), "groups");
  }

  async getGroup(stream: string, group: string): Promise<GroupInfo> {
    return (await this.request("GET", streamPath(stream, `/groups/${encodeURIComponent(group)}`)))
      .body as GroupInfo;
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    await this.request("DELETE", streamPath(stream, `/groups/${encodeURIComponent(group)}`));
  }

  /** Moves the group's committed offsets; refused (`group_in_use`) while members hold partitions, unless `force`. */
  async resetGroup(stream: string, group: string, reset: ResetBody): Promise<GroupInfo> {
    const path = streamPath(stream, `/groups/${encodeURIComponent(group)}/reset`);
    return (await this.request("POST", path, { body: reset })).body as GroupInfo;
  }

  /** Creates or updates a share group (queue semantics over the stream). */
  async putShare(
    stream: string,
    group: string,
    attributes: PutShareBody = {},
  ): Promise<{ created: boolean }> {
    const answer = await this.request("PUT", streamPath(stream, `/shares/${encodeURIComponent(group)}`), {
      body: attributes,
    });
    return { created: answer.status === 201 };
  }

  async receiveShare(
    stream: string,
    group: string,
    options: { max?: number; waitMs?: number; visibilityTimeoutMs?: number } = {},
  ): Promise<SharedRecord[]> {
    const path = streamPath(stream, `/shares/${encodeURIComponent(group)}/receive`);
    const answer = await this.request("POST", path, {
      body: options,
      timeoutMs: 30_000 + (options.waitMs ?? 0),
    });
    return field<SharedRecord[]>(answer, "messages");
  }

  async ackShare(stream: string, group: string, receipts: string[]): Promise<ItemResult[]> {
    return this.receipts(stream, group, "/ack", { receipts });
  }

  async nackShare(
    stream: string,
    group: string,
    receipts: string[],
    delayMs?: number,
  ): Promise<ItemResult[]> {
    return this.receipts(stream, group, "/nack", { receipts, ...(delayMs !== undefined && { delayMs }) });
  }

  async extendShare(
    stream: string,
    group: string,
    receipts: string[],
    visibilityTimeoutMs: number,
  ): Promise<ItemResult[]> {
    return this.receipts(stream, group, "/extend", { receipts, visibilityTimeoutMs });
  }

  private async receipts(stream: string, group: string, suffix: string, body: object): Promise<ItemResult[]> {
    const path = streamPath(stream, `/shares/${encodeURIComponent(group)}${suffix}`);
    return field<ItemResult[]>(await this.request("POST", path, { body }), "results");
  }

  /**
   * Runs `handler` over the records of `group` that `member` is given, one at a time in partition
   * order, and after each fetch's records are all handled commits the offset after the last record of
   * each partition: a record is committed only once its handler returned (at-least-once). A commit
   * refused as `stale_generation` means the partition moved to another member, which will deliver the
   * uncommitted records again. A failing handler stops the batch; the consumer reports it and fetches
   * again (its position moved on, so the failed records come back once the partition is reassigned or
   * the group reset: commit nothing past them).
   */
  groupConsumer(
    stream: string,
    group: string,
    handler: (record: StreamRecordOut) => void | Promise<void>,
    options: GroupConsumerOptions,
  ): GroupConsumer {
    const controller = new AbortController();
    let pause: { wait: Promise<void>; wake: () => void } | undefined;
    const onError = options.onError ?? ((error: unknown) => console.error("hopper group consumer:", error));
    const loop = (async () => {
      while (!controller.signal.aborted) {
        try {
          const { generation, records } = await this.fetch(stream, group, {
            member: options.member,
            max: options.max ?? 100,
            waitMs: options.waitMs ?? 20_000,
            ...(options.start && { start: options.start }),
            signal: controller.signal,
          });
          const next = new Map<number, number>();
          try {
            for (const record of records) {
              await handler(record);
              next.set(record.partition, record.offset + 1);
            }
          } finally {
            if (next.size > 0) {
              const offsets = [...next].map(([partition, offset]) => ({ partition, offset }));
              const results = await this.commit(stream, group, {
                member: options.member,
                generation,
                offsets,
              });
              for (const result of results)
                if ("error" in result && result.error.code !== "stale_generation") onError(result.error);
            }
          }
        } catch (error) {
          if (controller.signal.aborted) break;
          onError(error);
          pause = interruptibleWait(this.clock, retryPauseMs);
          await pause.wait;
        }
      }
    })();
    return {
      stop: async () => {
        controller.abort();
        pause?.wake();
        await loop;
        // Its partitions move to the other members at once, not after memberTimeoutMs.
        await this.leave(stream, group, options.member).catch(onError);
      },
    };
  }
}
