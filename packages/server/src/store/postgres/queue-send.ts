/**
 * The PostgreSQL store's sends (QueueStore.queueSendMany). A send into one standard queue, without
 * overflow or deduplication, is one statement, shared with the sends that arrive meanwhile
 * (statement-lines.ts); a send with a hand-off leases its first messages in that statement; every
 * other send is one transaction over message-writes.ts.
 */
import { invariant, queueNotFound } from "../../errors.js";
import { limits } from "../../limits.js";
import { bodyByteLength, type LeasedMessage, type NewMessage } from "../../model/message.js";
import { handoffRanks } from "../../model/policies.js";
import type { QueueKind } from "../../model/queue.js";
import { encodeReceipt } from "../../model/receipts.js";
import type { QueueSend, SendOutcome, StreamAppendCopy } from "../store.js";
import { messageColumns } from "./message-writes.js";
import { compareNames, QueuePart } from "./queue-context.js";
import { StatementLines } from "./statement-lines.js";
import * as sql from "./statements/index.js";

/** A one-statement send waiting in its queue's line: with its hand-off's ranks, if it hands off. */
interface LineSend {
  send: QueueSend;
  ranks: number[] | undefined;
  now: number;
}

export class QueueSends extends QueuePart {
  /**
   * One-statement sends go one statement at a time per queue; those that arrive meanwhile share the
   * next (statement-lines.ts). A batch that finds a FIFO queue answers undefined for each call, which
   * then takes the transactional path.
   */
  private readonly sendLines = new StatementLines<LineSend, SendOutcome | undefined>(
    (_queue, sends) => this.queueSendBatch(sends),
    [
      { sizeOf: (line) => line.send.messages.length, max: limits.postgresLineBatchMax },
      {
        sizeOf: (line) =>
          line.send.messages.reduce((bytes, message) => bytes + bodyByteLength(message.body), 0),
        max: limits.postgresLineBatchBodyBytesMax,
      },
    ],
  );

  /**
   * A send into one standard queue, without overflow or deduplication, is one statement
   * (statements.queueSendStatement); everything else, and a queue that turns out to be FIFO, is one
   * transaction.
   */
  async queueSendMany(params: {
    sends: QueueSend[];
    now: number;
    appends?: StreamAppendCopy[];
  }): Promise<SendOutcome[]> {
    const [only] = params.sends;
    if (only && params.sends.length === 1 && !params.appends?.length && this.sendFitsOneStatement(only)) {
      const ranks = handoffRanks(only, params.now);
      const sent = await this.sendLines.run(only.queue, { send: only, ranks, now: params.now });
      if (sent) return [sent];
    }
    return this.queueSendInTransaction(params);
  }

  /**
   * Sends of one queue as one statement, each answered with its own ids (sendLines), and with what it
   * handed off when any of them hands off.
   */
  private async queueSendBatch(lines: LineSend[]): Promise<(SendOutcome | undefined)[]> {
    if (lines.some((line) => line.ranks)) return this.queueSendHandingOff(lines);
    const sends = lines.map((line) => line.send);
    const [first] = sends;
    invariant(first, "a batch holds at least one send");
    const messages = sends.length === 1 ? first.messages : sends.flatMap((send) => send.messages);
    const sent = await this.queueSendInOneStatement({ ...first, messages });
    let offset = 0;
    return sends.map((send) => {
      const ids = sent?.ids.slice(offset, offset + send.messages.length);
      offset += send.messages.length;
      return ids && { ids, leased: [] };
    });
  }

  private sendFitsOneStatement(send: QueueSend): boolean {
    return (
      this.queues.kindHint(send.queue) !== "fifo" &&
      send.policy.overflow === null &&
      send.messages.every((message) => message.dedupId === null)
    );
  }

