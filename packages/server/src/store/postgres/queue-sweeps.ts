/**
 * The PostgreSQL store's housekeeping sweeps, which the leading node runs: expiry past retention
 * (QueueStore.queueExpire) and the dead-lettering of leases that ended on their last delivery
 * (QueueStore.queueDeadLetterExhausted). In a FIFO queue each step locks a bounded number of groups.
 */

import { limits } from "../../limits.js";
import type { MessageRow } from "../rows.js";
import type { Store } from "../store.js";
import type { LockedQueue } from "./message-writes.js";
import { QueuePart } from "./queue-context.js";
import * as sql from "./statements/index.js";

type DeadLetterExhaustedParams = Parameters<Store["queueDeadLetterExhausted"]>[0];

export class QueueSweeps extends QueuePart {
  /**
   * Deletes what is past retention; in a FIFO queue only in the groups it could lock (at most
   * postgresGroupLocksMax), handing each group whose head went to its next message. Then forgets
   * dedupIds whose window ended.
   */
  queueExpire(params: {
    queue: string;
    expiredBefore: number;
    max: number;
    now: number;
  }): Promise<{ expired: number }> {
    return this.db.transaction(async (client) => {
      const queue = await this.queues.lockQueueShared(client, params.queue);
      let groups: string[] | null = null;
      if (queue.kind === "fifo") {
        const { rows } = await client.query<{ group_key: string }>(sql.messageSelectExpiredGroups, [
          queue.queueId,
          params.expiredBefore,
          params.max,
        ]);
        groups = [...new Set(rows.map((row) => row.group_key))].slice(0, limits.postgresGroupLocksMax);
        await this.writes.lockGroups(
          client,
          groups.map((groupKey) => ({ queueId: queue.queueId, groupKey })),
        );
      }
      const { rows } = await client.query<{ group_key: string | null; head: boolean }>(
        sql.messageDeleteExpired,
        [queue.queueId, params.expiredBefore, params.max, groups],
      );
      if (rows.length > 0) await this.writes.addCounters(client, queue.queueId, { expired: rows.length });
      const heads = rows.filter((row) => row.head).map((row) => row.group_key);
      if ((await this.writes.promoteHeads(client, queue, heads)) > 0)
        this.link.announceOnCommit(client, queue.name);
      await client.query(sql.dedupDeleteExpired, [queue.queueId, params.now, params.max]);
      return { expired: rows.length };
    });
  }

  /**
   * Dead-letters the leases that ended in the window having used their last delivery; in a FIFO queue
   * only in the groups it could lock (at most postgresGroupLocksMax), locked with the same groups of
   * FIFO dead-letter queues before any row.
   */
  queueDeadLetterExhausted(params: DeadLetterExhaustedParams): Promise<{ deadLettered: number }> {
    return this.db.transaction(async (client) => {
      const queue = await this.queues.lockQueueShared(client, params.queue);
      const window = [
        queue.queueId,
        params.visibleFrom,
        params.now,
        params.deadLetter.maxDeliveries,
        params.max,
      ];
      let groups: string[] | null = null;
      let targets: LockedQueue[] | undefined;
      if (queue.kind === "fifo") {
        const { rows } = await client.query<{ group_key: string }>(sql.messageSelectExhaustedGroups, window);
        groups = [...new Set(rows.map((row) => row.group_key))].slice(0, limits.postgresGroupLocksMax);
        targets = await this.writes.lockTargets(client, params.deadLetter.queues);
        const keys = groups;
        await this.writes.lockGroups(
          client,
          [queue, ...targets.filter((target) => target.kind === "fifo")].flatMap((locked) =>
            keys.map((groupKey) => ({ queueId: locked.queueId, groupKey })),
          ),
        );
      }
      const { rows } = await client.query<MessageRow>(sql.messageSelectExhausted, [...window, groups]);
      const written = await this.writes.deadLetter(
        client,
        rows,
        queue,
        params.deadLetter,
        "max_deliveries",
        params.now,
        targets,
      );
      this.link.announceOnCommit(client, ...written);
      return { deadLettered: rows.length };
    });
  }
}
