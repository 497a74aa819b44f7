/**
 * What an inbox means on the embedded stores, written once over the row interface (inbox-rows.ts):
 * per-recipient sequences, duplicates by (recipient, message id), idle recipients skipped at append,
 * cursors that only move forward, and the trimming that bounds what is kept (acked by every active
 * device, maxDepth, maxAgeMs, forgotten devices). Every method runs inside one write or read of the
 * store, so an append is all or nothing.
 *
 * Invariant: a recipient's retained entries are the contiguous range [oldest, head]: sequences are
 * given as head + 1 under the store's one writer, and every trim removes a prefix of the range (acked
 * entries up to the lowest active cursor, the oldest beyond maxDepth, the oldest past maxAgeMs, which
 * were appended first). So depth = head - oldest + 1, and no reader ever sees a hole that later fills.
 */
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import type {
  AppendResult,
  DeviceCursor,
  InboxAttributes,
  InboxCounters,
  InboxEntry,
  InboxMessage,
  InboxRecord,
  RecipientState,
} from "../../model/inbox.js";
import type { AppendTarget, InboxRows, InboxSlot } from "./inbox-rows.js";

export function inboxNotFound(name: string): HopperError {
  return new HopperError("inbox_not_found", `Inbox namespace "${name}" does not exist.`, { inbox: name });
}

export class EmbeddedInboxes<N extends InboxSlot> {
  constructor(private readonly rows: InboxRows<N>) {}

  require(name: string): N {
    const inbox = this.rows.inbox(name);
    if (!inbox) throw inboxNotFound(name);
    return inbox;
  }

  upsert(params: { name: string; attributes: InboxAttributes; epoch: string; now: number }): {
    created: boolean;
    inbox: InboxRecord;
  } {
    const existing = this.rows.inbox(params.name);
    if (existing) {
      this.rows.inboxSetAttributes(existing, { ...params.attributes });
      return { created: false, inbox: this.rows.inboxRecord(this.require(params.name)) };
    }
    if (this.rows.inboxCount() >= limits.inboxesMax) throw new HopperError("too_many_inboxes");
    this.rows.inboxInsert(params.name, { ...params.attributes }, params.epoch, params.now);
    return { created: true, inbox: this.rows.inboxRecord(this.require(params.name)) };
  }

  get(name: string): InboxRecord | undefined {
    const inbox = this.rows.inbox(name);
    return inbox && this.rows.inboxRecord(inbox);
  }

  list(): InboxRecord[] {
    return this.rows.inboxRecords();
  }

  delete(name: string): { removed: number } {
    return { removed: this.rows.inboxRemove(this.require(name)) };
  }

  /**
   * InboxStore.inboxAppend. Every recipient's state is read in one batch (appendTargets) and every
   * write is one batch, so that SQLite runs a handful of set-based statements per append, not several
   * per recipient. The body is stored once, and only when some recipient gets an entry.
   */
  append(params: { name: string; recipients: readonly string[]; message: InboxMessage; now: number }): {
    results: AppendResult[];
  } {
    const inbox = this.require(params.name);
    const { attributes } = inbox;
    const { message, now } = params;
    const mark = this.rows.capacityMark();
    const distinct = [...new Set(params.recipients)];
    const targets = this.rows.appendTargets(
      inbox,
      distinct,
      message.id,
      now,
      attributes.stopFanoutAfterMs !== null,
    );
    const answered = new Map<string, AppendResult>();
    const entries: Array<{ recipient: string; seq: number }> = [];
    const skipped: Array<{ recipient: string; head: number }> = [];
    const counted: Partial<InboxCounters> = { appended: 0, duplicates: 0, skipped: 0, overflowed: 0 };
    distinct.forEach((recipient, index) => {
      const target = targets[index] as AppendTarget;
      const head = target.row?.head ?? 0;
      let result: AppendResult;
      if (target.earlierSeq !== undefined) {
        result = { recipient, seq: target.earlierSeq, duplicate: true };
        counted.duplicates = (counted.duplicates ?? 0) + 1;
      } else if (this.idle(inbox, target, now)) {
        result = { recipient, skipped: "idle" };
        skipped.push({ recipient, head });
        counted.skipped = (counted.skipped ?? 0) + 1;
      } else {
        result = { recipient, seq: head + 1, duplicate: false };
        entries.push({ recipient, seq: head + 1 });
      }
      answered.set(recipient, result);
    });
    if (entries.length > 0) {
      const remember =
        attributes.dedupWindowMs > 0
          ? { messageId: message.id, expiresAt: now + attributes.dedupWindowMs }
          : undefined;
      const body = this.rows.bodyInsert(inbox, message);
      this.rows.entriesAppend(inbox, { body, appendedAt: now, entries, remember });
    }
    if (skipped.length > 0) this.rows.recipientsSkip(inbox, skipped);
    for (const entry of entries) {
      // The range is contiguous, so the entries beyond maxDepth are those at or below seq - maxDepth.
      if (entry.seq > attributes.maxDepth) {
        const trimmed = this.rows.entriesTrimThrough(
          inbox,
          entry.recipient,
          entry.seq - attributes.maxDepth,
          now,
        );
        counted.overflowed = (counted.overflowed ?? 0) + trimmed;
      }
    }
    this.rows.capacityCheck(mark);
    counted.appended = entries.length;
    const seen = new Set<string>();
    const results = params.recipients.map((recipient): AppendResult => {
      const result = answered.get(recipient) as AppendResult;
      if (!seen.has(recipient)) {
        seen.add(recipient);
        return result;
      }
      // A recipient named twice in one call is appended once; the repeat answers as a duplicate.
      if (!("seq" in result)) return result;
      counted.duplicates = (counted.duplicates ?? 0) + 1;
      return { recipient, seq: result.seq, duplicate: true };
    });
    this.rows.countersAdd(inbox, counted);
    return { results };
  }

