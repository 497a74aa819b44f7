/**
 * The PostgreSQL store's calls on a lease's receipt: ack (one statement in a standard queue, shared
 * with the acks that arrive meanwhile; a transaction under the groups' locks in a FIFO queue), nack
 * (retry or dead-letter) and extend.
 */
import { invariant, queueNotFound } from "../../errors.js";
import { limits } from "../../limits.js";
import { noTargetUnlessRefused, type ReceiptResult } from "../../model/message.js";
import type { DeadLetterRoute, QueueKind } from "../../model/queue.js";
import { decodeReceipt } from "../../model/receipts.js";
import type { MessageRow } from "../rows.js";
import type { Client } from "./database.js";
import type { LockedQueue } from "./message-writes.js";
import { QueuePart } from "./queue-context.js";
import { StatementLines } from "./statement-lines.js";
import * as sql from "./statements/index.js";

/** The (seq, token) pairs whose rows were deleted, as the set receiptResults consumes. */
function deletedPairs(deleted: readonly { seq: number; leaseToken: number }[]): Set<string> {
  return new Set(deleted.map((pair) => `${pair.seq}.${pair.leaseToken}`));
}

/**
 * Each receipt's outcome, given the pairs deleted and not yet counted (deletedPairs), which it takes
 * out of `left`: a receipt that appears twice counts once; its repeat is stale, as it would be in a
 * later call.
 */
function receiptResults(
  decoded: readonly ({ seq: number; leaseToken: number } | undefined)[],
  left: Set<string>,
): ReceiptResult[] {
  return decoded.map((receipt): ReceiptResult => {
    if (!receipt) return { error: "invalid_receipt" };
    if (!left.delete(`${receipt.seq}.${receipt.leaseToken}`)) return { error: "stale_receipt" };
    return { ok: true };
  });
}

export class QueueReceipts extends QueuePart {
  /** One-statement acks of a standard queue go one statement at a time per queue (statement-lines.ts). */
  private readonly ackLines = new StatementLines<string[], ReceiptResult[] | undefined>(
    (queue, receipts) => this.queueAckBatch(queue, receipts),
    [{ sizeOf: (receipts) => receipts.length, max: limits.postgresLineBatchMax }],
  );

  /**
   * In a FIFO queue, locks the groups of the rows these seqs name (a removal may hand a group on), before
   * the rows are locked. A standard queue has no groups.
   */
  private async lockGroupsOfSeqs(client: Client, queue: LockedQueue, seqs: readonly number[]): Promise<void> {
    if (queue.kind !== "fifo" || seqs.length === 0) return;
    const { rows } = await client.query<{ group_key: string }>(sql.messageSelectGroupsOfSeqs, [
      queue.queueId,
      seqs,
    ]);
    await this.writes.lockGroups(
      client,
      rows.map((row) => ({ queueId: queue.queueId, groupKey: row.group_key })),
    );
  }

  /**
   * Finds, locked, the rows whose latest lease each receipt names. A receipt that appears twice in one
   * batch counts once; its repeat is stale, as it would be in a later call.
   */
  private async rowsByReceipt(
    client: Client,
    queueId: number,
    receipts: string[],
  ): Promise<{ results: ReceiptResult[]; rows: (MessageRow | undefined)[] }> {
    const decoded = receipts.map(decodeReceipt);
    const valid = decoded.filter((receipt) => receipt !== undefined);
    const { rows } = await client.query<MessageRow>(sql.messageSelectByReceipts, [
      queueId,
      valid.map((receipt) => receipt.seq),
      valid.map((receipt) => receipt.leaseToken),
    ]);
    const bySeq = new Map(rows.map((row) => [row.seq, row]));
    const matched: (MessageRow | undefined)[] = [];
    const results = decoded.map((receipt): ReceiptResult => {
      if (!receipt) {
        matched.push(undefined);
        return { error: "invalid_receipt" };
      }
      const row = bySeq.get(receipt.seq);
      if (!row || row.lease_token !== receipt.leaseToken) {
        matched.push(undefined);
        return { error: "stale_receipt" };
      }
      bySeq.delete(receipt.seq);
      matched.push(row);
      return { ok: true };
    });
    return { results, rows: matched };
  }

  /**
   * In a standard queue one statement, one round trip (statements.queueAckStatement). In a FIFO queue
   * an ack hands the group to its next message, under the group's lock: a transaction.
   */
  async queueAck(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    if (this.queues.kindHint(params.queue) === "fifo") return this.queueAckInTransaction(params);
    return (await this.ackLines.run(params.queue, params.receipts)) ?? this.queueAckInTransaction(params);
  }

