/**
 * The log store's inbox rows (embedded/inbox-rows.ts): the inboxes in memory (inbox-state.ts),
 * changed only through its primitives. What the rows mean is in the engine (embedded/inboxes.ts).
 */

import { invariant } from "../../errors.js";
import type {
  DeviceCursor,
  InboxAttributes,
  InboxCounters,
  InboxEntry,
  InboxMessage,
  InboxRecord,
} from "../../model/inbox.js";
import type { AppendedEntries, AppendTarget, InboxRows, RecipientRow } from "../embedded/inbox-rows.js";
import type { HeldEntry, InboxState, LogInboxState, StoredBody } from "./inbox-state.js";
import { compareText } from "./queue-state.js";

export class LogInboxRows implements InboxRows<InboxState> {
  constructor(
    private readonly state: LogInboxState,
    /** What the store holds now, and its bound (the queue rows' capacity check). */
    private readonly capacity: { mark(): number; check(mark: number): void },
  ) {}

  inbox(name: string): InboxState | undefined {
    return this.state.inboxes.get(name);
  }

  inboxRecord(inbox: InboxState): InboxRecord {
    let entries = 0;
    for (const log of inbox.recipients.values()) entries += log.entries.length;
    return {
      name: inbox.name,
      attributes: inbox.attributes,
      epoch: inbox.epoch,
      createdAt: inbox.createdAt,
      counters: { ...inbox.counters },
      entries,
      recipients: inbox.recipients.size,
    };
  }

  inboxRecords(): InboxRecord[] {
    return [...this.state.inboxes.values()]
      .sort((a, b) => compareText(a.name, b.name))
      .map((inbox) => this.inboxRecord(inbox));
  }

  inboxCount(): number {
    return this.state.inboxes.size;
  }

  inboxInsert(name: string, attributes: InboxAttributes, epoch: string, now: number): void {
    this.state.create(name, attributes, epoch, now);
  }

  inboxSetAttributes(inbox: InboxState, attributes: InboxAttributes): void {
    this.state.setAttributes(inbox, attributes);
  }

  inboxRemove(inbox: InboxState): number {
    const { entries } = this.inboxRecord(inbox);
    this.state.drop(inbox);
    return entries;
  }

  countersAdd(inbox: InboxState, deltas: Partial<InboxCounters>): void {
    if (Object.values(deltas).some((delta) => delta !== 0)) this.state.addCounters(inbox, deltas);
  }

  recipient(inbox: InboxState, recipient: string): RecipientRow | undefined {
    const log = inbox.recipients.get(recipient);
    return log && { head: log.head, skippedAfter: log.skippedAfter };
  }

  appendTargets(
    inbox: InboxState,
    recipients: readonly string[],
    messageId: string,
    now: number,
    withDevices: boolean,
  ): AppendTarget[] {
    return recipients.map((recipient) => {
      const log = inbox.recipients.get(recipient);
      const remembered = inbox.ids.get(recipient, messageId);
      let lastSeenAt: number | undefined;
      if (withDevices && log)
        for (const device of log.devices.values()) lastSeenAt = Math.max(lastSeenAt ?? 0, device.lastSeenAt);
      return {
        row: log && { head: log.head, skippedAfter: log.skippedAfter },
        earlierSeq: remembered && remembered.expiresAt > now ? remembered.seq : undefined,
        lastSeenAt,
      };
    });
  }

  recipientsSkip(inbox: InboxState, skipped: ReadonlyArray<{ recipient: string; head: number }>): void {
    for (const { recipient, head } of skipped)
      this.state.putRecipient(inbox, recipient, { head, skippedAfter: head });
  }

  oldestSeq(inbox: InboxState, recipient: string): number | undefined {
    return inbox.recipients.get(recipient)?.entries[0]?.seq;
  }

  depth(inbox: InboxState, recipient: string): number {
    return inbox.recipients.get(recipient)?.entries.length ?? 0;
  }

  idsForget(inbox: InboxState, now: number, max: number): number {
    const expired: Array<{ recipient: string; messageId: string }> = [];
    for (const remembered of inbox.ids.entries()) {
      if (expired.length >= max) break;
      if (remembered.expiresAt <= now) expired.push(remembered);
    }
    for (const { recipient, messageId } of expired) this.state.forgetId(inbox, recipient, messageId);
    return expired.length;
  }

  bodyInsert(inbox: InboxState, message: InboxMessage): number {
    return this.state.putBody(inbox, message);
  }

  entriesAppend(inbox: InboxState, append: AppendedEntries): void {
    this.state.appendEntries(inbox, append);
  }

  entriesRead(inbox: InboxState, recipient: string, after: number, limit: number): InboxEntry[] {
    const log = inbox.recipients.get(recipient);
    if (!log || log.entries.length === 0) return [];
    // The entries are [oldest, head] in order: the first after the cursor is found by its distance.
    const start = Math.max(0, after + 1 - (log.entries[0] as HeldEntry).seq);
    const entries = log.entries.slice(start, start + limit);
    const bodies = entries.map((entry) => {
      const body = inbox.bodies.get(entry.bodyId);
      invariant(body, "a retained entry's body is held");
      return body;
    });
    const bytes = this.state.bodiesBytes(bodies);
    return entries.map((entry, index) => {
      const body = bodies[index] as StoredBody;
      return {
        seq: entry.seq,
        id: body.id,
        body: bytes[index] as Buffer | string,
        contentType: body.contentType,
        headers: body.headers,
        appendedAt: entry.appendedAt,
      };
    });
  }

  /** The log store keeps a remembered id in memory from its append on (appendEntries): `now` is not needed. */
  entriesTrimThrough(inbox: InboxState, recipient: string, seq: number, _now: number): number {
    return this.state.trimThrough(inbox, recipient, seq);
  }

  /** A scan of the namespace's recipients (docs/log-store.md "Costs"). */
  entriesExpire(inbox: InboxState, appendedBefore: number, max: number, _now: number): number {
    let expired = 0;
    for (const [recipient, log] of inbox.recipients) {
      if (expired >= max) break;
      let through: number | undefined;
      let count = 0;
      for (const entry of log.entries) {
        if (entry.appendedAt > appendedBefore || expired + count >= max) break;
        through = entry.seq;
        count++;
      }
      if (through !== undefined) expired += this.state.trimThrough(inbox, recipient, through);
    }
    return expired;
  }

  devices(inbox: InboxState, recipient: string): DeviceCursor[] {
    const devices = inbox.recipients.get(recipient)?.devices;
    return devices
      ? [...devices.values()].sort((a, b) => compareText(a.device, b.device)).map((d) => ({ ...d }))
      : [];
  }

  devicePut(inbox: InboxState, recipient: string, device: DeviceCursor): void {
    this.state.putDevice(inbox, recipient, device);
  }

  deviceRemove(inbox: InboxState, recipient: string, device: string): boolean {
    return this.state.forgetDevice(inbox, recipient, device);
  }

  devicesUnseen(
    inbox: InboxState,
    seenBefore: number,
    max: number,
  ): Array<{ recipient: string; device: string }> {
    const unseen: Array<{ recipient: string; device: string }> = [];
    for (const [recipient, log] of inbox.recipients) {
      for (const device of log.devices.values()) {
        if (unseen.length >= max) return unseen;
        if (device.lastSeenAt <= seenBefore) unseen.push({ recipient, device: device.device });
      }
    }
    return unseen;
  }

  capacityMark(): number {
    return this.capacity.mark();
  }

  capacityCheck(mark: number): void {
    this.capacity.check(mark);
  }
}