  /**
   * Whether appends skip the recipient: stopFanoutAfterMs is set, and every device it has was last
   * seen that long ago or longer (so its latest lastSeenAt was). A recipient with no device yet is not
   * idle: its first entries wait for its first device, bounded by maxDepth and maxAgeMs.
   */
  private idle(inbox: N, target: AppendTarget, now: number): boolean {
    const { stopFanoutAfterMs } = inbox.attributes;
    if (stopFanoutAfterMs === null || target.lastSeenAt === undefined) return false;
    return target.lastSeenAt <= now - stopFanoutAfterMs;
  }

  read(params: { name: string; recipient: string; after: number; limit: number }): {
    entries: InboxEntry[];
    state: RecipientState;
  } {
    const inbox = this.require(params.name);
    const entries = this.rows.entriesRead(inbox, params.recipient, params.after, params.limit);
    return { entries, state: this.state(inbox, params.recipient) };
  }

  recipientState(name: string, recipient: string): RecipientState {
    return this.state(this.require(name), recipient);
  }

  private state(inbox: N, recipient: string): RecipientState {
    const row = this.rows.recipient(inbox, recipient) ?? { head: 0, skippedAfter: null };
    const oldest = this.rows.oldestSeq(inbox, recipient) ?? row.head + 1;
    return {
      head: row.head,
      oldest,
      epoch: inbox.epoch,
      depth: row.head - oldest + 1,
      devices: this.rows.devices(inbox, recipient),
      skippedAfter: row.skippedAfter,
    };
  }

  /** InboxStore.inboxAck: the cursor moves forward only, then what every active device acked goes. */
  ack(params: { name: string; recipient: string; device: string; seq: number; now: number }): {
    cursor: number;
  } {
    const inbox = this.require(params.name);
    const head = this.rows.recipient(inbox, params.recipient)?.head ?? 0;
    if (params.seq > head)
      throw new HopperError("cursor_beyond_head", `Sequence ${params.seq} is beyond the head ${head}.`, {
        seq: params.seq,
        head,
      });
    const devices = this.rows.devices(inbox, params.recipient);
    const known = devices.find((device) => device.device === params.device);
    if (!known) this.refuseDeviceBeyondMax(devices.length);
    const cursor = Math.max(known?.cursor ?? 0, params.seq);
    this.rows.devicePut(inbox, params.recipient, { device: params.device, cursor, lastSeenAt: params.now });
    this.trimAcked(inbox, params.recipient, params.now);
    return { cursor };
  }

  deviceSeen(params: { name: string; recipient: string; device: string; cursor: number; now: number }): void {
    const inbox = this.require(params.name);
    const devices = this.rows.devices(inbox, params.recipient);
    const known = devices.find((device) => device.device === params.device);
    if (!known) this.refuseDeviceBeyondMax(devices.length);
    const cursor = known?.cursor ?? params.cursor;
    this.rows.devicePut(inbox, params.recipient, { device: params.device, cursor, lastSeenAt: params.now });
  }

  private refuseDeviceBeyondMax(devices: number): void {
    if (devices >= limits.inboxDevicesPerRecipientMax)
      throw new HopperError("too_many_devices", undefined, {
        devicesMax: limits.inboxDevicesPerRecipientMax,
      });
  }

  deviceDelete(params: { name: string; recipient: string; device: string; now: number }): {
    deleted: boolean;
  } {
    const inbox = this.require(params.name);
    const deleted = this.rows.deviceRemove(inbox, params.recipient, params.device);
    if (deleted) this.trimAcked(inbox, params.recipient, params.now);
    return { deleted };
  }

  /**
   * Trims the entries every active device (seen within forgetDeviceAfterMs) has acked, counted as
   * acked. With no active device nothing is trimmed here: entries wait, bounded by maxDepth and
   * maxAgeMs. Answers how many went.
   */
  private trimAcked(inbox: N, recipient: string, now: number): number {
    const active = this.rows
      .devices(inbox, recipient)
      .filter((device: DeviceCursor) => device.lastSeenAt > now - inbox.attributes.forgetDeviceAfterMs);
    if (active.length === 0) return 0;
    const lowest = Math.min(...active.map((device) => device.cursor));
    const trimmed = lowest > 0 ? this.rows.entriesTrimThrough(inbox, recipient, lowest, now) : 0;
    if (trimmed > 0) this.rows.countersAdd(inbox, { acked: trimmed });
    return trimmed;
  }

  /** InboxStore.inboxSweep. */
  sweep(params: { name: string; now: number; max: number }): {
    expired: number;
    devicesForgotten: number;
    acked: number;
  } {
    const inbox = this.require(params.name);
    const { attributes } = inbox;
    const expired = this.rows.entriesExpire(inbox, params.now - attributes.maxAgeMs, params.max, params.now);
    const unseen = this.rows.devicesUnseen(inbox, params.now - attributes.forgetDeviceAfterMs, params.max);
    let acked = 0;
    for (const { recipient, device } of unseen) {
      this.rows.deviceRemove(inbox, recipient, device);
      acked += this.trimAcked(inbox, recipient, params.now);
    }
    this.rows.idsForget(inbox, params.now, params.max);
    this.rows.countersAdd(inbox, { expired, devicesForgotten: unseen.length });
    return { expired, devicesForgotten: unseen.length, acked };
  }
}
