/**
 * What inboxes do (DESIGN.md §6, docs/inboxes.md): the one object the protocol adapters call for inbox
 * namespaces, fan-out appends, reads from a cursor, device acks and recipients' state. It validates
 * every input before the store is called (a refused call changes nothing), decides what a cursor means
 * (model/inbox.ts gapOf: a hole is told as `inbox_gap`, never skipped silently), advances each
 * recipient's wake-up topic once an append has committed, so that long polls and live subscriptions
 * look again, and runs retention (inbox-housekeeping.ts). It knows no protocol.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import {
  type AppendResult,
  gapOf,
  type InboxCounters,
  type InboxEntry,
  type InboxRecord,
  type RecipientState,
} from "../model/inbox.js";
import {
  defaultInboxAttributes,
  type InboxAttributesInput,
  resolveInboxAttributes,
} from "../model/inbox-attributes.js";
import { bodyByteLength } from "../model/message.js";
import { decodeMessageBody } from "../model/message-body.js";
import type { Random } from "../random.js";
import type { StoreEvent } from "../store/store.js";
import { type InboxBrokerStore, InboxHousekeeping, type SweepTotals } from "./inbox-housekeeping.js";
import { type InboxLiveFigures, InboxLiveStats } from "./inbox-stats.js";
import { checkName, type Logger } from "./queue-context.js";
import { Wakeups } from "./wake.js";

export type { InboxBrokerStore } from "./inbox-housekeeping.js";

/** The topic of a recipient's wake-ups (wake.ts): it advances whenever entries may have been appended. */
export function inboxTopic(namespace: string, recipient: string): string {
  return `inbox:${namespace}:${recipient}`;
}

/** What a namespace holds now, and its counters since it was created. */
export interface InboxStats extends InboxCounters {
  entries: number;
  recipients: number;
}

export interface InboxInfo {
  name: string;
  epoch: string;
  attributes: InboxRecord["attributes"];
  stats: InboxStats;
  createdAt: number;
}

/** An append as a protocol adapter hands it over: the message as on the wire, its body not yet decoded. */
export interface AppendRequest {
  recipients: readonly string[];
  message: {
    id: string;
    body?: unknown;
    bodyBase64?: string;
    contentType?: string;
    headers?: Record<string, string>;
  };
}

export interface ReadOptions {
  /** The cursor: entries after this sequence. */
  after: number;
  /** The epoch the cursor was read in; required when `after` is above 0. */
  epoch?: string | undefined;
  /** At most this many entries (default limits.inboxReadLimitDefault). */
  limit?: number | undefined;
  /** With nothing after the cursor, wait up to this long for an append (a long poll). */
  waitMs?: number | undefined;
  /** Ends the wait when the caller goes away. */
  signal?: AbortSignal | undefined;
}

export interface ReadResult {
  entries: InboxEntry[];
  head: number;
  oldest: number;
  epoch: string;
}

/** A recipient's log, its devices' cursors, and which of them have a live subscription on this node. */
export type RecipientInfo = RecipientState & { connected: string[] };

const namePattern = new RegExp(limits.namePattern);
const headerNamePattern = new RegExp(`^[A-Za-z0-9_.:-]{1,${limits.headerNameLengthMax}}$`);

/** Answers the catalog error for a bad value of the request, which then changes nothing. */
function invalid(message: string, details?: Record<string, unknown>): HopperError {
  return new HopperError("invalid_request", message, details);
}