  /**
   * Ack batches of one standard queue as one statement (ackLines). The results are read off the
   * deleted pairs call by call, in order, each pair counting once: a receipt in two of the calls is
   * ok in the first and stale in the second, as if they had run one after the other. Undefined for
   * each call when the queue is FIFO.
   */
  private async queueAckBatch(queue: string, batches: string[][]): Promise<(ReceiptResult[] | undefined)[]> {
    const decoded = batches.map((receipts) => receipts.map(decodeReceipt));
    const valid = decoded.flat().filter((receipt) => receipt !== undefined);
    const { rows } = await this.db.statement<{
      queue_id: number | null;
      kind: QueueKind | null;
      seqs: number[];
      tokens: number[];
    }>(sql.queueAckStatement, [
      queue,
      valid.map((r) => r.seq),
      valid.map((r) => r.leaseToken),
      this.db.counterShard(),
    ]);
    const row = rows[0];
    if (!row || row.queue_id === null || row.kind === null) throw queueNotFound(queue);
    this.queues.hintKind(queue, row.kind);
    if (row.kind !== "standard") return batches.map(() => undefined);
    const left = deletedPairs(row.seqs.map((seq, i) => ({ seq, leaseToken: row.tokens[i] as number })));
    return decoded.map((receipts) => receiptResults(receipts, left));
  }

  /**
   * An ack in a FIFO queue: a transaction of two statements between BEGIN and COMMIT. The first locks
   * the queue row and names the groups of the acked messages, whose advisory locks are taken next; the
   * second deletes, promotes each group's next head and counts (statements.fifoAckStatement).
   */
  private queueAckInTransaction(params: { queue: string; receipts: string[] }): Promise<ReceiptResult[]> {
    return this.db.transaction(async (client) => {
      const decoded = params.receipts.map(decodeReceipt);
      const valid = decoded.filter((receipt) => receipt !== undefined);
      const seqs = valid.map((r) => r.seq);
      const queue = (
        await client.query<{ queue_id: number; kind: QueueKind; groups: string[] }>(sql.fifoAckGroups, [
          params.queue,
          seqs,
        ])
      ).rows[0];
      if (!queue) throw queueNotFound(params.queue);
      this.queues.hintKind(params.queue, queue.kind);
      await this.writes.lockGroups(
        client,
        queue.groups.map((groupKey) => ({ queueId: queue.queue_id, groupKey })),
      );
      const row = (
        await client.query<{ seqs: number[]; tokens: number[]; promoted: number }>(sql.fifoAckStatement, [
          queue.queue_id,
          seqs,
          valid.map((r) => r.leaseToken),
          this.db.counterShard(),
        ])
      ).rows[0];
      invariant(row, "an aggregate-only select answers one row");
      if (row.promoted > 0) this.link.announceOnCommit(client, params.queue);
      return receiptResults(
        decoded,
        deletedPairs(row.seqs.map((seq, i) => ({ seq, leaseToken: row.tokens[i] as number }))),
      );
    });
  }

  queueNack(params: {
    queue: string;
    receipts: string[];
    now: number;
    retryDelayMs: (deliveryCount: number) => number;
    deadLetter: DeadLetterRoute | null;
    deadLetterNow?: { reason: string };
  }): Promise<{ results: ReceiptResult[]; deadLettered: number }> {
    return this.db.transaction(async (client) => {
      const queue = await this.queues.lockQueueShared(client, params.queue);
      const policy = params.deadLetter;
      const rejected = params.deadLetterNow;
      // Only a dead letter removes a head; a retried head stays the head of its group.
      if (policy) {
        const seqs = params.receipts.map((receipt) => decodeReceipt(receipt)?.seq);
        await this.lockGroupsOfSeqs(
          client,
          queue,
          seqs.filter((seq) => seq !== undefined),
        );
      }
      const { results, rows } = await this.rowsByReceipt(client, queue.queueId, params.receipts);
      // Nowhere to move them: each lease found answers so, and nothing changes.
      if (rejected && !policy) return { results: results.map(noTargetUnlessRefused), deadLettered: 0 };
      const found = rows.filter((row) => row !== undefined);
      const exhausted = policy
        ? found.filter((row) => rejected || row.delivery_count >= policy.maxDeliveries)
        : [];
      const retried = found.filter((row) => !exhausted.includes(row));
      if (policy) {
        const written = await this.writes.deadLetter(
          client,
          exhausted,
          queue,
          policy,
          rejected?.reason ?? "max_deliveries",
          params.now,
        );
        this.link.announceOnCommit(client, ...written);
      }
      if (retried.length > 0) {
        await client.query(sql.messageReleaseMany, [
          retried.map((row) => row.seq),
          retried.map((row) => params.now + params.retryDelayMs(row.delivery_count)),
        ]);
        this.link.announceOnCommit(client, params.queue);
      }
      if (found.length > 0) await this.writes.addCounters(client, queue.queueId, { nacked: found.length });
      return { results, deadLettered: exhausted.length };
    });
  }

  queueExtend(params: {
    queue: string;
    receipts: string[];
    leaseExpiresAt: number;
  }): Promise<ReceiptResult[]> {
    return this.db.transaction(async (client) => {
      const queue = await this.queues.lockQueueShared(client, params.queue);
      const { results, rows } = await this.rowsByReceipt(client, queue.queueId, params.receipts);
      const seqs = rows.filter((row) => row !== undefined).map((row) => row.seq);
      if (seqs.length > 0) {
        await client.query(sql.messageExtendMany, [seqs, params.leaseExpiresAt]);
        // A lease cut short (extend to now) hands the message back; other nodes' long polls may want it.
        this.link.announceOnCommit(client, params.queue);
      }
      return results;
    });
  }
}
