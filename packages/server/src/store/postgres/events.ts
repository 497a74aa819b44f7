/**
 * The node's own PostgreSQL session for what is not a transaction: LISTEN for changes other nodes
 * commit (NOTIFY is delivered on commit only), and the session-level advisory lock that makes this
 * node the housekeeping leader. If the session drops, the lock is released with it, so another node
 * takes the lead at its next attempt; this node reconnects, and tells the broker to resync.
 *
 * Presence: a wake-up NOTIFY is worth its statement only if another node listens, and a node alone on
 * its schema would otherwise spend a statement per send telling nobody (its own notifications come
 * back and are dropped). So each node says `present` on the channel when it starts listening and every
 * presence interval after, and announces its commits (othersListening) only while it has heard from
 * another node within the presence timeout. Whenever a node hears from a node it did not count as
 * present (one that just started, or one it had timed out), it answers `welcome`, addressed to that
 * node; the node a `welcome` is addressed to tells its broker to resync (the others only note that its
 * sender listens, so a node that joins N others makes 2N resyncs in all, not one per welcome heard by
 * each node). Invariant: a commit that was not announced because its node
 * counted no one else was made before that node's `welcome` (or its answer to one), so the other
 * node's long polls look again after it and find it. Until then they may wait to their deadline: a
 * delay, never a loss (the same as a node that dies between a commit and its NOTIFY).
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { limits } from "../../limits.js";
import type { StoreEvent } from "../store.js";
import * as sql from "./statements/index.js";

export interface StoreEventsOptions extends pg.ClientConfig {
  schema: string;
  /** The advisory lock class of housekeeping leadership; the schema is the lock's second key. */
  leaderLockClass: number;
  /** How often this node says `present` (presence, above). */
  presenceIntervalMs?: number;
  /** The time, for presence; Date.now unless a test drives it. */
  now?: () => number;
}

interface Payload {
  /** The node (or "app", for an application's own transaction) that committed the change. */
  n: string;
  k: "messages" | "queue" | "exchange" | "signal" | "inbox" | "stream" | "present" | "welcome";
  /** The queue's, the exchange's, the signal channel's or the inbox namespace's name; absent in
   * presence messages. */
  q?: string;
  /** An inbox event's recipients; absent or null: the whole namespace. */
  r?: string[] | null;
  /** A stream event's partitions; absent or null: the stream was deleted. */
  p?: number[] | null;
  /** A signal's data, as JSON text. */
  d?: string;
  /** The node a `welcome` answers; absent from nodes of earlier versions, whose welcomes all resync. */
  to?: string;
}

/** The NOTIFY channel of the broker nodes that share one schema. */
export function channelFor(schema: string): string {
  return `hopper_${schema}`;
}

/** The NOTIFY payload of one change, committed by `nodeId`. */
export function encodeEvent(nodeId: string, event: Exclude<StoreEvent, { kind: "resync" }>): string {
  let payload: Payload;
  if (event.kind === "signal") payload = { n: nodeId, k: "signal", q: event.channel, d: event.dataJson };
  else if (event.kind === "inbox") payload = { n: nodeId, k: "inbox", q: event.inbox, r: event.recipients };
  else if (event.kind === "stream")
    payload = { n: nodeId, k: "stream", q: event.stream, p: event.partitions };
  else payload = { n: nodeId, k: event.kind, q: event.kind === "exchange" ? event.exchange : event.queue };
  return JSON.stringify(payload);
}

export class StoreEvents {
  readonly channel: string;
  private readonly nodeId = randomBytes(6).toString("hex");
  private readonly listeners: ((event: StoreEvent) => void)[] = [];
  private client: pg.Client | undefined;
  private leading = false;
  private stopped = false;
  private reconnectDelayMs: number = limits.postgresReconnectDelayMsMin;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private presenceTimer: NodeJS.Timeout | undefined;
  private readonly presenceTimeoutMs: number;
  private readonly now: () => number;
  /** When each other node was last heard from, while it counts as present. */
  private readonly heardAt = new Map<string, number>();

  constructor(private readonly options: StoreEventsOptions) {
    this.channel = channelFor(options.schema);
    this.now = options.now ?? Date.now;
    const intervalMs = options.presenceIntervalMs ?? limits.postgresPresenceIntervalMsDefault;
    this.presenceTimeoutMs = intervalMs * limits.postgresPresenceIntervalsPerTimeout;
  }

