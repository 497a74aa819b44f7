/**
 * The PostgreSQL store's leases (QueueStore.queueLease): one statement in the common case, with SKIP
 * LOCKED so that nodes never hand out the same message; a transaction when candidates used their last
 * delivery (they are dead-lettered) or with autoAck (what is leased is deleted).
 */
import { invariant, queueNotFound } from "../../errors.js";
import { limits } from "../../limits.js";
import type { LeasedMessage } from "../../model/message.js";
import type { QueueKind } from "../../model/queue.js";
import { decodeReceipt, encodeReceipt } from "../../model/receipts.js";
import { type MessageRow, toStoredMessage } from "../rows.js";
import type { Store } from "../store.js";
import type { Client } from "./database.js";
import type { LockedQueue } from "./message-writes.js";
import { QueuePart } from "./queue-context.js";
import * as sql from "./statements/index.js";

type LeaseParams = Parameters<Store["queueLease"]>[0];

export class QueueLeases extends QueuePart {
  /**
   * Leases in one statement (statements.queueLeaseStatement, or queueLeaseFifoStatement for a FIFO
   * queue); only when candidates used their last delivery, or with autoAck, does it take the
   * transactional path, which also moves those to the dead-letter queue.
   */
  async queueLease(params: LeaseParams): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    if (params.autoAck) return this.queueLeaseInTransaction(params);
    // One random base per call; the n-th message leased gets base + n (see leaseAround).
    const tokenBase = this.queues.random.uint48();
    let kind = this.queues.kindHint(params.queue) ?? "standard";
    let leased = await this.queueLeaseInOneStatement(kind, params, tokenBase);
    // The hint was wrong (or the queue was created again as the other kind): nothing was leased.
    if (leased.kind !== kind) {
      kind = leased.kind;
      leased = await this.queueLeaseInOneStatement(kind, params, tokenBase);
    }
    if (leased.kind !== kind) return this.queueLeaseInTransaction(params);
    const { messages, exhausted } = leased;
    if (exhausted === 0 || !params.deadLetter) return { messages, deadLettered: 0 };
    const rest = await this.queueLeaseInTransaction({ ...params, max: params.max - messages.length });
    return { messages: [...messages, ...rest.messages], deadLettered: rest.deadLettered };
  }

  /** Runs the one-statement lease of `kind`; it leases nothing if the queue is of the other kind. */
  private async queueLeaseInOneStatement(
    kind: QueueKind,
    params: LeaseParams,
    tokenBase: number,
  ): Promise<{ kind: QueueKind; messages: LeasedMessage[]; exhausted: number }> {
    const { rows } = await this.db.statement<
      MessageRow & { kind: QueueKind; exhausted: number; lease_index: number | null }
    >(kind === "fifo" ? sql.queueLeaseFifoStatement : sql.queueLeaseStatement, [
      params.queue,
      params.now,
      params.expiredBefore,
      params.max,
      params.inFlightMax,
      params.deadLetter?.maxDeliveries ?? 2_147_483_647,
      params.leaseExpiresAt,
      tokenBase,
      this.db.counterShard(),
    ]);
    const first = rows[0];
    if (!first) throw queueNotFound(params.queue);
    this.queues.hintKind(params.queue, first.kind);
    const messages = rows
      .filter((row) => row.lease_index !== null)
      .sort((a, b) => (a.lease_index as number) - (b.lease_index as number))
      .map(
        (row): LeasedMessage => ({
          ...toStoredMessage(row),
          receipt: encodeReceipt(row.seq, tokenBase + (row.lease_index as number)),
        }),
      );
    return { kind: first.kind, messages, exhausted: first.exhausted };
  }

  /**
   * The general lease, in one transaction: leases, dead-letters exhausted candidates, and with autoAck
   * deletes what it leased. In a FIFO queue it first locks the groups of the heads it may take (and
   * those groups in FIFO dead-letter queues), since dead-lettering or deleting a head hands its group
   * to the next message; later passes look only in those groups, for the heads that this made.
   */
  private queueLeaseInTransaction(
    params: LeaseParams,
  ): Promise<{ messages: LeasedMessage[]; deadLettered: number }> {
    return this.db.transaction(async (client) => {
      const queue = await this.queues.lockQueueShared(client, params.queue);
      const inFlight =
        (
          await client.query<{ n: number }>(sql.messageCountInFlight, [
            queue.queueId,
            params.now,
            params.max,
            params.inFlightMax,
          ])
        ).rows[0]?.n ?? 0;
      const wanted = Math.min(params.max, params.inFlightMax - inFlight);
      const messages: LeasedMessage[] = [];
      let deadLettered = 0;
      const locked = queue.kind === "fifo" ? await this.lockHeadGroups(client, queue, params, wanted) : null;
      // Each pass leases or dead-letters every row it locks, so the loop ends; the bound keeps a queue
      // full of exhausted messages from holding one transaction for long.
      // A lease that ends at once (a visibility timeout of 0) leaves its messages available: a second
      // pass would hand them out again, so it gets one pass.
      const passes = params.leaseExpiresAt > params.now ? limits.leasePassesMax : 1;
      for (let pass = 0; pass < passes && messages.length < wanted; pass++) {
        const limit = wanted - messages.length;
        const { rows } = locked
          ? await client.query<MessageRow>(sql.messageSelectHeadsForLease, [
              queue.queueId,
              params.now,
              params.expiredBefore,
              limit,
              locked.groups,
            ])
          : await client.query<MessageRow>(sql.messageSelectAvailableForLease, [
              queue.queueId,
              params.now,
              params.expiredBefore,
              limit,
            ]);
        if (rows.length === 0) break;
        const policy = params.deadLetter;
        const exhausted = policy ? rows.filter((row) => row.delivery_count >= policy.maxDeliveries) : [];
        if (policy && exhausted.length > 0) {
          const written = await this.writes.deadLetter(
            client,
            exhausted,
            queue,
            policy,
            "max_deliveries",
            params.now,
            locked?.targets,
          );
          this.link.announceOnCommit(client, ...written);
          deadLettered += exhausted.length;
        }
        messages.push(
          ...(await this.leaseRows(
            client,
            rows.filter((row) => !exhausted.includes(row)),
            params,
          )),
        );
      }
      if (messages.length === 0) return { messages, deadLettered };
      let acked = 0;
      if (params.autoAck) {
        const seqs = messages.map((message) => decodeReceipt(message.receipt)?.seq ?? -1);
        const { removed, promoted } = await this.writes.remove(client, queue, seqs);
        acked = removed;
        if (promoted > 0) this.link.announceOnCommit(client, queue.name);
      }
      await this.writes.addCounters(client, queue.queueId, {
        delivered: messages.length,
        redelivered: messages.filter((message) => message.deliveryCount > 1).length,
        acked,
      });
      return { messages, deadLettered };
    });
  }

  /** Takes a lease on each of the locked rows, each with a token of its own. */
  private async leaseRows(
    client: Client,
    rows: readonly MessageRow[],
    params: LeaseParams,
  ): Promise<LeasedMessage[]> {
    if (rows.length === 0) return [];
    const tokens = rows.map(() => this.queues.random.uint48());
    const updated = await client.query<{
      seq: number;
      delivery_count: number;
      first_delivered_at: number;
    }>(sql.messageLeaseMany, [rows.map((row) => row.seq), tokens, params.leaseExpiresAt, params.now]);
    const bySeq = new Map(updated.rows.map((row) => [row.seq, row]));
    return rows.map((row, index) => {
      const leased = bySeq.get(row.seq);
      invariant(leased, "a locked row is updated");
      return {
        ...toStoredMessage(row),
        visibleAt: params.leaseExpiresAt,
        deliveryCount: leased.delivery_count,
        firstDeliveredAt: leased.first_delivered_at,
        receipt: encodeReceipt(row.seq, tokens[index] as number),
      };
    });
  }

  /**
   * Locks the groups of the FIFO queue's next `wanted` available heads, with, for those heads that
   * used their last delivery, the same groups in the FIFO dead-letter queues they go to: all in one
   * statement, before any message row is locked (the lock order of message-writes.ts).
   */
  private async lockHeadGroups(
    client: Client,
    queue: LockedQueue,
    params: LeaseParams,
    wanted: number,
  ): Promise<{ groups: string[]; targets: LockedQueue[] | undefined }> {
    const { rows } = await client.query<{ group_key: string; delivery_count: number }>(
      sql.messageSelectHeadGroups,
      [queue.queueId, params.now, params.expiredBefore, Math.max(0, wanted)],
    );
    const groups = rows.map((row) => row.group_key);
    const policy = params.deadLetter;
    const exhaustedGroups = policy
      ? rows.filter((row) => row.delivery_count >= policy.maxDeliveries).map((row) => row.group_key)
      : [];
    const targets =
      policy && exhaustedGroups.length > 0 ? await this.writes.lockTargets(client, policy.queues) : undefined;
    await this.writes.lockGroups(client, [
      ...groups.map((groupKey) => ({ queueId: queue.queueId, groupKey })),
      ...(targets ?? [])
        .filter((target) => target.kind === "fifo")
        .flatMap((target) => exhaustedGroups.map((groupKey) => ({ queueId: target.queueId, groupKey }))),
    ]);
    return { groups, targets };
  }
}