  /**
   * The one-statement send whose hand-offs lease the messages ranked up to the queue's in-flight room
   * (statements.queueSendHandingOffStatement). The sends of a batch rank their messages one after the
   * other, each leased to its own claim. Announces the queue after the commit only if a message was
   * left available. Answers undefined for each, having written nothing, when the queue is FIFO.
   */
  private async queueSendHandingOff(lines: LineSend[]): Promise<(SendOutcome | undefined)[]> {
    const [first] = lines;
    invariant(first, "a batch holds at least one send");
    const ranks: number[] = [];
    const leaseExpiries: number[] = [];
    /** By rank in the batch: the line and the message it leases. */
    const byRank = new Map<number, { line: number; message: NewMessage; leaseExpiresAt: number }>();
    let rankBase = 0;
    let visibleNow = 0;
    lines.forEach(({ send, ranks: own, now }, line) => {
      const leaseExpiresAt = send.handoff?.leaseExpiresAt ?? 0;
      let top = 0;
      send.messages.forEach((message, index) => {
        const rank = own?.[index] ?? 0;
        if (message.visibleAt <= now) visibleNow++;
        ranks.push(rank === 0 ? 0 : rankBase + rank);
        leaseExpiries.push(rank === 0 ? 0 : leaseExpiresAt);
        if (rank > 0) byRank.set(rankBase + rank, { line, message, leaseExpiresAt });
        top = Math.max(top, rank);
      });
      rankBase += top;
    });
    const now = Math.max(...lines.map((line) => line.now));
    const inFlightMax = Math.min(...lines.map((line) => line.send.handoff?.inFlightMax ?? Infinity));
    const messages = lines.length === 1 ? first.send.messages : lines.flatMap((line) => line.send.messages);
    const tokenBase = this.queues.random.uint48();
    const { rows } = await this.db.statement<{ kind: QueueKind; seqs: number[]; tokens: number[] }>(
      sql.queueSendHandingOffStatement,
      [
        ...this.sendParams({ ...first.send, messages }),
        ranks,
        rankBase,
        inFlightMax,
        now,
        leaseExpiries,
        tokenBase,
      ],
    );
    const row = rows[0];
    if (!row) throw queueNotFound(first.send.queue);
    this.queues.hintKind(first.send.queue, row.kind);
    if (row.kind !== "standard") return lines.map(() => undefined);
    const leased: LeasedMessage[][] = lines.map(() => []);
    row.seqs.forEach((seq, i) => {
      const token = row.tokens[i] as number;
      const owner = byRank.get(token - tokenBase);
      invariant(owner, "a leased message has a rank of the batch");
      leased[owner.line]?.push({
        ...owner.message,
        visibleAt: owner.leaseExpiresAt,
        deliveryCount: 1,
        firstDeliveredAt: now,
        receipt: encodeReceipt(seq, token),
      });
    });
    if (row.seqs.length < visibleNow) this.link.announceCommitted(first.send.queue);
    return lines.map((line, index) => ({
      ids: line.send.messages.map((message) => message.id),
      leased: leased[index] ?? [],
    }));
  }

  /** $1–$11 of the one-statement sends (statements/sends.ts queueSend): the queue, the message columns, a shard, the body lengths. */
  private sendParams(send: QueueSend): unknown[] {
    const columns = messageColumns(send.messages);
    return [
      send.queue,
      columns.ids,
      columns.bodies,
      columns.contentTypes,
      columns.headers,
      columns.keys,
      columns.priorities,
      columns.publishedAts,
      columns.visibleAts,
      this.db.counterShard(),
      columns.bodyLengths,
    ];
  }

  /** Returns undefined, having written nothing, when the queue is FIFO. */
  private async queueSendInOneStatement(send: QueueSend): Promise<SendOutcome | undefined> {
    // Alone on this node (no other call holds or awaits a connection), the send NOTIFYs in its own
    // commit: one round trip instead of two. Otherwise the NOTIFY goes after the commit, shared by the
    // sends of one turn, since PostgreSQL serializes the commits of transactions that NOTIFY. Neither
    // while no other node listens.
    const notifying = this.db.alone() && this.link.othersListening();
    const notify = notifying ? this.link.wakeUpParams(send.queue) : [];
    const { rows } = await this.db.statement<{ queue_id: number; kind: QueueKind }>(
      notifying ? sql.queueSendNotifyingStatement : sql.queueSendStatement,
      [...this.sendParams(send), ...notify],
    );
    const row = rows[0];
    if (!row) throw queueNotFound(send.queue);
    this.queues.hintKind(send.queue, row.kind);
    if (row.kind !== "standard") return undefined;
    if (!notifying) this.link.announceCommitted(send.queue);
    return { ids: send.messages.map((message) => message.id), leased: [] };
  }

  /** Every send, then the appends to streams (after the queues, in the lock order of stream-store.ts). */
  private queueSendInTransaction(params: {
    sends: QueueSend[];
    now: number;
    appends?: StreamAppendCopy[];
  }): Promise<SendOutcome[]> {
    return this.db.transaction(async (client) => {
      const results: SendOutcome[] = [];
      // Queues are locked in name order (message-writes.ts), so that two sends into the same queues
      // with a maxDepth never wait for each other in a cycle; results keep the order of the sends.
      const order = params.sends.map((_, index) => index);
      order.sort((a, b) => compareNames(params.sends[a]?.queue ?? "", params.sends[b]?.queue ?? ""));
      for (const index of order) {
        const send = params.sends[index];
        invariant(send, "the order holds indexes of the sends");
        const queue = await this.writes.lockQueue(
          client,
          send.queue,
          send.policy.overflow ? "depth" : "share",
        );
        if (!queue) throw queueNotFound(send.queue);
        this.queues.hintKind(send.queue, queue.kind);
        const { ids, written } = await this.writes.send(
          client,
          queue,
          send.messages,
          send.policy,
          params.now,
        );
        results[index] = { ids, leased: [] };
        this.link.announceOnCommit(client, ...written);
      }
      for (const { stream, records } of params.appends ?? [])
        await this.queues.appendToStream(client, { name: stream, records, now: params.now });
      return results;
    });
  }
}