  async start(): Promise<void> {
    const client = new pg.Client(this.options);
    client.on("notification", (message) => this.receive(message.payload));
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
      await client.query(sql.notify, [this.channel, this.presencePayload("present")]);
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    this.client = client;
    this.reconnectDelayMs = limits.postgresReconnectDelayMsMin;
    clearInterval(this.presenceTimer);
    this.presenceTimer = setInterval(
      () => this.say("present"),
      this.options.presenceIntervalMs ?? limits.postgresPresenceIntervalMsDefault,
    );
    this.presenceTimer.unref();
  }

  /** Whether another node has been heard from within the presence timeout: only then is a commit announced. */
  othersListening(): boolean {
    const now = this.now();
    for (const [node, at] of this.heardAt) {
      if (now - at < this.presenceTimeoutMs) return true;
      this.heardAt.delete(node);
    }
    return false;
  }

  /** NOTIFYs a presence message on the listening session; a failure there is the session's loss. */
  private say(kind: "present" | "welcome", to?: string): void {
    this.client?.query(sql.notify, [this.channel, this.presencePayload(kind, to)]).catch(() => {});
  }

  private presencePayload(kind: "present" | "welcome", to?: string): string {
    // JSON leaves `to` out when it is undefined.
    const payload: Payload = { n: this.nodeId, k: kind, to };
    return JSON.stringify(payload);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    this.leading = false;
    clearInterval(this.presenceTimer);
    await client?.end().catch(() => {});
  }

  listen(listener: (event: StoreEvent) => void): void {
    this.listeners.push(listener);
  }

  encode(event: Exclude<StoreEvent, { kind: "resync" }>): string {
    return encodeEvent(this.nodeId, event);
  }

  /** Whether this session holds the housekeeping lock, taking it if it is free. */
  async leader(): Promise<boolean> {
    const client = this.client;
    if (!client) return false;
    if (this.leading) return true;
    try {
      const { rows } = await client.query<{ locked: boolean }>(sql.leaderTryLock, [
        this.options.leaderLockClass,
        this.options.schema,
      ]);
      this.leading = rows[0]?.locked === true && this.client === client;
    } catch {
      this.leading = false;
    }
    return this.leading;
  }

  private receive(text: string | undefined): void {
    let payload: Payload;
    try {
      payload = JSON.parse(text ?? "") as Payload;
    } catch {
      return;
    }
    // This node woke its own waiters when it committed.
    if (payload.n === this.nodeId) return;
    // An application's own transaction (sendInTransaction) is not a node: it listens to nothing.
    if (payload.n !== "app") this.heard(payload.n);
    const name = payload.q ?? "";
    if (payload.k === "present") return;
    if (payload.k === "welcome") {
      if (payload.to === undefined || payload.to === this.nodeId) this.emit({ kind: "resync" });
      return;
    }
    if (payload.k === "exchange") this.emit({ kind: "exchange", exchange: name });
    else if (payload.k === "signal")
      this.emit({ kind: "signal", channel: name, dataJson: payload.d ?? "null" });
    else if (payload.k === "inbox") this.emit({ kind: "inbox", inbox: name, recipients: payload.r ?? null });
    else if (payload.k === "stream")
      this.emit({ kind: "stream", stream: name, partitions: payload.p ?? null });
    else this.emit({ kind: payload.k, queue: name });
  }

  /** Notes that `node` listens; a node not counted as present until now is welcomed (presence, above). */
  private heard(node: string): void {
    const at = this.heardAt.get(node);
    const now = this.now();
    this.heardAt.set(node, now);
    if (at === undefined || now - at >= this.presenceTimeoutMs) this.say("welcome", node);
  }

  private emit(event: StoreEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.leading = false;
    clearInterval(this.presenceTimer);
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    this.reconnectTimer = setTimeout(async () => {
      try {
        await this.start();
        // Notifications sent while the session was down are gone: everyone looks again.
        this.emit({ kind: "resync" });
      } catch {
        this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, limits.postgresReconnectDelayMsMax);
        this.scheduleReconnect();
      }
    }, this.reconnectDelayMs);
    this.reconnectTimer.unref();
  }
}
