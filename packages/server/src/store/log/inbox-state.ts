/**
 * The log store's inboxes in memory: every namespace, recipient log, body, cursor and remembered id,
 * changed only through the primitives below, each of which records its inverse (a call that throws is
 * undone) and its change (one JSON change of type `inbox` in the call's log record, records.ts), and
 * which replaying the log calls again. A body is held once per append, with the number of entries that
 * name it, and goes when the last of them is trimmed.
 *
 * Bodies stay in the segment files (DESIGN.md §9): an append's body is its own binary change
 * (records.ts, inboxBody), and once its record is written the log says where its bytes lie; from then
 * the state keeps that place and reads the bytes back from disk when an entry is read, so what waits
 * for absent devices is bounded by the disk, not by memory. A body is in memory only from its append
 * until its batch is written (and in a store without a log). Replay places each body where its
 * record lies, and a compaction's snapshot copies each body into the base and moves its place there
 * before the older segments go (append-log.ts, rewrite's `located`).
 */

import { invariant } from "../../errors.js";
import { limits } from "../../limits.js";
import {
  type DeviceCursor,
  type InboxAttributes,
  type InboxCounters,
  type InboxMessage,
  zeroInboxCounters,
} from "../../model/inbox.js";
import type { AppendedEntries, EntryInsert, RecipientRow } from "../embedded/inbox-rows.js";
import type { SnapshotRecord } from "./append-log.js";
import type { Commits } from "./commits.js";
import { readPlacedBodies } from "./placed-reads.js";
import { changeType, type InboxBodyHead, RecordWriter } from "./records.js";
import { RememberedIds, rememberedIdBytes } from "./remembered-ids.js";

/** Where a body's bytes lie in the log: the segment and the offset of its first byte. */
export interface BodyPlace {
  seq: number;
  offset: number;
}

export interface StoredBody {
  readonly id: string;
  readonly contentType: string;
  readonly headers: Record<string, string>;
  /** Given as text (a JSON body): read back as text. */
  readonly text: boolean;
  readonly byteLength: number;
  /** The bytes, until the log has them (then undefined, and `place` says where). */
  bytes: Buffer | string | undefined;
  place: BodyPlace | undefined;
  refs: number;
}

export interface HeldEntry {
  readonly seq: number;
  readonly bodyId: number;
  readonly appendedAt: number;
}

export interface RecipientLog {
  head: number;
  skippedAfter: number | null;
  /** The retained entries, [oldest, head] in order (embedded/inboxes.ts). */
  entries: HeldEntry[];
  readonly devices: Map<string, DeviceCursor>;
}

export interface InboxState {
  readonly name: string;
  attributes: InboxAttributes;
  readonly epoch: string;
  readonly createdAt: number;
  readonly counters: InboxCounters;
  readonly recipients: Map<string, RecipientLog>;
  readonly bodies: Map<number, StoredBody>;
  nextBodyId: number;
  readonly ids: RememberedIds;
}

/** One change of the inbox state, as the log records it. */
export type InboxChange =
  | { op: "create"; name: string; attributes: InboxAttributes; epoch: string; createdAt: number }
  | { op: "attributes"; name: string; attributes: InboxAttributes }
  | { op: "drop"; name: string }
  | { op: "counters"; name: string; deltas: Partial<InboxCounters> }
  | { op: "recipient"; name: string; recipient: string; head: number; skippedAfter: number | null }
  | { op: "id"; name: string; recipient: string; messageId: string; seq: number; expiresAt: number }
  | { op: "idForget"; name: string; recipient: string; messageId: string }
  | { op: "entries"; name: string; entries: EntryInsert[] }
  | {
      op: "append";
      name: string;
      body: number;
      appendedAt: number;
      recipients: string[];
      seqs: number[];
      remember?: { messageId: string; expiresAt: number };
    }
  | { op: "trim"; name: string; recipient: string; seq: number }
  | { op: "device"; name: string; recipient: string; device: DeviceCursor }
  | { op: "deviceForget"; name: string; recipient: string; device: string };