function checkInteger(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max}.`, { [name]: value });
  }
}

/**
 * A cursor cannot read on without a hole (gapOf). The client resyncs from the application's history,
 * then reads on after `head` in `epoch`.
 */
export function inboxGap(
  position: { oldest: number; head: number; epoch: string },
  reason: "trimmed" | "epoch" | "skipped",
): HopperError {
  const why = {
    trimmed: "the entries after it are no longer retained",
    epoch: "it comes from another epoch of the namespace",
    skipped: "appends skipped the recipient while its devices were idle",
  }[reason];
  return new HopperError("inbox_gap", `This cursor cannot read on: ${why}. Resync from history.`, {
    oldest: position.oldest,
    head: position.head,
    epoch: position.epoch,
    reason,
  });
}

export class InboxBroker {
  /** Each recipient's topic (inboxTopic) advances after every append that gave it an entry. */
  readonly wake: Wakeups;
  private readonly housekeeping: InboxHousekeeping;
  private readonly live = new InboxLiveStats();
  /** Devices with a live subscription, per namespace and recipient, with how many each holds. */
  private readonly connections = new Map<string, Map<string, Map<string, number>>>();
  /** Long polls of read() in progress, per namespace and recipient. */
  private readonly waitingReads = new Map<string, Map<string, number>>();
  private stopped = false;

  constructor(
    private readonly store: InboxBrokerStore,
    private readonly clock: Clock,
    private readonly random: Random,
    log: Logger = { info: () => {}, warn: console.warn, error: console.error },
  ) {
    this.wake = new Wakeups(clock);
    this.housekeeping = new InboxHousekeeping(store, clock, log);
  }

  /** Listens to the other nodes' appends and starts retention's timer. */
  start(): void {
    this.store.watch((event) => this.onStoreEvent(event));
    this.housekeeping.start();
  }

  /** Ends retention's timer and every long poll (they answer what they have). */
  stop(): void {
    this.stopped = true;
    this.housekeeping.stop();
    this.wake.advanceAll();
  }

  /** One retention pass now, as the timer makes them (tests, and an operator's tool). */
  sweepNow(): Promise<SweepTotals> {
    return this.housekeeping.pass();
  }

  /** Creates the namespace with a new epoch, or updates its attributes (keeping its epoch). */
  async putInbox(name: string, input: InboxAttributesInput): Promise<{ created: boolean; inbox: InboxInfo }> {
    checkName(name);
    const existing = await this.store.inboxGet({ name });
    const attributes = resolveInboxAttributes(existing?.attributes ?? defaultInboxAttributes, input);
    const epoch = existing?.epoch ?? this.newEpoch();
    const { created, inbox } = await this.store.inboxUpsert({
      name,
      attributes,
      epoch,
      now: this.clock.now(),
    });
    return { created, inbox: infoOf(inbox) };
  }

  async getInbox(name: string): Promise<InboxInfo> {
    return infoOf(await this.record(name));
  }

  /** Every namespace, in name order. */
  async listInboxes(): Promise<InboxInfo[]> {
    const inboxes = await this.store.inboxList();
    return inboxes.map(infoOf).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Deletes the namespace with its entries, cursors and remembered ids; its waiters look again. */
  async deleteInbox(name: string): Promise<{ removed: number }> {
    checkName(name);
    const result = await this.store.inboxDelete({ name });
    this.live.forget(name);
    this.advanceNamespace(name);
    return result;
  }

  /**
   * Records the message once for each recipient, in one transaction, all or nothing: every input is
   * checked first, so one bad recipient or a malformed body refuses the whole call and nothing is
   * appended for anyone. Idempotent on (recipient, message id) within the namespace's dedup window.
   * Resolves after the commit; then each recipient given a new entry has its topic advanced.
   * `bodySentAs` is a JSON body's bytes as sent (decodeMessageBody), when the adapter knows them.
   */
  async append(name: string, request: AppendRequest, bodySentAs?: Buffer): Promise<AppendResult[]> {
    checkName(name);
    const { recipients, message } = request;
    if (recipients.length > limits.inboxRecipientsMax) {
      throw new HopperError(
        "too_many_recipients",
        `An append names at most ${limits.inboxRecipientsMax} recipients; this one names ${recipients.length}.`,
        { recipients: recipients.length, max: limits.inboxRecipientsMax },
      );
    }
    if (recipients.length === 0) throw invalid("An append names at least one recipient.");
    recipients.forEach((recipient, index) => {
      if (typeof recipient !== "string" || !namePattern.test(recipient)) {
        throw invalid(`recipients[${index}] is not a valid name.`, { where: `recipients[${index}]` });
      }
    });
    if (
      typeof message.id !== "string" ||
      message.id.length < 1 ||
      message.id.length > limits.inboxMessageIdLengthMax
    ) {
      throw invalid(`message.id is 1 to ${limits.inboxMessageIdLengthMax} characters.`);
    }
    const headers = checkHeaders(message.headers ?? {});
    if (message.contentType !== undefined && message.contentType.length > limits.contentTypeLengthMax) {
      throw invalid(`message.contentType is at most ${limits.contentTypeLengthMax} characters.`);
    }
    const { body, contentType } = decodeMessageBody(message, "message", bodySentAs);
    const bytes = bodyByteLength(body);
    if (bytes > limits.messageBytesMax) {
      throw new HopperError(
        "message_too_large",
        `The body is ${bytes} bytes; an inbox takes at most ${limits.messageBytesMax}.`,
        { bytes, max: limits.messageBytesMax },
      );
    }
    const { results } = await this.store.inboxAppend({
      name,
      recipients,
      message: { id: message.id, body, contentType, headers },
      now: this.clock.now(),
    });
    for (const result of results) {
      if ("seq" in result && !result.duplicate) this.wake.advance(inboxTopic(name, result.recipient));
    }
    return results;
  }

  /**
   * The recipient's entries after the cursor, at most `limit`, and where its log stands. A cursor that
   * cannot read on without a hole (trimmed, another epoch, skipped) is refused with `inbox_gap`; one
   * past the head with `cursor_beyond_head`. With `waitMs` and nothing after the cursor, it waits for
   * an append (or the wait's end) and reads again.
   */
  async read(name: string, recipient: string, options: ReadOptions): Promise<ReadResult> {
    checkName(name);
    checkName(recipient);
    const { after, epoch } = options;
    checkInteger("after", after, 0);
    const limit = options.limit ?? limits.inboxReadLimitDefault;
    checkInteger("limit", limit, 1, limits.inboxReadLimitMax);
    const waitMs = options.waitMs ?? 0;
    checkInteger("waitMs", waitMs, 0, limits.waitMsMax);
    if (after > 0 && epoch === undefined) {
      throw invalid("A cursor above 0 is read with the epoch it came from: give epoch.", { after });
    }
    const topic = inboxTopic(name, recipient);
    const deadline = this.clock.now() + waitMs;
    // Bounded: each turn either answers or waits until the head moves or the deadline passes.
    for (;;) {
      // The head is read before the store (wake.ts): an append between the two is never missed.
      const position = this.wake.head(topic);
      const { entries, state } = await this.store.inboxRead({ name, recipient, after, limit });
      const gap = gapOf(state, after, epoch);
      if (gap) throw inboxGap(state, gap);
      if (after > state.head) throw cursorBeyondHead(after, state.head);
      const answer = { entries, head: state.head, oldest: state.oldest, epoch: state.epoch };
      const leftMs = deadline - this.clock.now();
      if (entries.length > 0 || leftMs <= 0 || this.stopped) return answer;
      const end = await this.waitOn(name, recipient, position, leftMs, options.signal);
      if (end !== "advanced" || this.stopped) return answer;
    }
  }

  /** Waits on the recipient's topic after `position`, counted in waitingReads while it lasts. */
  private async waitOn(
    name: string,
    recipient: string,
    position: number,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ) {
    const recipients = this.waitingReads.get(name) ?? new Map<string, number>();
    this.waitingReads.set(name, recipients);
    recipients.set(recipient, (recipients.get(recipient) ?? 0) + 1);
    try {
      return await this.wake.waitAfter(inboxTopic(name, recipient), position, { timeoutMs, signal });
    } finally {
      const left = (recipients.get(recipient) ?? 1) - 1;
      if (left > 0) recipients.set(recipient, left);
      else recipients.delete(recipient);
      if (recipients.size === 0 && this.waitingReads.get(name) === recipients) this.waitingReads.delete(name);
    }
  }

  /** Moves the device's cursor forward to `seq` (never back) and trims what every device has acked. */
  async ack(name: string, recipient: string, device: string, seq: number): Promise<{ cursor: number }> {
    checkName(name);
    checkName(recipient);
    checkName(device);
    checkInteger("seq", seq, 0);
    return this.store.inboxAck({ name, recipient, device, seq, now: this.clock.now() });
  }

  /** Marks the device seen now (a subscription), creating it at `cursor` when it is new. */
  async deviceSeen(name: string, recipient: string, device: string, cursor: number): Promise<void> {
    checkName(name);
    checkName(recipient);
    checkName(device);
    checkInteger("cursor", cursor, 0);
    await this.store.inboxDeviceSeen({ name, recipient, device, cursor, now: this.clock.now() });
  }

  /** The recipient's log and devices, and which devices have a live subscription on this node. */
  async recipient(name: string, recipient: string): Promise<RecipientInfo> {
    checkName(name);
    checkName(recipient);
    const state = await this.store.inboxRecipientGet({ name, recipient });
    const connected = [...(this.connections.get(name)?.get(recipient)?.keys() ?? [])].sort();
    return { ...state, connected };
  }

  /** Forgets the device: its cursor no longer holds entries back. The namespace must exist. */
  async deleteDevice(name: string, recipient: string, device: string): Promise<void> {
    checkName(name);
    checkName(recipient);
    checkName(device);
    await this.record(name);
    await this.store.inboxDeviceDelete({ name, recipient, device, now: this.clock.now() });
  }

  /**
   * Registers a live subscription of the device (the WebSocket endpoint calls it when one opens);
   * answers the function that releases it. A device may hold several (tabs); it stays connected until
   * the last is released.
   */
  connected(name: string, recipient: string, device: string): () => void {
    const recipients = this.connections.get(name) ?? new Map<string, Map<string, number>>();
    this.connections.set(name, recipients);
    const devices = recipients.get(recipient) ?? new Map<string, number>();
    recipients.set(recipient, devices);
    devices.set(device, (devices.get(device) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (devices.get(device) ?? 1) - 1;
      if (left > 0) devices.set(device, left);
      else devices.delete(device);
      if (devices.size === 0 && recipients.get(recipient) === devices) recipients.delete(recipient);
      if (recipients.size === 0 && this.connections.get(name) === recipients) this.connections.delete(name);
    };
  }

  /** A subscription opened on this node (the WebSocket endpoint calls it): the subscriptions counter. */
  subscriptionOpened(name: string): void {
    this.live.of(name).subscriptionsOpened++;
  }

  /** Live subscriptions on this node now (connected() registrations), per namespace, for /metrics. */
  subscriptionsOpen(name: string): number {
    let open = 0;
    for (const devices of this.connections.get(name)?.values() ?? []) {
      for (const subscriptions of devices.values()) open += subscriptions;
    }
    return open;
  }

  /** A subscription replayed `entries` entries before it went live: the replay sizes histogram. */
  replayed(name: string, entries: number): void {
    this.live.of(name).replayEntries.observe(entries);
  }

  /** A device acked an entry `lagMs` after it was appended: the ack lag histogram. */
  acked(name: string, lagMs: number): void {
    this.live.of(name).ackLagSeconds.observe(Math.max(0, lagMs) / 1000);
  }

  /** This node's live figures of the namespace (subscriptions, replay sizes, ack lag), for /metrics. */
  liveStats(name: string): InboxLiveFigures | undefined {
    return this.live.peek(name);
  }

  /** The namespace's record, or inbox_not_found. */
  private async record(name: string): Promise<InboxRecord> {
    checkName(name);
    const inbox = await this.store.inboxGet({ name });
    if (!inbox) {
      throw new HopperError("inbox_not_found", `Inbox namespace "${name}" does not exist.`, { inbox: name });
    }
    return inbox;
  }

  /** A new epoch: 96 random bits, so that a namespace created again never repeats one. */
  private newEpoch(): string {
    const part = () => this.random.uint48().toString(36).padStart(10, "0");
    return `${part()}${part()}`;
  }

  /** Another node appended: the recipients it names look again (all of the namespace when it names none). */
  private onStoreEvent(event: StoreEvent): void {
    if (event.kind === "resync") {
      this.wake.advanceAll();
      return;
    }
    if (event.kind !== "inbox") return;
    if (event.recipients === null) this.advanceNamespace(event.inbox);
    else for (const recipient of event.recipients) this.wake.advance(inboxTopic(event.inbox, recipient));
  }

  /**
   * Advances every topic of the namespace that someone waits on or is subscribed to. Topics nobody
   * waits on need no wake-up: a waiter reads the store after reading the head.
   */
  private advanceNamespace(namespace: string): void {
    const topics = new Set(this.waitingReads.get(namespace)?.keys() ?? []);
    for (const recipient of this.connections.get(namespace)?.keys() ?? []) topics.add(recipient);
    for (const recipient of topics) this.wake.advance(inboxTopic(namespace, recipient));
  }
}

/** A device acked, or a read asked for, a sequence past the recipient's head. */
function cursorBeyondHead(seq: number, head: number): HopperError {
  return new HopperError("cursor_beyond_head", `Sequence ${seq} is past the recipient's head ${head}.`, {
    seq,
    head,
  });
}

/** Headers as the API allows them: at most headersCountMax, names of the header pattern, bounded values. */
export function checkHeaders(headers: Record<string, string>): Record<string, string> {
  const names = Object.keys(headers);
  if (names.length > limits.headersCountMax) {
    throw invalid(`A message has at most ${limits.headersCountMax} headers.`);
  }
  for (const name of names) {
    const value = headers[name];
    if (!headerNamePattern.test(name) || typeof value !== "string") {
      throw invalid(`Header "${name.slice(0, 200)}" is not a valid header.`);
    }
    if (value.length > limits.headerValueLengthMax) {
      throw invalid(`Header "${name}" is longer than ${limits.headerValueLengthMax} characters.`);
    }
  }
  return headers;
}

function infoOf(inbox: InboxRecord): InboxInfo {
  return {
    name: inbox.name,
    epoch: inbox.epoch,
    attributes: inbox.attributes,
    stats: { entries: inbox.entries, recipients: inbox.recipients, ...inbox.counters },
    createdAt: inbox.createdAt,
  };
}
