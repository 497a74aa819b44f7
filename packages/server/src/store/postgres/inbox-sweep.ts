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
          await client.query<{ recipient: string; through: number }>(sql.inboxExpiredSelect, [
            inboxId,
            now - attributes.maxAgeMs,
            max,
          ])
        ).rows.map((row) => [row.recipient, row.through]),
      );
      const unseenBefore = now - attributes.forgetDeviceAfterMs;
      const unseen = (
        await client.query<{ recipient: string; device: string }>(sql.inboxDevicesUnseenSelect, [
          inboxId,
          unseenBefore,
          max,
        ])
      ).rows;
      const recipients = recipientOrder([...expiredThrough.keys(), ...unseen.map((row) => row.recipient)]);
      if (recipients.length > 0) await this.writes.lockRecipients(client, inboxId, recipients);

      const expired =
        expiredThrough.size > 0 ? await this.writes.trimExpired(client, inboxId, expiredThrough) : 0;
      let devicesForgotten = 0;
      let acked = 0;
      if (unseen.length > 0) {
        const forgotten = await client.query<{ recipient: string }>(sql.inboxDevicesForget, [
          inboxId,
          unseen.map((row) => row.recipient),
          unseen.map((row) => row.device),
          unseenBefore,
        ]);
        devicesForgotten = forgotten.rows.length;
        if (devicesForgotten > 0) {
          await client.query(sql.inboxCountDevicesForgotten, [
            inboxId,
            this.db.counterShard(),
            devicesForgotten,
          ]);
          const holders = recipientOrder(forgotten.rows.map((row) => row.recipient));
          acked = await this.writes.trimAcked(client, inboxId, attributes, holders, now);
        }
      }
      await client.query(sql.inboxIdsForget, [inboxId, now, max]);
      return { expired, devicesForgotten, acked };
    });
  }
}