function bodyBytesOf(body: Buffer | string): number {
  return typeof body === "string" ? Buffer.byteLength(body) : body.length;
}

export class LogInboxState {
  readonly inboxes = new Map<string, InboxState>();
  /** Bytes of bodies that lie only in the segment files: what a snapshot copies besides liveBytes. */
  diskBytes = 0;
  /** Reads a placed body back (AppendLog.readAt), once the store has its log. */
  readPlaced: (seq: number, offset: number, length: number) => Buffer = () => {
    invariant(false, "a body was placed in a log that is not open");
  };

  constructor(
    private readonly commits: Commits,
    /** Adds to (or, negative, takes from) what the store holds: its memory bound and compaction. */
    private readonly hold: (bytes: number) => void,
  ) {}

  private record(change: InboxChange, undo: () => void): void {
    this.commits.changed(undo, (writer) => writer.json({ type: changeType.inbox, change }));
  }

  /** Applies one change read from the log, through the same primitives. */
  apply(change: InboxChange): void {
    if (change.op === "create") {
      this.create(change.name, change.attributes, change.epoch, change.createdAt);
      return;
    }
    const inbox = this.inboxes.get(change.name);
    invariant(inbox, `the log names inbox "${change.name}" before creating it`);
    switch (change.op) {
      case "attributes":
        this.setAttributes(inbox, change.attributes);
        return;
      case "drop":
        this.drop(inbox);
        return;
      case "counters":
        this.addCounters(inbox, change.deltas);
        return;
      case "recipient":
        this.putRecipient(inbox, change.recipient, change);
        return;
      case "id":
        this.rememberId(inbox, change.recipient, change.messageId, change.seq, change.expiresAt);
        return;
      case "idForget":
        this.forgetId(inbox, change.recipient, change.messageId);
        return;
      case "entries":
        this.insertEntries(inbox, change.entries);
        return;
      case "append": {
        const { body, appendedAt, recipients, seqs, remember } = change;
        const entries = recipients.map((recipient, index) => ({ recipient, seq: seqs[index] as number }));
        this.appendEntries(inbox, { body, appendedAt, entries, remember });
        return;
      }
      case "trim":
        this.trimThrough(inbox, change.recipient, change.seq);
        return;
      case "device":
        this.putDevice(inbox, change.recipient, change.device);
        return;
      case "deviceForget":
        this.forgetDevice(inbox, change.recipient, change.device);
        return;
    }
  }

  /**
   * The state as changes, for a snapshot: each namespace whole, then the next. Each body is a record
   * of its own, pushed to `records` after what the writer holds so far (`flush`), whose bytes are read
   * when the rewrite reaches it and whose place moves to the base once written.
   */
  snapshot(writer: RecordWriter, cut: () => void, flush: () => void, records: SnapshotRecord[]): void {
    const emit = (change: InboxChange) => writer.json({ type: changeType.inbox, change });
    for (const inbox of this.inboxes.values()) {
      const { name, attributes, epoch, createdAt } = inbox;
      emit({ op: "create", name, attributes, epoch, createdAt });
      emit({ op: "counters", name, deltas: { ...inbox.counters } });
      flush();
      for (const [bodyId, body] of inbox.bodies) records.push(this.bodyRecord(inbox, bodyId, body));
      for (const [recipient, log] of inbox.recipients) {
        emit({ op: "recipient", name, recipient, head: log.head, skippedAfter: log.skippedAfter });
        const entries = log.entries.map(({ seq, bodyId, appendedAt }) => ({
          recipient,
          seq,
          body: bodyId,
          appendedAt,
        }));
        if (entries.length > 0) emit({ op: "entries", name, entries });
        for (const device of log.devices.values()) emit({ op: "device", name, recipient, device });
        cut();
      }
      for (const { recipient, messageId, seq, expiresAt } of inbox.ids.entries()) {
        emit({ op: "id", name, recipient, messageId, seq, expiresAt });
        cut();
      }
    }
  }

