/**
 * One device's subscription to its inbox (DESIGN.md §6, docs/inboxes.md), free of any protocol: replay
 * every entry after the device's cursor, in order and in bounded batches, then say "live" once, then
 * deliver each entry as it is appended. Every entry it delivers comes from a store read; nothing is
 * pushed past the store. That is what makes the seam exact and the flow control cheap:
 *
 * - The seam. Before each read the subscription reads the wake-up topic's head; a read that comes back
 *   short (fewer entries than it asked for) has seen everything committed before that head, so the
 *   subscription waits after that head. An append that commits after the head was read advances it, and
 *   the wait returns at once (broker/wake.ts). So no entry is missed between replay and live, and since
 *   each read starts after the last sequence delivered, none is delivered twice or out of order.
 * - Flow control. The owner pauses the subscription when its connection's send buffer is full. A paused
 *   subscription stops after the delivery under way and drops the rest of its batch; on resume it reads
 *   again from the store, after the last sequence it delivered. So what it holds in memory is at most
 *   one read's batch, however large the backlog, and nothing is dropped for good.
 * - Gaps. Whenever a read shows the cursor cannot go on without a hole (trimmed, another epoch, skipped
 *   while idle: model/inbox.ts gapOf), the subscription says so (onGap) and goes on from the oldest
 *   entry retained.
 */
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import {
  type GapReason,
  gapOf,
  type InboxEntry,
  type RecipientPosition,
  type RecipientState,
} from "../model/inbox.js";
import type { InboxStore } from "../store/inbox-store.js";
import { type InboxBroker, inboxTopic } from "./inboxes.js";
import type { Wakeups } from "./wake.js";

/** What a subscription needs of the inbox broker (broker/inboxes.ts gives it). */
export interface InboxSubscriptionSource {
  /** The inbox wake-ups; a recipient's topic is `inboxTopic(ns, recipient)`, advanced after each append commits. */
  readonly wake: Pick<Wakeups, "head" | "waitAfter">;
  /** The recipient's retained entries after `after`, at most `limit`, with where its log stands; no gap check. */
  read(params: {
    ns: string;
    recipient: string;
    after: number;
    limit: number;
  }): Promise<{ entries: InboxEntry[]; state: RecipientState }>;
  /** Marks the device seen, creating it at `cursor` when it is new. */
  deviceSeen(params: { ns: string; recipient: string; device: string; cursor: number }): Promise<void>;
  /** Registers the device as connected; the answer unregisters it. */
  connected(ns: string, recipient: string, device: string): () => void;
  /** Stats: entries delivered from the backlog (before live). */
  replayed?(ns: string, entries: number): void;
}

/**
 * The source of subscriptions on `broker`. Reads go to the store directly: a subscription needs where
 * the log stands even when the cursor has a gap (to say so and go on from the oldest entry), where the
 * broker's read refuses with inbox_gap.
 */
export function inboxSubscriptionSource(
  broker: Pick<InboxBroker, "wake" | "deviceSeen" | "connected" | "replayed">,
  store: Pick<InboxStore, "inboxRead">,
): InboxSubscriptionSource {
  return {
    wake: broker.wake,
    read: ({ ns, recipient, after, limit }) => store.inboxRead({ name: ns, recipient, after, limit }),
    deviceSeen: ({ ns, recipient, device, cursor }) => broker.deviceSeen(ns, recipient, device, cursor),
    connected: (ns, recipient, device) => broker.connected(ns, recipient, device),
    replayed: (ns, entries) => broker.replayed(ns, entries),
  };
}

export interface InboxSubscriptionOptions {
  source: InboxSubscriptionSource;
  ns: string;
  recipient: string;
  device: string;
  /** The device's cursor: the highest sequence it has processed (0: none). */
  after: number;
  /** The epoch the cursor belongs to; required when `after` > 0 (checked by the caller). */
  epoch: string | undefined;
  /** The cursor cannot go on without a hole: entries resume after `oldest - 1`. Called before those entries. */
  onGap(position: RecipientPosition): void;
  /** Entries in order, each after the last one delivered; at most `limits.inboxDeliveryBytesMax` of bodies (or one entry). */
  onEntries(entries: InboxEntry[]): void;
  /** The backlog as of the subscription's start has been delivered; called once. */
  onLive(head: number): void;
  /** The subscription ended by itself (its namespace was deleted, a wait was refused); it holds nothing. */
  onEnd(error: HopperError): void;
  /** A read failed for a passing reason (the store unreachable); it is retried. */
  onWarning?(error: unknown): void;
}

