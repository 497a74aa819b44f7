/**
 * The PostgreSQL store's redrive step (QueueStore.queueMove): messages moved out of a queue, oldest
 * first, each to its target, in one transaction, with the order per key kept (redrive-order.ts).
 */
import type { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import { bodyBytes, type NewMessage } from "../../model/message.js";
import type { SendPolicy } from "../../model/policies.js";
import { depthOf } from "../../model/queue.js";
import { notHeldBack, planMoves, redriveTargetOf } from "../redrive-order.js";
import { type MessageRow, toStoredMessage } from "../rows.js";
import type { Store } from "../store.js";
import type { Client } from "./database.js";
import { groupKeyOf, type LockedQueue } from "./message-writes.js";
import { compareNames, QueuePart } from "./queue-context.js";
import * as sql from "./statements/index.js";

type MoveParams = Parameters<Store["queueMove"]>[0];
type MoveResult = Awaited<ReturnType<Store["queueMove"]>>;

/** A target of a redrive step, locked, with its policy and its depth as the step fills it. */
interface MoveTarget {
  queue: LockedQueue;
  policy: SendPolicy;
  depth: number;
}

interface PlannedMove {
  seq: number;
  message: NewMessage;
  target: MoveTarget;
}

export class QueueRedrive extends QueuePart {
  /**
   * A redrive step in one transaction (Store.queueMove). The source's candidates and their targets are
   * read first, so that the target queues (in name order), then every FIFO group involved (in one
   * statement), then the message rows are locked, as message-writes.ts orders locks.
   */
  queueMove(params: MoveParams): Promise<MoveResult> {
    return this.db.transaction(async (client) => {
      const source = await this.queues.lockQueueShared(client, params.queue);
      const { rows: scanned } = await client.query<MessageRow>(sql.messageSelectMovable, [
        source.queueId,
        params.now,
        limits.redriveScanMax,
      ]);
      const { rows: inFlight } = await client.query<MessageRow>(sql.messageSelectInFlightKeys, [
        source.queueId,
        params.now,
      ]);
      const { rows: candidates, held } = notHeldBack(scanned, inFlight, params.max);
      const { moves, stoppedBy } = await this.planMoves(client, candidates, { ...params, source });
      if (moves.length === 0) return { moved: 0, held, targets: [], stoppedBy };
      await this.writes.lockGroups(client, [
        ...(source.kind === "fifo"
          ? moves.map(({ message }) => ({ queueId: source.queueId, groupKey: groupKeyOf(message) }))
          : []),
        ...moves
          .filter(({ target }) => target.queue.kind === "fifo")
          .map(({ message, target }) => ({ queueId: target.queue.queueId, groupKey: groupKeyOf(message) })),
      ]);
      const { rows: lockedRows } = await client.query<MessageRow>(sql.messageSelectMovableBySeqs, [
        source.queueId,
        moves.map(({ seq }) => seq),
        params.now,
      ]);
      // A candidate leased or removed since it was read ends the step there, so order per key holds.
      const still = new Set(lockedRows.map((row) => row.seq));
      const missing = moves.findIndex(({ seq }) => !still.has(seq));
      const moved = missing === -1 ? moves : moves.slice(0, missing);
      if (moved.length === 0) return { moved: 0, held, targets: [], stoppedBy: null };
      // Out of the source first, counted there, so that a target's overflow trim sees the depths as
      // they are (a message moved back into the queue it is in leaves before it arrives).
      const { promoted } = await this.writes.remove(
        client,
        source,
        moved.map(({ seq }) => seq),
      );
      if (promoted > 0) this.link.announceOnCommit(client, source.name);
      await this.writes.addCounters(client, source.queueId, { redriven: moved.length });
      const targets = [...new Set(moved.map(({ target }) => target))];
      for (const target of targets) {
        const messages = moved.filter((move) => move.target === target).map(({ message }) => message);
        const policy = { dedupWindowMs: 0, overflow: target.policy.overflow };
        const { written } = await this.writes.send(client, target.queue, messages, policy, params.now);
        this.link.announceOnCommit(client, ...written);
      }
      return {
        moved: moved.length,
        held,
        targets: targets.map((target) => target.queue.name),
        stoppedBy: missing === -1 ? stoppedBy : null,
      };
    });
  }

  /**
   * Decides where each candidate of a redrive step goes, in order, and where the step stops: before
   * the first candidate without a target, with a target that does not exist or has no policy, or with
   * a full target that refuses. Locks the targets, in name order, for writing (a target with a maxDepth
   * for its depth, read once it is locked).
   */
  private async planMoves(
    client: Client,
    candidates: readonly MessageRow[],
    params: {
      to: string | null;
      now: number;
      policies: ReadonlyMap<string, SendPolicy>;
      source: LockedQueue;
    },
  ): Promise<{ moves: PlannedMove[]; stoppedBy: HopperError | null }> {
    const named = candidates.map((row) => {
      const message = toStoredMessage(row);
      const name = redriveTargetOf(params.to, message.headers);
      const moved = {
        ...message,
        body: bodyBytes(message.body),
        publishedAt: params.now,
        visibleAt: params.now,
      };
      return { seq: row.seq, message: moved, name };
    });
    const firstUnnamed = named.findIndex(({ name }) => name === null);
    const names = new Set(named.slice(0, firstUnnamed === -1 ? undefined : firstUnnamed).map((n) => n.name));
    const targets = new Map<string, MoveTarget>();
    for (const name of [...names].filter((n) => n !== null).sort(compareNames)) {
      const policy = params.policies.get(name);
      if (!policy) continue;
      const queue = await this.writes.lockQueue(client, name, policy.overflow ? "depth" : "share");
      if (!queue) continue;
      const depth = policy.overflow ? depthOf(await this.writes.counters(client, queue.queueId)) : 0;
      targets.set(name, { queue, policy, depth });
    }
    const planned = planMoves(
      named.map(({ seq, message }) => ({ ...message, seq })),
      { source: params.source.name, to: params.to, policies: params.policies },
      (name) => targets.get(name)?.depth,
    );
    const moves = planned.moves.map(({ item: { seq, ...message }, target }) => ({
      seq,
      message,
      target: targets.get(target) as MoveTarget,
    }));
    return { moves, stoppedBy: planned.stoppedBy };
  }
}