  /** One body as a snapshot record: its bytes as they are now, in memory or where they lie. */
  private bodyRecord(inbox: InboxState, bodyId: number, body: StoredBody): SnapshotRecord {
    const { bytes, place } = body;
    let bodyAt = 0;
    return {
      record: () => {
        const recordWriter = new RecordWriter();
        recordWriter.inboxBody(bodyHead(inbox.name, bodyId, body), bytes ?? this.read(body, place), () => {});
        bodyAt = recordWriter.takeLocates()[0]?.offset ?? 0;
        return Buffer.from(recordWriter.take());
      },
      located: (seq, offset) => this.placed(inbox, bodyId, { seq, offset: offset + bodyAt }),
    };
  }

  /** The body's bytes: held, or read back from where they lie. */
  bodyBytes(body: StoredBody): Buffer | string {
    return body.bytes ?? this.read(body, body.place);
  }

  /** The bytes of several bodies, in their order (readPlacedBodies: close ones in one read). */
  bodiesBytes(bodies: readonly StoredBody[]): Array<Buffer | string> {
    return readPlacedBodies(bodies, this.readPlaced);
  }

  private read(body: StoredBody, place: BodyPlace | undefined): Buffer | string {
    invariant(place, "a body not held in memory has a place in the log");
    const bytes = this.readPlaced(place.seq, place.offset, body.byteLength);
    return body.text ? bytes.toString("utf8") : bytes;
  }

  /** The log has the body's bytes at `place`: memory no longer holds them. Not a change of state (no
   * record): replay and compaction place bodies again. */
  private placed(inbox: InboxState, bodyId: number, place: BodyPlace): void {
    const body = inbox.bodies.get(bodyId);
    if (!body) return;
    body.place = place;
    if (body.bytes === undefined) return;
    body.bytes = undefined;
    this.hold(-body.byteLength);
    this.diskBytes += body.byteLength;
  }

  /** Replays an append's body change: placed where its record lies. */
  applyBody(head: InboxBodyHead, body: Buffer, place: BodyPlace): void {
    const inbox = this.inboxes.get(head.inbox);
    invariant(inbox, `the log names inbox "${head.inbox}" before creating it`);
    this.storeBody(inbox, head.bodyId, {
      ...head,
      byteLength: body.length,
      bytes: undefined,
      place,
      refs: 0,
    });
  }

  // ---- the primitives

  create(name: string, attributes: InboxAttributes, epoch: string, createdAt: number): void {
    const inbox: InboxState = {
      name,
      attributes,
      epoch,
      createdAt,
      counters: { ...zeroInboxCounters },
      recipients: new Map(),
      bodies: new Map(),
      nextBodyId: 1,
      ids: new RememberedIds(),
    };
    this.inboxes.set(name, inbox);
    this.record({ op: "create", name, attributes, epoch, createdAt }, () => this.inboxes.delete(name));
  }

  setAttributes(inbox: InboxState, attributes: InboxAttributes): void {
    const before = inbox.attributes;
    inbox.attributes = attributes;
    this.record({ op: "attributes", name: inbox.name, attributes }, () => {
      inbox.attributes = before;
    });
  }

  /** Removes the namespace whole; what it held no longer counts. */
  drop(inbox: InboxState): void {
    const held = heldBytes(inbox);
    let onDisk = 0;
    for (const body of inbox.bodies.values()) if (body.bytes === undefined) onDisk += body.byteLength;
    this.inboxes.delete(inbox.name);
    this.hold(-held);
    this.diskBytes -= onDisk;
    this.record({ op: "drop", name: inbox.name }, () => {
      this.hold(held);
      this.diskBytes += onDisk;
      this.inboxes.set(inbox.name, inbox);
    });
  }