/** Errors that end a subscription rather than being retried: what they name is gone. */
const endingCodes = new Set(["inbox_not_found", "too_many_waiters"]);

/**
 * Where a cursor goes on from after a gap: before the oldest entry retained when entries are gone or the
 * cursor is from another epoch; where it was after a skip, since the log past it holds no hole (the gap
 * tells the application to fetch what was never appended from its own history).
 */
function resumeAfterGap(gap: GapReason, cursor: number, state: RecipientState): number {
  if (gap === "skipped") return Math.max(cursor, state.oldest - 1);
  return state.oldest - 1;
}

/** The bytes of an entry's body, as bounded deliveries count them. */
function bodyBytes(entry: InboxEntry): number {
  return typeof entry.body === "string" ? Buffer.byteLength(entry.body) : entry.body.length;
}

export class InboxSubscription {
  readonly topic: string;
  /** The highest sequence delivered (or skipped over by a gap): the next read starts after it. */
  private cursor: number;
  /** The epoch the cursor belongs to: the namespace's own once a read has checked it. */
  private epoch: string | undefined;
  private readonly abort = new AbortController();
  private paused = false;
  private wakeResume: (() => void) | undefined;
  private liveSent = false;
  private ended = false;
  private releaseConnected: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** The first read, made by open(), handed to the loop so that a subscription costs one read less. */
  private firstRead: { headBefore: number; entries: InboxEntry[]; state: RecipientState } | undefined;
  /** The skippedAfter of the last gap reported: the same skip is not reported twice. */
  private skippedAfterReported: number | null = null;
  /** When each recent entry delivered was appended, for the ack lag (at most limits.inboxAckLagTimesKept). */
  private readonly appendedAtBySeq = new Map<number, number>();
  /** Entries delivered before live: the replay's size, for stats and tests. */
  replayedEntries = 0;

  constructor(private readonly options: InboxSubscriptionOptions) {
    this.topic = inboxTopic(options.ns, options.recipient);
    this.cursor = options.after;
    this.epoch = options.epoch;
  }

  /** The highest sequence delivered so far. */
  get delivered(): number {
    return this.cursor;
  }

