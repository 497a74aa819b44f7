/**
 * The FIFO workload's order check: every group's messages must arrive in the order the server stored
 * them.
 *
 * The bench knows the order in which it sent messages, not the order in which the server stored them:
 * the server stores one send request's messages in one transaction, in their order, but two requests in
 * flight at the same time may be stored either way round. So the check reasons about requests:
 *
 * - Out of order: a message that arrives after a later-sent message of its group, when the server could
 *   not have stored the two that way round: both were in one request, or the earlier request was
 *   confirmed before the later one was sent.
 * - Disagreeing: the store has one order of requests, so every group that has messages in two requests
 *   must see those requests in the same order. Each pair of consecutive deliveries in a group votes for
 *   the order of their two requests; for each pair of requests, the votes of the minority count.
 *
 * Their sum is the order violations; a FIFO queue must show 0. A standard queue promises no order, so
 * there the count only shows that the check sees reordering when there is some.
 *
 * Only a message's first delivery counts; the delivery ledger counts duplicates. The order in which
 * deliveries reach this process is the group's delivery order: the server leases a group's next message
 * only after the previous one's ack, which a consumer sends after handing the message to this check.
 */

/** The key, and so the FIFO group, of message `seq`: g0, g1, … round-robin. */
export function groupKey(seq: number, groups: number): string {
  return `g${seq % groups}`;
}

export interface GroupOrderResult {
  groups: number;
  /** Out of order plus disagreeing: 0 means every group arrived in one order the store could have. */
  violations: number;
  /** Arrivals after a later-sent message of the group that no order of the store allows. */
  outOfOrder: number;
  /** Consecutive deliveries of a group that put two requests in the order most groups did not. */
  disagreeing: number;
  /** Pairs of requests that the groups saw, by majority, in the reverse of the order they were sent:
   * allowed (they were in flight together), and a sign that the server took them in the other order. */
  requestPairsReversed: number;
}

export class GroupOrderCheck {
  private outOfOrder = 0;
  private readonly requestOfSeq: Int32Array;
  private readonly requestIssuedAtMs: number[] = [];
  private readonly requestConfirmedAtMs: number[] = [];
  /** Per group: the last message delivered, and the latest-sent one delivered so far; −1 before any. */
  private readonly lastSeq: Int32Array;
  private readonly latestSentSeq: Int32Array;
  private readonly delivered: Uint8Array;
  /** Per pair of requests (earlier × messages + later): votes that the earlier-sent came first, and
   * that the later-sent did. A request holds at least one message, so `messages` bounds their number. */
  private readonly votes = new Map<number, { earlierFirst: number; laterFirst: number }>();

  constructor(
    private readonly messages: number,
    private readonly groups: number,
  ) {
    this.requestOfSeq = new Int32Array(messages).fill(-1);
    this.lastSeq = new Int32Array(groups).fill(-1);
    this.latestSentSeq = new Int32Array(groups).fill(-1);
    this.delivered = new Uint8Array(messages);
  }

  /** Records that messages firstSeq … firstSeq + count − 1 leave now in one send request; answers the
   * request's number, for `requestConfirmed`. Requests must be recorded in the order they are sent. */
  requestIssued(firstSeq: number, count: number, atMs: number): number {
    const request = this.requestIssuedAtMs.length;
    this.requestOfSeq.fill(request, firstSeq, firstSeq + count);
    this.requestIssuedAtMs.push(atMs);
    this.requestConfirmedAtMs.push(Number.NaN);
    return request;
  }

  requestConfirmed(request: number, atMs: number): void {
    this.requestConfirmedAtMs[request] = atMs;
  }

  /** Records one delivery of message `seq` that came with `key`; a wrong key is a bug and throws. */
  recordDelivery(seq: number, key: string | null | undefined): void {
    const expected = groupKey(seq, this.groups);
    if (key !== expected) throw new Error(`message ${seq} arrived with key ${key}, not ${expected}`);
    if (this.delivered[seq] === 1) return;
    this.delivered[seq] = 1;
    const request = this.requestOfSeq[seq] as number;
    if (request < 0) throw new Error(`message ${seq} arrived before the bench sent it`);
    const group = seq % this.groups;
    const latest = this.latestSentSeq[group] as number;
    if (seq < latest) {
      // Requests are sent in seq order, so the latest-sent message delivered so far is the one whose
      // request was sent last: if even that one could not have been stored first, none could.
      const laterRequest = this.requestOfSeq[latest] as number;
      const confirmedAtMs = this.requestConfirmedAtMs[request] as number;
      // An unconfirmed request (NaN) was still in flight, so either order was possible.
      if (laterRequest === request || confirmedAtMs <= (this.requestIssuedAtMs[laterRequest] as number)) {
        this.outOfOrder++;
      }
    } else {
      this.latestSentSeq[group] = seq;
    }
    const last = this.lastSeq[group] as number;
    this.lastSeq[group] = seq;
    if (last < 0) return;
    const lastRequest = this.requestOfSeq[last] as number;
    if (lastRequest === request) return;
    const earlier = Math.min(lastRequest, request);
    const pair = earlier * this.messages + Math.max(lastRequest, request);
    let votes = this.votes.get(pair);
    if (votes === undefined) {
      votes = { earlierFirst: 0, laterFirst: 0 };
      this.votes.set(pair, votes);
    }
    if (lastRequest === earlier) votes.earlierFirst++;
    else votes.laterFirst++;
  }

  result(): GroupOrderResult {
    let disagreeing = 0;
    let requestPairsReversed = 0;
    for (const { earlierFirst, laterFirst } of this.votes.values()) {
      disagreeing += Math.min(earlierFirst, laterFirst);
      if (laterFirst > earlierFirst) requestPairsReversed++;
    }
    return {
      groups: this.groups,
      violations: this.outOfOrder + disagreeing,
      outOfOrder: this.outOfOrder,
      disagreeing,
      requestPairsReversed,
    };
  }
}
