/**
 * The node's own PostgreSQL session for what is not a transaction: LISTEN for changes other nodes
 * commit (NOTIFY is delivered on commit only), and the session-level advisory lock that makes this
 * node the housekeeping leader. If the session drops, the lock is released with it, so another node
 * takes the lead at its next attempt; this node reconnects, and tells the broker to resync.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { StoreEvent } from "../store.js";
import * as sql from "./statements.js";

export interface StoreEventsOptions extends pg.ClientConfig {
  schema: string;
  /** The advisory lock class of housekeeping leadership; the schema is the lock's second key. */
  leaderLockClass: number;
}

/** Reconnection waits double from the first to the last, so a database restart is not hammered. */
const reconnectDelayMsMin = 100;
const reconnectDelayMsMax = 5_000;

interface Payload {
  /** The node (or "app", for an application's own transaction) that committed the change. */
  n: string;
  k: "messages" | "queue" | "exchange" | "signal";
  /** The queue's, the exchange's or the signal channel's name. */
  q: string;
  /** A signal's data, as JSON text. */
  d?: string;
}

/** The NOTIFY channel of the broker nodes that share one schema. */
export function channelFor(schema: string): string {
  return `hopper_${schema}`;
}

/** The NOTIFY payload of one change, committed by `nodeId`. */
export function encodeEvent(nodeId: string, event: Exclude<StoreEvent, { kind: "resync" }>): string {
  const payload: Payload =
    event.kind === "signal"
      ? { n: nodeId, k: "signal", q: event.channel, d: event.dataJson }
      : { n: nodeId, k: event.kind, q: event.kind === "exchange" ? event.exchange : event.queue };
  return JSON.stringify(payload);
}

export class StoreEvents {
  readonly channel: string;
  private readonly nodeId = randomBytes(6).toString("hex");
  private readonly listeners: ((event: StoreEvent) => void)[] = [];
  private client: pg.Client | undefined;
  private leading = false;
  private stopped = false;
  private reconnectDelayMs = reconnectDelayMsMin;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: StoreEventsOptions) {
    this.channel = channelFor(options.schema);
  }

  async start(): Promise<void> {
    const client = new pg.Client(this.options);
    client.on("notification", (message) => this.receive(message.payload));
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    this.client = client;
    this.reconnectDelayMs = reconnectDelayMsMin;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    this.leading = false;
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
    if (payload.k === "exchange") this.emit({ kind: "exchange", exchange: payload.q });
    else if (payload.k === "signal")
      this.emit({ kind: "signal", channel: payload.q, dataJson: payload.d ?? "null" });
    else this.emit({ kind: payload.k, queue: payload.q });
  }

  private emit(event: StoreEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.leading = false;
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
        this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, reconnectDelayMsMax);
        this.scheduleReconnect();
      }
    }, this.reconnectDelayMs);
    this.reconnectTimer.unref();
  }
}
