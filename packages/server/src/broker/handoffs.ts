/**
 * Hand-offs: a send leases its messages to a long poll waiting on the queue as it writes them, in its
 * own transaction (store.ts Handoff), instead of waking every long poll of the queue to look, lease
 * and find it. The long poll that has waited longest is claimed (Waiters.claim); the sends of one
 * event-loop turn into the queue share it up to its `max`, so that a burst reaches it as one batch, as
 * it would through the lease that a wake-up runs after them. A claim settles, with every message
 * leased to it, once the turn is over and each of its sends is done; a send that failed leased nothing.
 * Only what no claim could take wakes the other long polls (QueueBroker.sendCopies).
 */
import { limits } from "../limits.js";
import type { Handoff, LeasedMessage } from "../store/store.js";
import type { Claim, Waiters } from "./waiters.js";

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

/** One send's share of a claim: the terms to pass to the store, and the claim to report back to. */
export interface HandoffTicket {
  handoff: Handoff;
  open: OpenClaim;
}

export class Handoffs {
  /** Per queue, the claim that sends of the current turn join while it has room. */
  private readonly open = new Map<string, OpenClaim>();

  constructor(
    private readonly waiters: Waiters,
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
      const claim = this.waiters.claim(queue);
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
