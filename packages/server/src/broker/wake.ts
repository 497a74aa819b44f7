/**
 * Wake-ups: the one way the broker waits for something to be appended. A topic names what is waited
 * on ("queue:<name>"; streams' "stream:<name>:<partition>" and inboxes' "inbox:<namespace>:<recipient>"
 * are next). Each topic has a head position that only grows: whatever may make something available on
 * the topic advances it (for a queue: a send, a nack, a lease ending, a commit of another node that the
 * ClusterLink reported). A waiter reads the head BEFORE it reads the store, and waits after that
 * position: if the head moved meanwhile, waitAfter returns at once. So an append that lands between the
 * read and the registration is never lost (docs/invariants.md, "Long polls never miss a commit").
 *
 * Waking says only "look again"; the waiter then reads the store. A waiter may also be claimable: an
 * appender then takes it out of its topic (claim) and hands it what it appended directly, as a queue
 * send hands off to a long poll (handoffs.ts).
 *
 * Positions come from one counter for every topic: advancing a topic gives it the counter's next
 * value. Heads are remembered for the `topicHeadsMax` topics advanced last; an older one is forgotten
 * and its head reads as the floor, the highest head forgotten, which is at least what it was. So a
 * head never goes back and no wake-up is lost, and at worst a waiter on a forgotten topic finds the
 * floor raised and looks again once for nothing.
 */
import type { Clock } from "../clock.js";
import { HopperError, invariant } from "../errors.js";
import { limits } from "../limits.js";

/**
 * How a wait ended: the head passed its position, its time ran out, its signal aborted, or an appender
 * claimed it (with the waiter's own claimable).
 */
export type WakeEnd<Claimable> = "advanced" | "timeout" | "cancelled" | { claimed: Claimable };

export interface WaitOptions<Claimable> {
  /** How long the wait lasts at most, on the injected clock. Every wait is bounded. */
  timeoutMs: number;
  /** Ends the wait ("cancelled") when it aborts: the caller went away. */
  signal?: AbortSignal | undefined;
  /** Makes the waiter claimable: claim() answers it, and the wait ends `{ claimed }`. */
  claimable?: Claimable | undefined;
}

/** The bounds of one Wakeups; limits.ts gives the server's. */
export interface WakeBounds {
  waitersMax: number;
  waitersPerTopicMax: number;
  topicHeadsMax: number;
}

interface Waiter<Claimable> {
  end: (end: WakeEnd<Claimable>) => void;
  claimable: Claimable | undefined;
}

const serverBounds: WakeBounds = {
  waitersMax: limits.waitersMax,
  waitersPerTopicMax: limits.waitersPerTopicMax,
  topicHeadsMax: limits.wakeTopicHeadsMax,
};

export class Wakeups<Claimable = never> {
  /** Waiters per topic, in the order they came (the first has waited longest); no empty sets. */
  private readonly waitersByTopic = new Map<string, Set<Waiter<Claimable>>>();
  /** Heads of the topics advanced last, in the order of their last advance: so by increasing head. */
  private readonly heads = new Map<string, number>();
  /** The head of every topic not in `heads`. */
  private floor = 0;
  /** The last position given to a head. */
  private position = 0;
  private waiterCount = 0;

  constructor(
    private readonly clock: Clock,
    private readonly bounds: WakeBounds = serverBounds,
  ) {}

  /** The topic's head. Read it before looking at the store, and pass it to waitAfter. */
  head(topic: string): number {
    return this.heads.get(topic) ?? this.floor;
  }

  /** Something may have become available on the topic: its head moves on and its waiters wake. */
  advance(topic: string): void {
    this.position++;
    // Deleted first, so that the map's order stays the order of last advances.
    this.heads.delete(topic);
    this.heads.set(topic, this.position);
    if (this.heads.size > this.bounds.topicHeadsMax) this.forgetOldestHead();
    const waiters = this.waitersByTopic.get(topic);
    if (waiters) for (const waiter of [...waiters]) waiter.end("advanced");
  }