  addCounters(inbox: InboxState, deltas: Partial<InboxCounters>): void {
    const counters = inbox.counters as unknown as Record<string, number>;
    const add = (sign: number) => {
      for (const [name, delta] of Object.entries(deltas))
        counters[name] = (counters[name] ?? 0) + sign * (delta ?? 0);
    };
    add(1);
    this.record({ op: "counters", name: inbox.name, deltas }, () => add(-1));
  }

  recipientLog(inbox: InboxState, recipient: string): RecipientLog | undefined {
    return inbox.recipients.get(recipient);
  }

  putRecipient(inbox: InboxState, recipient: string, row: RecipientRow): void {
    const existing = inbox.recipients.get(recipient);
    const before = existing && { head: existing.head, skippedAfter: existing.skippedAfter };
    const undo: Array<() => void> = [];
    const log = existing ?? this.addRecipient(inbox, recipient, undo);
    log.head = row.head;
    log.skippedAfter = row.skippedAfter;
    this.record(
      { op: "recipient", name: inbox.name, recipient, head: row.head, skippedAfter: row.skippedAfter },
      () => {
        if (before) Object.assign(log, before);
        undo[0]?.();
      },
    );
  }

  /** A new recipient's empty log, held; its inverse pushed to `undo` (the caller records the change). */
  private addRecipient(inbox: InboxState, recipient: string, undo: Array<() => void>): RecipientLog {
    const log: RecipientLog = { head: 0, skippedAfter: null, entries: [], devices: new Map() };
    inbox.recipients.set(recipient, log);
    const bytes = limits.logInboxItemOverheadBytes + recipient.length;
    this.hold(bytes);
    undo.push(() => {
      if (inbox.recipients.get(recipient) === log) inbox.recipients.delete(recipient);
      this.hold(-bytes);
    });
    return log;
  }

  rememberId(inbox: InboxState, recipient: string, messageId: string, seq: number, expiresAt: number): void {
    const undo: Array<() => void> = [];
    this.rememberQuietly(inbox, recipient, messageId, seq, expiresAt, undo);
    this.record({ op: "id", name: inbox.name, recipient, messageId, seq, expiresAt }, () => undo[0]?.());
  }

  forgetId(inbox: InboxState, recipient: string, messageId: string): void {
    const before = inbox.ids.get(recipient, messageId);
    if (!before) return;
    inbox.ids.delete(recipient, messageId);
    const bytes = limits.logInboxItemOverheadBytes + rememberedIdBytes(recipient, messageId);
    this.hold(-bytes);
    this.record({ op: "idForget", name: inbox.name, recipient, messageId }, () => {
      this.hold(bytes);
      inbox.ids.set(recipient, messageId, before);
    });
  }

  /** Stores an append's message once; answers its id. Its count of entries starts at 0. */
  putBody(inbox: InboxState, message: InboxMessage): number {
    const bodyId = inbox.nextBodyId;
    const text = typeof message.body === "string";
    const body: StoredBody = {
      id: message.id,
      contentType: message.contentType,
      headers: message.headers,
      text,
      byteLength: bodyBytesOf(message.body),
      bytes: message.body,
      place: undefined,
      refs: 0,
    };
    this.storeBody(inbox, bodyId, body);
    this.commits.changed(
      () => this.unstoreBody(inbox, bodyId),
      (writer) =>
        writer.inboxBody(bodyHead(inbox.name, bodyId, body), message.body, (seq, offset) =>
          this.placed(inbox, bodyId, { seq, offset }),
        ),
    );
    return bodyId;
  }

  private storeBody(inbox: InboxState, bodyId: number, body: StoredBody): void {
    inbox.nextBodyId = Math.max(inbox.nextBodyId, bodyId + 1);
    inbox.bodies.set(bodyId, body);
    this.hold(heldBodyBytes(body));
    if (body.bytes === undefined) this.diskBytes += body.byteLength;
  }

