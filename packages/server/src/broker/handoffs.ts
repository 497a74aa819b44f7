/**
 * Hand-offs: a send leases its messages to a long poll waiting on the queue as it writes them, in its
 * own transaction (store.ts Handoff), instead of waking every long poll of the queue to look, lease
 * and find it. The long poll that has waited longest is claimed (Wakeups.claim, wake.ts); the sends of one
 * event-loop turn into the queue share it up to its `max`, so that a burst reaches it as one batch, as
 * it would through the lease that a wake-up runs after them. A claim settles, with every message
 * leased to it, once the turn is over and each of its sends is done; a send that failed leased nothing.
 * Only what no claim could take wakes the other long polls (QueueSender.sendCopies, queue-send.ts).
 *
 * Besides the long polls, a queue may have sinks: push consumers with credit beyond their own receive
 * (push-consumer.ts). A sink is claimed only when no long poll waits, and only while its consumer's
 * last look found the queue drained, so a sink never takes new messages ahead of older ones. It takes
 * a send's messages while its own look is under way, which a long poll cannot: on a store whose looks
 * take milliseconds (PostgreSQL), sends during a look would otherwise wait for the next one.
 */
import { limits } from "../limits.js";
import type { LeasedMessage } from "../model/message.js";
import type { Handoff } from "../model/policies.js";
import { queueTopic, type Wakeups } from "./wake.js";

/** How a taker of hand-offs takes a send's messages: at most `max`, leased for visibilityTimeoutMs. */
export interface HandoffTerms {
  max: number;
  visibilityTimeoutMs: number;
}

/** A taker claimed by a send: its terms, and how the send hands it what it leased (or nothing). */
export interface Claim {
  terms: HandoffTerms;
  settle: (leased: LeasedMessage[]) => void;
}

/**
 * What a long poll waits with (WaitOptions.claimable): the claim a send may take, and the messages
 * that send leased to it, once it settles.
 */
export function longPollClaim(terms: HandoffTerms): { claim: Claim; handed: Promise<LeasedMessage[]> } {
  let settle: (leased: LeasedMessage[]) => void = () => {};
  const handed = new Promise<LeasedMessage[]>((resolve) => {
    settle = resolve;
  });
  return { claim: { terms, settle }, handed };
}

interface OpenClaim {
  queue: string;
  claim: Claim;
  /** How many more messages the claimed long poll takes. */
  room: number;
  leaseExpiresAt: number;
  /** Sends under way that may lease to it, and what those done leased, in the order they finished. */
  pending: number;
  leased: LeasedMessage[];
  /** The turn it was claimed in is over: no send joins it any more. */
  closed: boolean;
  settled: boolean;
}

/** A taker of hand-offs that is not a long poll: claim reserves room for a send, or answers undefined. */
export interface HandoffSink {
  claim(): Claim | undefined;
}

/** One send's share of a claim: the terms to pass to the store, and the claim to report back to. */
export interface HandoffTicket {
  handoff: Handoff;
  open: OpenClaim;
}

export class Handoffs {
  /** Per queue, the claim that sends of the current turn join while it has room. */
  private readonly open = new Map<string, OpenClaim>();
  /** Per queue, its sinks, in the order they are offered claims (the last claimed goes last). */
  private readonly sinks = new Map<string, HandoffSink[]>();

  constructor(
    /** The queues' wake-ups, whose claimable waiters are long polls. */
    private readonly wake: Wakeups<Claim>,
    /** Told when a claim settles with messages: their leases end at leaseExpiresAt. */
    private readonly onLeased: (queue: string, leaseExpiresAt: number) => void,
  ) {}

  /**
   * The hand-off for a send of `visibleNow` messages visible at `now` into `queue`, or undefined when
   * no long poll waits there. Every ticket must be finished.
   */
  take(queue: string, visibleNow: number, now: number): HandoffTicket | undefined {
    let open = this.open.get(queue);
    if (!open || open.room === 0) {
      const claim = this.wake.claim(queueTopic(queue)) ?? this.claimSink(queue);
      if (!claim) return undefined;
      const opened: OpenClaim = {
        queue,
        claim,
        room: claim.terms.max,
        leaseExpiresAt: now + claim.terms.visibilityTimeoutMs,
        pending: 0,
        leased: [],
        closed: false,
        settled: false,
      };
      this.open.set(queue, opened);
      setImmediate(() => {
        opened.closed = true;
        if (this.open.get(queue) === opened) this.open.delete(queue);
        this.settleIfDone(opened);
      });
      open = opened;
    }
    const max = Math.min(open.room, visibleNow);
    open.room -= max;
    open.pending++;
    return { handoff: { max, leaseExpiresAt: open.leaseExpiresAt, inFlightMax: limits.inFlightMax }, open };
  }

  /** Adds a sink to the queue's; answers the function that removes it. */
  addSink(queue: string, sink: HandoffSink): () => void {
    const sinks = this.sinks.get(queue) ?? [];
    sinks.push(sink);
    this.sinks.set(queue, sinks);
    return () => {
      const left = (this.sinks.get(queue) ?? []).filter((other) => other !== sink);
      if (left.length > 0) this.sinks.set(queue, left);
      else this.sinks.delete(queue);
    };
  }

  /** The first of the queue's sinks that takes a claim, moved to the end so that sinks take turns. */
  private claimSink(queue: string): Claim | undefined {
    const sinks = this.sinks.get(queue);
    if (!sinks) return undefined;
    for (const [index, sink] of sinks.entries()) {
      const claim = sink.claim();
      if (!claim) continue;
      sinks.splice(index, 1);
      sinks.push(sink);
      return claim;
    }
    return undefined;
  }

  /** Reports what the ticket's send leased (nothing if it failed). */
  finish(ticket: HandoffTicket, leased: readonly LeasedMessage[]): void {
    const { open } = ticket;
    open.leased.push(...leased);
    open.pending--;
    this.settleIfDone(open);
  }

  private settleIfDone(open: OpenClaim): void {
    if (!open.closed || open.pending > 0 || open.settled) return;
    open.settled = true;
    if (open.leased.length > 0) this.onLeased(open.queue, open.leaseExpiresAt);
    open.claim.settle(open.leased);
  }
}
