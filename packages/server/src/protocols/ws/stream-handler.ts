/**
 * The stream consumers of one WebSocket connection (API.md "WebSocket", docs/websocket.md "Streams"):
 * `stream.consume` pushes a consumer-group member's records as `stream.records` frames while it holds
 * fewer than `prefetch` uncommitted ones, and `stream.commit` commits and gives the credit back;
 * `share.consume` pushes a share group's records as `deliver` frames, one lease each, while fewer than
 * `prefetch` are unsettled, and `share.ack` / `share.nack` settle them by receipt. Each consumer is a
 * loop of the broker's long-polling fetch or receive; closing the connection ends them, a group member
 * leaves its group (its partitions move at once) and a share consumer's unsettled records are nacked
 * (delivered again at once), as a queue push consumer's leases are handed back.
 */
import type { StreamBroker } from "../../broker/streams.js";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import { renderItemResult } from "../wire/render.js";
import { streamRecordJson } from "../wire/stream-render.js";
import type {
  ShareAckFrame,
  ShareConsumeFrame,
  ShareNackFrame,
  StreamCancelFrame,
  StreamCommitFrame,
  StreamConsumeFrame,
} from "./stream-frames.js";

type Answer = { op: string } & Record<string, unknown>;

export interface ConnectionStreamsContext {
  streams: StreamBroker | undefined;
  /** A new subscription id, from the connection's one counter. */
  nextSub(): string;
  sendText(text: string): void;
  onWarning(error: unknown, sub: string): void;
}

/** One consumer's loop, with the credit it waits for. */
interface Pushing {
  kind: "group" | "share";
  stop: AbortController;
  /** Wakes a loop that waits for credit. */
  wake: () => void;
  done: Promise<void>;
}

interface GroupPushing extends Pushing {
  kind: "group";
  stream: string;
  group: string;
  member: string;
  generation: number;
  /** Per partition: the first uncommitted offset delivered, and the offset after the last delivered. */
  uncommitted: Map<number, { from: number; to: number }>;
}

interface SharePushing extends Pushing {
  kind: "share";
  stream: string;
  group: string;
  held: Set<string>;
}

export class ConnectionStreams {
  private readonly consumers = new Map<string, GroupPushing | SharePushing>();

  constructor(private readonly context: ConnectionStreamsContext) {}

  private broker(): StreamBroker {
    const { streams } = this.context;
    if (!streams)
      throw new HopperError("not_implemented", "This server serves no streams over the WebSocket.");
    return streams;
  }

  private consumer<K extends "group" | "share">(
    sub: string,
    kind: K,
  ): Extract<GroupPushing | SharePushing, { kind: K }> {
    const consumer = this.consumers.get(sub);
    if (!consumer || consumer.kind !== kind)
      throw new HopperError("consumer_not_found", `This connection has no ${kind} consumer ${sub}.`, { sub });
    return consumer as Extract<GroupPushing | SharePushing, { kind: K }>;
  }

  /** A group member that the loop fetches for, pushing records while it has credit. */
  async consume(frame: StreamConsumeFrame): Promise<Answer> {
    const streams = this.broker();
    await streams.getStream(frame.stream);
    if (this.consumers.size >= limits.wsConsumersPerConnectionMax)
      throw new HopperError("too_many_consumers");
    const sub = this.context.nextSub();
    const waiter = creditWaiter();
    const consumer: GroupPushing = {
      kind: "group",
      stream: frame.stream,
      group: frame.group,
      member: frame.member,
      generation: 0,
      uncommitted: new Map(),
      stop: new AbortController(),
      wake: waiter.wake,
      done: Promise.resolve(),
    };
    this.consumers.set(sub, consumer);
    consumer.done = this.runGroup(sub, consumer, frame, waiter).catch((error) =>
      this.context.onWarning(error, sub),
    );
    return { op: "stream.consuming", sub };
  }

  private async runGroup(
    sub: string,
    consumer: GroupPushing,
    frame: StreamConsumeFrame,
    waiter: ReturnType<typeof creditWaiter>,
  ): Promise<void> {
    const streams = this.broker();
    const { signal } = consumer.stop;
    while (!signal.aborted) {
      let held = 0;
      for (const { from, to } of consumer.uncommitted.values()) held += to - from;
      const credit = Math.min(frame.prefetch - held, limits.streamReadLimitMax);
      if (credit <= 0) {
        await waiter.wait();
        continue;
      }
      const fetched = await streams.groups.fetch(frame.stream, frame.group, frame.member, {
        max: credit,
        waitMs: limits.waitMsMax,
        start: frame.start,
        signal,
      });
      if (signal.aborted) break;
      // A new generation: partitions moved, and what was delivered before may be another member's now.
      if (fetched.generation !== consumer.generation) consumer.uncommitted.clear();
      consumer.generation = fetched.generation;
      if (fetched.records.length === 0) continue;
      for (const record of fetched.records) {
        const range = consumer.uncommitted.get(record.partition) ?? {
          from: record.offset,
          to: record.offset,
        };
        range.to = record.offset + 1;
        consumer.uncommitted.set(record.partition, range);
      }
      this.context.sendText(
        `{"op":"stream.records","sub":${JSON.stringify(sub)},"generation":${fetched.generation},"records":[${fetched.records.map(streamRecordJson).join(",")}]}`,
      );
    }
    await streams.groups.leave(frame.stream, frame.group, frame.member).catch(() => {});
  }

