/**
 * The PostgreSQL store's inbox housekeeping (InboxStore.inboxSweep), one transaction per call: finds
 * the entries past maxAgeMs and the devices unseen for forgetDeviceAfterMs (each at most `max`), locks
 * every recipient concerned at once in byte order (never one set and then another, which could wait in
 * a cycle with an append), trims the expired prefixes, forgets the devices and trims what only they
 * held, then forgets the remembered ids whose window ended.
 */
import type { PostgresDatabase } from "./database.js";
import { type InboxWrites, recipientOrder } from "./inbox-writes.js";
import * as sql from "./statements/index.js";

export class InboxSweeps {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly writes: InboxWrites,
  ) {}

  inboxSweep(params: { name: string; now: number; max: number }): Promise<{
    expired: number;
    devicesForgotten: number;
    acked: number;
  }> {
    const { now, max } = params;
    return this.db.transaction(async (client) => {
      const { inboxId, attributes } = await this.writes.holdInbox(client, params.name);
      const expiredThrough = new Map(
        (
          await this.writes.query<{ recipient: string; through: number }>(client, sql.inboxExpiredSelect, [
            inboxId,
            now - attributes.maxAgeMs,
            max,
          ])
        ).rows.map((row) => [row.recipient, row.through]),
      );
      const unseenBefore = now - attributes.forgetDeviceAfterMs;
      const unseen = (
        await this.writes.query<{ recipient: string; device: string }>(client, sql.inboxDevicesUnseenSelect, [
          inboxId,
          unseenBefore,
          max,
        ])
      ).rows;
      const recipients = recipientOrder([...expiredThrough.keys(), ...unseen.map((row) => row.recipient)]);
      if (recipients.length > 0) await this.writes.lockRecipients(client, inboxId, recipients);

      // One counter shard for the whole call, and the bodies released once at the end, in body_id
      // order: the sweep takes each kind of lock in one batch, as every other inbox write does.
      const shard = this.db.counterShard();
      const expired = await this.writes.trimExpired(client, inboxId, shard, expiredThrough);
      let devicesForgotten = 0;
      let acked = { trimmed: 0, released: { bodyIds: [] as number[], counts: [] as number[] } };
      if (unseen.length > 0) {
        const forgotten = await this.writes.query<{ recipient: string }>(client, sql.inboxDevicesForget, [
          inboxId,
          unseen.map((row) => row.recipient),
          unseen.map((row) => row.device),
          unseenBefore,
        ]);
        devicesForgotten = forgotten.rows.length;
        if (devicesForgotten > 0) {
          await this.writes.query(client, sql.inboxCountDevicesForgotten, [inboxId, shard, devicesForgotten]);
          const holders = recipientOrder(forgotten.rows.map((row) => row.recipient));
          acked = await this.writes.trimAcked(client, inboxId, shard, attributes, holders, now);
        }
      }
      await this.writes.releaseBodies(client, expired.released, acked.released);
      await this.writes.query(client, sql.inboxIdsForget, [inboxId, now, max]);
      return { expired: expired.trimmed, devicesForgotten, acked: acked.trimmed };
    });
  }
}