  /** When the entry `seq` was appended, if it was delivered recently: an ack's lag is measured from it. */
  appendedAtOf(seq: number): number | undefined {
    return this.appendedAtBySeq.get(seq);
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /**
   * Reads where the recipient's log stands, marks the device seen (at its cursor, or where a gap puts
   * it) and registers it as connected. Answers the position to announce; throws what the store threw
   * (inbox_not_found), with nothing registered. Deliveries start with run().
   */
  async open(): Promise<RecipientPosition> {
    const { source, ns, recipient, device } = this.options;
    const headBefore = source.wake.head(this.topic);
    const { entries, state } = await source.read({
      ns,
      recipient,
      after: this.cursor,
      limit: limits.inboxReplayBatchMax,
    });
    this.firstRead = { headBefore, entries, state };
    const gap = this.gapAt(state);
    const createAt = gap ? resumeAfterGap(gap, this.cursor, state) : this.cursor;
    await source.deviceSeen({ ns, recipient, device, cursor: createAt });
    if (this.ended) throw new HopperError("invalid_request", "The subscription was closed.");
    this.releaseConnected = source.connected(ns, recipient, device);
    return { head: state.head, oldest: state.oldest, epoch: state.epoch };
  }

  /** Starts delivering: the gap if any, the backlog, live, then new entries. */
  run(): void {
    this.loop ??= this.deliverLoop();
  }

  /** Stops delivering after the delivery under way (the connection's send buffer is full). */
  pause(): void {
    this.paused = true;
  }

  /** Delivers again, reading from the store after the last sequence delivered. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.wakeResume?.();
  }

  /** Ends the subscription and unregisters the device; resolves once the loop has stopped. Idempotent. */
  async close(): Promise<void> {
    if (!this.ended) {
      this.ended = true;
      this.abort.abort();
      this.wakeResume?.();
      this.releaseConnected?.();
      this.releaseConnected = undefined;
    }
    await this.loop;
  }

  private async deliverLoop(): Promise<void> {
    let failuresInRow = 0;
    while (!this.ended) {
      if (this.paused) {
        await new Promise<void>((resolve) => {
          this.wakeResume = resolve;
        });
        this.wakeResume = undefined;
        continue;
      }
      try {
        const caughtUpAt = await this.readAndDeliver();
        failuresInRow = 0;
        if (caughtUpAt !== undefined) await this.waitAfter(caughtUpAt, limits.inboxLiveWaitMs);
      } catch (error) {
        if (this.ended) return;
        if (error instanceof HopperError && endingCodes.has(error.code)) {
          await this.endWith(error);
          return;
        }
        this.options.onWarning?.(error);
        failuresInRow++;
        const backoffMs = Math.min(
          limits.inboxReadBackoffMsMax,
          limits.inboxReadBackoffMsMin * 2 ** Math.min(failuresInRow - 1, 16),
        );
        // A failed read waits as a short read does: an append wakes it early.
        await this.waitAfter(this.options.source.wake.head(this.topic), backoffMs).catch(() => {});
      }
    }
  }

  /**
   * One read and its deliveries. Answers the head read before the read when the read came back short
   * (everything committed before that head is delivered: wait after it), or undefined to read again at
   * once (a full batch, a gap, a pause).
   */
  private async readAndDeliver(): Promise<number | undefined> {
    const { source, ns, recipient } = this.options;
    let read = this.firstRead;
    this.firstRead = undefined;
    if (!read) {
      const headBefore = source.wake.head(this.topic);
      const limit = limits.inboxReplayBatchMax;
      read = { headBefore, ...(await source.read({ ns, recipient, after: this.cursor, limit })) };
    }
    if (this.ended) return undefined;
    const { headBefore, entries, state } = read;
    const gap = this.gapAt(state);
    if (gap) {
      this.options.onGap({ oldest: state.oldest, head: state.head, epoch: state.epoch });
      this.epoch = state.epoch;
      this.skippedAfterReported = state.skippedAfter;
      this.cursor = resumeAfterGap(gap, this.cursor, state);
      return undefined;
    }
    this.epoch = state.epoch;
    if (!this.deliver(entries)) return undefined;
    if (entries.length >= limits.inboxReplayBatchMax) return undefined;
    if (!this.liveSent) {
      this.liveSent = true;
      source.replayed?.(ns, this.replayedEntries);
      this.options.onLive(state.head);
    }
    return headBefore;
  }

  /**
   * Delivers `entries` in chunks of at most `limits.inboxDeliveryBytesMax` of bodies, stopping if a delivery
   * paused the subscription. Answers whether every entry was delivered.
   */
  private deliver(entries: InboxEntry[]): boolean {
    let start = 0;
    while (start < entries.length) {
      if (this.ended || this.paused) return false;
      let end = start;
      let bytes = 0;
      while (end < entries.length) {
        const next = bodyBytes(entries[end] as InboxEntry);
        if (end > start && bytes + next > limits.inboxDeliveryBytesMax) break;
        bytes += next;
        end++;
      }
      const chunk = entries.slice(start, end);
      this.cursor = (chunk[chunk.length - 1] as InboxEntry).seq;
      if (!this.liveSent) this.replayedEntries += chunk.length;
      this.rememberAppendTimes(chunk);
      this.options.onEntries(chunk);
      start = end;
    }
    return !this.ended && !this.paused;
  }

  private rememberAppendTimes(entries: InboxEntry[]): void {
    for (const entry of entries) this.appendedAtBySeq.set(entry.seq, entry.appendedAt);
    // Map keys iterate in insertion order, which is sequence order here: the oldest go first.
    for (const seq of this.appendedAtBySeq.keys()) {
      if (this.appendedAtBySeq.size <= limits.inboxAckLagTimesKept) break;
      this.appendedAtBySeq.delete(seq);
    }
  }

  /** Whether the cursor would miss entries reading on; a skip already reported is not reported again. */
  private gapAt(state: RecipientState): GapReason | undefined {
    const skippedAfter =
      state.skippedAfter !== null && state.skippedAfter === this.skippedAfterReported
        ? null
        : state.skippedAfter;
    return gapOf({ ...state, skippedAfter }, this.cursor, this.epoch);
  }

  /** Waits until the topic's head passes `position`, the wait's time runs out, or the subscription ends. */
  private async waitAfter(position: number, timeoutMs: number): Promise<void> {
    await this.options.source.wake.waitAfter(this.topic, position, { timeoutMs, signal: this.abort.signal });
  }

  private async endWith(error: HopperError): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.releaseConnected?.();
    this.releaseConnected = undefined;
    this.options.onEnd(error);
  }
}