  /** Takes back storeBody (a call undone: its record was never written, so the body is in memory). */
  private unstoreBody(inbox: InboxState, bodyId: number): void {
    const body = inbox.bodies.get(bodyId);
    if (!body) return;
    inbox.bodies.delete(bodyId);
    inbox.nextBodyId = bodyId;
    this.hold(-heldBodyBytes(body));
    if (body.bytes === undefined) this.diskBytes -= body.byteLength;
  }

  insertEntries(inbox: InboxState, entries: readonly EntryInsert[]): void {
    if (entries.length === 0) return;
    for (const entry of entries) {
      const log = inbox.recipients.get(entry.recipient);
      const body = inbox.bodies.get(entry.body);
      invariant(log && body, `an entry for ${entry.recipient} names its recipient and body`);
      log.entries.push({ seq: entry.seq, bodyId: entry.body, appendedAt: entry.appendedAt });
      body.refs += 1;
    }
    const bytes = entries.length * limits.logInboxItemOverheadBytes;
    this.hold(bytes);
    this.record({ op: "entries", name: inbox.name, entries: [...entries] }, () => {
      this.hold(-bytes);
      for (const entry of [...entries].reverse()) {
        inbox.recipients.get(entry.recipient)?.entries.pop();
        const body = inbox.bodies.get(entry.body);
        if (body) body.refs -= 1;
      }
    });
  }

  /**
   * One append's entries as one change (an append to 50 recipients writes one record, not 101): each
   * recipient's head moves to its seq (its log created if need be), its entry goes on, and with
   * `remember` the message id is kept for it. Undone as a whole.
   */
  appendEntries(inbox: InboxState, append: AppendedEntries): void {
    const { body: bodyId, appendedAt, entries, remember } = append;
    const body = inbox.bodies.get(bodyId);
    invariant(body, "an append's entries name its body");
    const undo: Array<() => void> = [];
    for (const { recipient, seq } of entries) {
      const log = inbox.recipients.get(recipient) ?? this.addRecipient(inbox, recipient, undo);
      const head = log.head;
      log.head = seq;
      log.entries.push({ seq, bodyId, appendedAt });
      undo.push(() => {
        log.entries.pop();
        log.head = head;
      });
      if (remember) this.rememberQuietly(inbox, recipient, remember.messageId, seq, remember.expiresAt, undo);
    }
    body.refs += entries.length;
    const bytes = entries.length * limits.logInboxItemOverheadBytes;
    this.hold(bytes);
    const recipients = entries.map((entry) => entry.recipient);
    const seqs = entries.map((entry) => entry.seq);
    this.record(
      {
        op: "append",
        name: inbox.name,
        body: bodyId,
        appendedAt,
        recipients,
        seqs,
        ...(remember && { remember }),
      },
      () => {
        this.hold(-bytes);
        body.refs -= entries.length;
        for (const step of undo.reverse()) step();
      },
    );
  }

  /** rememberId's state change alone, its inverse pushed to `undo`: the caller records the change. */
  private rememberQuietly(
    inbox: InboxState,
    recipient: string,
    messageId: string,
    seq: number,
    expiresAt: number,
    undo: Array<() => void>,
  ): void {
    const before = inbox.ids.set(recipient, messageId, { seq, expiresAt });
    const bytes = before ? 0 : limits.logInboxItemOverheadBytes + rememberedIdBytes(recipient, messageId);
    this.hold(bytes);
    undo.push(() => {
      this.hold(-bytes);
      if (before) inbox.ids.set(recipient, messageId, before);
      else inbox.ids.delete(recipient, messageId);
    });
  }

