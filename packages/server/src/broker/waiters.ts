/**
 * Long polls waiting on queues. A waiter is resolved when the queue may have something for it
 * (a commit added or released messages, or a delayed message fell due), when its deadline passes, or
 * when its request is abandoned. Resolution only says "look again"; the waiter then tries to lease.
 * A waiter that takes hand-offs can instead be claimed by a send (claim): it is then resolved with the
 * send's hand-off, which settles with the messages the send leased to it once the send is done.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { LeasedMessage } from "../model/message.js";

/** How a waiter takes a send's messages: at most `max`, leased for visibilityTimeoutMs. */
export interface HandoffTerms {
  max: number;
  visibilityTimeoutMs: number;
}

/** A waiter's end: undefined means look again; a hand-off settles with what a send leased to it. */
export type WaitEnd = undefined | { handoff: Promise<LeasedMessage[]> };

/** A waiter claimed by a send: its terms, and how the send hands it what it leased (or nothing). */
export interface Claim {
  terms: HandoffTerms;
  settle: (leased: LeasedMessage[]) => void;
}

interface Waiter {
  wake: (end?: WaitEnd) => void;
  terms: HandoffTerms | undefined;
}

export class Waiters {
  private readonly byQueue = new Map<string, Set<Waiter>>();
  /** Counts notifications per queue, so a caller can tell whether one came while it was looking. */
  private readonly versions = new Map<string, number>();
  private count = 0;

  constructor(private readonly clock: Clock) {}

  /** The queue's notification count: take it before looking at the queue, pass it to wait(). */
  version(queue: string): number {
    return this.versions.get(queue) ?? 0;
  }

  /**
   * Resolves at the first of: notify(queue), deadlineMs, the signal aborting, or a send claiming it
   * (claim; only a waiter with hand-off terms). If a notification came since `sinceVersion` was read,
   * or the signal has aborted already, resolves at once: the caller looked too early to see it.
   */
  wait(
    queue: string,
    deadlineMs: number,
    sinceVersion: number,
    signal?: AbortSignal,
    terms?: HandoffTerms,
  ): Promise<WaitEnd> {
    if (this.version(queue) !== sinceVersion || signal?.aborted) return Promise.resolve(undefined);
    if (this.count >= limits.waitersMax) return Promise.reject(new HopperError("too_many_waiters"));
    return new Promise<WaitEnd>((resolve) => {
      let set = this.byQueue.get(queue);
      if (!set) {
        set = new Set();
        this.byQueue.set(queue, set);
      }
      const waiters = set;
      const onAbort = () => waiter.wake();
      const waiter: Waiter = {
        wake: (end) => {
          if (!waiters.delete(waiter)) return;
          this.count--;
          if (waiters.size === 0) this.byQueue.delete(queue);
          cancelTimer();
          signal?.removeEventListener("abort", onAbort);
          resolve(end);
        },
        terms,
      };
      waiters.add(waiter);
      this.count++;
      const cancelTimer = this.clock.setTimer(deadlineMs, () => waiter.wake());
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Takes the longest-waiting waiter of the queue that takes hand-offs, if any, out of the queue's
   * waiters: a send leases to it, then settles the claim with what it leased (nothing if it failed).
   * The version is unchanged: a claim makes nothing available to the others.
   */
  claim(queue: string): Claim | undefined {
    const set = this.byQueue.get(queue);
    if (!set) return undefined;
    for (const waiter of set) {
      const { terms } = waiter;
      if (!terms) continue;
      let settle: (leased: LeasedMessage[]) => void = () => {};
      const handoff = new Promise<LeasedMessage[]>((resolve) => {
        settle = resolve;
      });
      waiter.wake({ handoff });
      return { terms, settle };
    }
    return undefined;
  }

  /**
   * Wakes every waiter of the queue: each looks again, and those that find nothing wait on. Waking
   * all keeps the rule simple (no waiter is left asleep beside an available message) at the cost of
   * some empty looks when many wait on one queue.
   */
  notify(queue: string): void {
    this.versions.set(queue, this.version(queue) + 1);
    const set = this.byQueue.get(queue);
    if (!set) return;
    for (const waiter of [...set]) waiter.wake();
  }

  /** Wakes every waiter of every queue (at shutdown, or when a queue is deleted). */
  notifyAll(): void {
    for (const queue of [...this.byQueue.keys()]) this.notify(queue);
  }

  waitingOn(queue: string): number {
    return this.byQueue.get(queue)?.size ?? 0;
  }
}