  /**
   * Every topic's head moves on, remembered or not, and every waiter wakes: at shutdown, or when the
   * store may have missed changes (a resync), so that anything looking looks again.
   */
  advanceAll(): void {
    this.position++;
    this.floor = this.position;
    this.heads.clear();
    for (const waiters of [...this.waitersByTopic.values()]) {
      for (const waiter of [...waiters]) waiter.end("advanced");
    }
  }

  /**
   * Resolves "advanced" once the topic's head is past `position` (at once if it is already), else
   * "timeout" after `timeoutMs`, "cancelled" when the signal aborts (at once if it has), or
   * `{ claimed }` when an appender claims the waiter. Refuses with too_many_waiters beyond the bounds.
   */
  waitAfter(topic: string, position: number, options: WaitOptions<Claimable>): Promise<WakeEnd<Claimable>> {
    if (this.head(topic) > position) return Promise.resolve("advanced");
    const { timeoutMs, signal, claimable } = options;
    if (signal?.aborted) return Promise.resolve("cancelled");
    invariant(Number.isFinite(timeoutMs) && timeoutMs >= 0, "a wait is bounded");
    const refusal = this.refusal(topic);
    if (refusal) return Promise.reject(refusal);
    return new Promise<WakeEnd<Claimable>>((resolve) => {
      let existing = this.waitersByTopic.get(topic);
      if (!existing) {
        existing = new Set();
        this.waitersByTopic.set(topic, existing);
      }
      const waiters = existing;
      const onAbort = () => waiter.end("cancelled");
      const waiter: Waiter<Claimable> = {
        end: (end) => {
          if (!waiters.delete(waiter)) return;
          this.waiterCount--;
          if (waiters.size === 0) this.waitersByTopic.delete(topic);
          cancelTimer();
          signal?.removeEventListener("abort", onAbort);
          resolve(end);
        },
        claimable,
      };
      waiters.add(waiter);
      this.waiterCount++;
      const cancelTimer = this.clock.setTimer(this.clock.now() + timeoutMs, () => waiter.end("timeout"));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Takes the longest-waiting claimable waiter of the topic out of it, ending its wait `{ claimed }`,
   * and answers its claimable; undefined if none waits. The head does not move: a claim makes nothing
   * available to the other waiters.
   */
  claim(topic: string): Claimable | undefined {
    const waiters = this.waitersByTopic.get(topic);
    if (!waiters) return undefined;
    for (const waiter of waiters) {
      const { claimable } = waiter;
      if (claimable === undefined) continue;
      waiter.end({ claimed: claimable });
      return claimable;
    }
    return undefined;
  }

  /** How many wait on the topic now. */
  waitingOn(topic: string): number {
    return this.waitersByTopic.get(topic)?.size ?? 0;
  }

  /** How many wait on any topic now. */
  get waiting(): number {
    return this.waiterCount;
  }

  /** How many topics' heads are remembered now (at most topicHeadsMax). */
  get headsRemembered(): number {
    return this.heads.size;
  }

  private refusal(topic: string): HopperError | undefined {
    const { waitersMax, waitersPerTopicMax } = this.bounds;
    if (this.waiterCount >= waitersMax) {
      return new HopperError(
        "too_many_waiters",
        `The server holds the most waits it allows (${waitersMax}).`,
        {
          max: waitersMax,
        },
      );
    }
    if ((this.waitersByTopic.get(topic)?.size ?? 0) >= waitersPerTopicMax) {
      return new HopperError(
        "too_many_waiters",
        `"${topic}" has the most waits on it that the server allows (${waitersPerTopicMax}).`,
        { topic, max: waitersPerTopicMax },
      );
    }
    return undefined;
  }

  /** Forgets the head advanced longest ago; the floor becomes it, the highest head forgotten. */
  private forgetOldestHead(): void {
    const oldest = this.heads.entries().next().value;
    if (!oldest) return;
    const [topic, head] = oldest;
    this.heads.delete(topic);
    this.floor = head;
  }
}

/** The topic of a queue's wake-ups. */
export function queueTopic(queue: string): string {
  return `queue:${queue}`;
}