  /** Commits the member's offsets (in the generation of its last fetch) and gives the credit back. */
  async commit(frame: StreamCommitFrame): Promise<Answer> {
    const consumer = this.consumer(frame.sub, "group");
    const results = await this.broker().groups.commit(
      consumer.stream,
      consumer.group,
      consumer.member,
      consumer.generation,
      frame.offsets,
    );
    frame.offsets.forEach(({ partition, offset }, index) => {
      const range = consumer.uncommitted.get(partition);
      const result = results[index];
      if (!range || !result) return;
      // Committed, or no longer this member's to commit: either way it holds no credit any more.
      if ("ok" in result) range.from = Math.max(range.from, Math.min(offset, range.to));
      else if (result.error.code === "stale_generation") range.from = range.to;
      if (range.from >= range.to) consumer.uncommitted.delete(partition);
    });
    consumer.wake();
    return { op: "stream.committed", sub: frame.sub, results: results.map(renderItemResult) };
  }

  /** A share group's consumer: the loop receives records while fewer than `prefetch` are unsettled. */
  async consumeShare(frame: ShareConsumeFrame): Promise<Answer> {
    const streams = this.broker();
    await streams.shares.pending(frame.stream, frame.group, 1);
    if (this.consumers.size >= limits.wsConsumersPerConnectionMax)
      throw new HopperError("too_many_consumers");
    const sub = this.context.nextSub();
    const waiter = creditWaiter();
    const consumer: SharePushing = {
      kind: "share",
      stream: frame.stream,
      group: frame.group,
      held: new Set(),
      stop: new AbortController(),
      wake: waiter.wake,
      done: Promise.resolve(),
    };
    this.consumers.set(sub, consumer);
    consumer.done = this.runShare(sub, consumer, frame, waiter).catch((error) =>
      this.context.onWarning(error, sub),
    );
    return { op: "share.consuming", sub };
  }

  private async runShare(
    sub: string,
    consumer: SharePushing,
    frame: ShareConsumeFrame,
    waiter: ReturnType<typeof creditWaiter>,
  ): Promise<void> {
    const streams = this.broker();
    const { signal } = consumer.stop;
    while (!signal.aborted) {
      const credit = Math.min(frame.prefetch - consumer.held.size, limits.receiveMax);
      if (credit <= 0) {
        await waiter.wait();
        continue;
      }
      const records = await streams.shares.receive(frame.stream, frame.group, {
        max: credit,
        waitMs: limits.waitMsMax,
        signal,
      });
      for (const record of records) {
        consumer.held.add(record.receipt);
        const message = `{"receipt":${JSON.stringify(record.receipt)},"deliveryCount":${record.deliveries},${streamRecordJson(record).slice(1)}`;
        this.context.sendText(`{"op":"deliver","sub":${JSON.stringify(sub)},"message":${message}}`);
      }
    }
    // What it holds is delivered again at once, as a closed queue consumer's leases are.
    if (consumer.held.size > 0)
      await streams.shares.nack(frame.stream, frame.group, [...consumer.held]).catch(() => {});
  }

  async settle(frame: ShareAckFrame | ShareNackFrame): Promise<Answer> {
    const consumer = this.consumer(frame.sub, "share");
    const shares = this.broker().shares;
    const results =
      frame.op === "share.ack"
        ? await shares.ack(consumer.stream, consumer.group, frame.receipts)
        : await shares.nack(consumer.stream, consumer.group, frame.receipts, frame.delayMs);
    frame.receipts.forEach((receipt, index) => {
      const result = results[index];
      if (result && ("ok" in result || result.error.code === "stale_receipt")) consumer.held.delete(receipt);
    });
    consumer.wake();
    return {
      op: frame.op === "share.ack" ? "share.acked" : "share.nacked",
      sub: frame.sub,
      results: results.map(renderItemResult),
    };
  }

  /** Ends a consumer: a member leaves its group, a share consumer's unsettled records go back. */
  async cancel(frame: StreamCancelFrame): Promise<Answer> {
    const consumer = this.consumers.get(frame.sub);
    if (!consumer)
      throw new HopperError("consumer_not_found", `This connection has no consumer ${frame.sub}.`, {
        sub: frame.sub,
      });
    await this.end(frame.sub, consumer);
    return { op: "stream.cancelled", sub: frame.sub };
  }

  private async end(sub: string, consumer: GroupPushing | SharePushing): Promise<void> {
    this.consumers.delete(sub);
    consumer.stop.abort();
    consumer.wake();
    await consumer.done;
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers].map(([sub, consumer]) => this.end(sub, consumer)));
  }
}

/** A wait for credit that a commit, a settle or a cancel ends. */
function creditWaiter(): { wait: () => Promise<void>; wake: () => void } {
  let resolve: (() => void) | undefined;
  return {
    wait: () =>
      new Promise<void>((done) => {
        resolve = done;
      }),
    wake: () => {
      resolve?.();
      resolve = undefined;
    },
  };
}