  /** Removes the recipient's entries at or below `seq`, and the bodies no entry names any more. */
  trimThrough(inbox: InboxState, recipient: string, seq: number): number {
    const log = inbox.recipients.get(recipient);
    if (!log) return 0;
    let count = 0;
    while (count < log.entries.length && (log.entries[count] as HeldEntry).seq <= seq) count++;
    if (count === 0) return 0;
    const removed = log.entries.splice(0, count);
    const freedBodies: Array<[number, StoredBody]> = [];
    for (const entry of removed) {
      const body = inbox.bodies.get(entry.bodyId);
      invariant(body, "a retained entry's body is held");
      body.refs -= 1;
      if (body.refs === 0) {
        inbox.bodies.delete(entry.bodyId);
        freedBodies.push([entry.bodyId, body]);
      }
    }
    const freed =
      count * limits.logInboxItemOverheadBytes +
      freedBodies.reduce((sum, [, body]) => sum + heldBodyBytes(body), 0);
    const freedOnDisk = freedBodies.reduce(
      (sum, [, body]) => sum + (body.bytes === undefined ? body.byteLength : 0),
      0,
    );
    this.hold(-freed);
    this.diskBytes -= freedOnDisk;
    this.record({ op: "trim", name: inbox.name, recipient, seq }, () => {
      this.hold(freed);
      this.diskBytes += freedOnDisk;
      for (const [bodyId, body] of freedBodies) inbox.bodies.set(bodyId, body);
      for (const entry of removed) {
        const body = inbox.bodies.get(entry.bodyId);
        if (body) body.refs += 1;
      }
      log.entries.unshift(...removed);
    });
    return count;
  }

  putDevice(inbox: InboxState, recipient: string, device: DeviceCursor): void {
    const log = inbox.recipients.get(recipient) ?? this.emptyRecipient(inbox, recipient);
    const before = log.devices.get(device.device);
    log.devices.set(device.device, { ...device });
    const bytes = before ? 0 : limits.logInboxItemOverheadBytes + device.device.length;
    this.hold(bytes);
    this.record({ op: "device", name: inbox.name, recipient, device: { ...device } }, () => {
      this.hold(-bytes);
      if (before) log.devices.set(device.device, before);
      else log.devices.delete(device.device);
    });
  }

  forgetDevice(inbox: InboxState, recipient: string, device: string): boolean {
    const log = inbox.recipients.get(recipient);
    const before = log?.devices.get(device);
    if (!log || !before) return false;
    log.devices.delete(device);
    const bytes = limits.logInboxItemOverheadBytes + device.length;
    this.hold(-bytes);
    this.record({ op: "deviceForget", name: inbox.name, recipient, device }, () => {
      this.hold(bytes);
      log.devices.set(device, before);
    });
    return true;
  }

  /** A recipient known only by a device (one that subscribed before anything was appended to it). */
  private emptyRecipient(inbox: InboxState, recipient: string): RecipientLog {
    this.putRecipient(inbox, recipient, { head: 0, skippedAfter: null });
    return inbox.recipients.get(recipient) as RecipientLog;
  }
}

function bodyHead(inbox: string, bodyId: number, body: StoredBody): InboxBodyHead {
  return {
    inbox,
    bodyId,
    id: body.id,
    contentType: body.contentType,
    headers: body.headers,
    text: body.text,
  };
}

/** What a body costs the store's memory: its bytes while it holds them, and its fields. */
function heldBodyBytes(body: StoredBody): number {
  return limits.logInboxItemOverheadBytes + (body.bytes === undefined ? 0 : body.byteLength);
}

/** What a namespace holds, as the primitives counted it. */
function heldBytes(inbox: InboxState): number {
  let bytes = 0;
  for (const body of inbox.bodies.values()) bytes += heldBodyBytes(body);
  for (const [recipient, log] of inbox.recipients) {
    bytes +=
      limits.logInboxItemOverheadBytes +
      recipient.length +
      log.entries.length * limits.logInboxItemOverheadBytes;
    for (const device of log.devices.keys()) bytes += limits.logInboxItemOverheadBytes + device.length;
  }
  for (const { recipient, messageId } of inbox.ids.entries())
    bytes += limits.logInboxItemOverheadBytes + rememberedIdBytes(recipient, messageId);
  return bytes;
}
