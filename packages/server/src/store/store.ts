/**
 * The one interface between the broker and storage, composed of one interface per entity
 * (queue-store.ts, exchange-store.ts) and the link between nodes (cluster-link.ts). Every method is
 * one atomic transaction, named entity-first then verb, and takes one params object; the store knows
 * nothing of HTTP. Every store passes the same conformance suite, split the same way.
 */
import type { LeasedMessage, NewMessage, ReceiptResult } from "../model/message.js";
import type { Handoff, SendPolicy } from "../model/policies.js";
import type { NewStreamRecord } from "../model/stream.js";
import type { ClusterLink } from "./cluster-link.js";
import type { ExchangeStore } from "./exchange-store.js";
import type { InboxStore } from "./inbox-store.js";
import type { QueueStore } from "./queue-store.js";
import type { StreamStore } from "./stream-store.js";

/** How durable an embedded store's answer is. "fsync": it survives power loss. "os": it is written to
 * the OS, which flushes later; a process crash loses nothing, a power loss may lose the last writes. */
export type Durability = "fsync" | "os";

/** A page of the queue listing: the names after `after` (from the first when absent), at most `limit`. */
export interface QueueListPage {
  after?: string;
  limit?: number;
}

export interface QueueSend {
  queue: string;
  messages: NewMessage[];
  policy: SendPolicy;
  /** A receive waiting on the queue that takes messages of this send as they are written. */
  handoff?: Handoff;
}

/** One stream's part of an exchange publish: its records, partitions chosen (queueSendMany's appends). */
export interface StreamAppendCopy {
  stream: string;
  records: NewStreamRecord[];
}

/** What a send stored in one queue: the id standing for each message, and what it handed off. */
export interface SendOutcome {
  ids: string[];
  leased: LeasedMessage[];
}

/**
 * Called with an ack's or nack's results once the store's state holds them, which for the log store is
 * before they are durable (its answer still waits): a push consumer gives the credit back then, as
 * the leases no longer count against what it may hold. A store that applies and makes durable in one
 * step (SQLite, PostgreSQL) need not call it; the answer does the same.
 */
export type Applied = (results: ReceiptResult[]) => void;

/**
 * What another broker node sharing the store changed: messages of a queue may have become available
 * (a send, a nack, a hand-back), a queue was created, updated or deleted, or an exchange or its
 * bindings changed, or a signal was published through another node; `inbox`: entries were appended
 * to those recipients' logs of an inbox namespace (null: to recipients too many to name in one
 * notification, or the namespace was created or deleted), so their subscribers look again; `stream`:
 * records were appended to those partitions of a stream, so its waiting fetches look again (null: the
 * stream was deleted, and the bindings to it with it). `resync`
 * says changes may have been missed (the store reconnected), so everything cached or waiting should
 * look again.
 */
export type StoreEvent =
  | { kind: "messages"; queue: string }
  | { kind: "queue"; queue: string }
  | { kind: "exchange"; exchange: string }
  | { kind: "signal"; channel: string; dataJson: string }
  | { kind: "inbox"; inbox: string; recipients: string[] | null }
  | { kind: "stream"; stream: string; partitions: number[] | null }
  | { kind: "resync" };

/**
 * The whole store: one interface per entity, and the link between the nodes that share it. A new
 * entity (streams, inboxes) adds its interface here, one file per store implements it, and the
 * conformance suite gets one section for it.
 */
export interface Store extends QueueStore, ExchangeStore, InboxStore, StreamStore, ClusterLink {
  /**
   * True when writes commit in the order they are called and a write called in the same turn of the
   * event loop as an earlier one commits with it (SQLite's group commit). Then a long poll woken as a
   * send is called leases in the send's own transaction, after it, and both share one commit and one
   * fsync. False when writes run side by side (a PostgreSQL pool): a lease called before the send has
   * committed could miss it, so long polls wake after the commit.
   */
  readonly commitsInCallOrder: boolean;

  /** Resolves when the store answers a trivial query; used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
