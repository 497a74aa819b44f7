/**
 * The PostgreSQL store's link between the broker nodes that share a schema (ClusterLink): the change
 * events other nodes commit, heard by LISTEN on the node's own session (events.ts); the housekeeping
 * leader, who holds an advisory lock on that session; signals; and the NOTIFYs by which this node's
 * commits wake the other nodes' long polls.
 */
import { limits } from "../../limits.js";
import type { ClusterLink } from "../cluster-link.js";
import type { StoreEvent } from "../store.js";
import type { Client, PostgresDatabase } from "./database.js";
import { StoreEvents } from "./events.js";
import * as sql from "./statements/index.js";

/** Whoever holds this advisory lock leads housekeeping. */
const leaderLockClass = 0x686f7071;

export interface PostgresClusterLinkOptions {
  /** How often the node says it is present to the others (events.ts); tests shorten it. */
  presenceIntervalMs?: number;
  /** The time for presence; Date.now unless a test drives it. */
  now?: () => number;
}

export class PostgresClusterLink implements ClusterLink {
  private readonly events: StoreEvents;
  /** Queues whose wake-up NOTIFY goes out at the end of this event-loop turn (announceCommitted). */
  private readonly pendingAnnouncements = new Set<string>();
  private announcing = false;

  constructor(
    private readonly db: PostgresDatabase,
    options: PostgresClusterLinkOptions,
  ) {
    this.events = new StoreEvents({
      ...db.connection,
      schema: db.schema,
      leaderLockClass,
      ...(options.presenceIntervalMs === undefined ? {} : { presenceIntervalMs: options.presenceIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
  }

  /** Starts listening on the node's own session. */
  start(): Promise<void> {
    return this.events.start();
  }

  stop(): Promise<void> {
    return this.events.stop();
  }

  watch(listener: (event: StoreEvent) => void): void {
    this.events.listen(listener);
  }

  housekeepingLeader(): Promise<boolean> {
    return this.events.leader();
  }

  /** A NOTIFY outside any transaction: delivered to the other nodes at once, stored nowhere. */
  async signalBroadcast(params: { channel: string; dataJson: string }): Promise<void> {
    const payload = this.events.encode({ kind: "signal", ...params });
    await this.db.unprepared(sql.notify, [this.events.channel, payload]);
  }

  /** Whether another node listens now (events.ts, presence): only then is a commit announced. */
  othersListening(): boolean {
    return this.events.othersListening();
  }

  /** The channel and payload of the NOTIFY telling the other nodes that `queue` may have messages. */
  wakeUpParams(queue: string): [string, string] {
    return [this.events.channel, this.events.encode({ kind: "messages", queue })];
  }

  /**
   * Tells the other nodes, once the current call has committed, that messages may be available in
   * `queue`. The NOTIFY is sent by itself after the commit, not inside the writing transaction:
   * PostgreSQL serializes the commits of transactions that NOTIFY, which would make every send wait
   * for the previous one's flush. Announcements of one event-loop turn are sent once per queue. If the
   * node dies between the commit and the NOTIFY, other nodes' long polls wake at their deadline
   * instead: a delay, never a loss. (A call that fails after announcing sends a harmless extra wake.)
   * Nothing is sent while no other node listens (events.ts, presence): it is decided here, after the
   * commit, so a commit that a node joining could miss was made before this node welcomed it.
   */
  announceCommitted(queue: string): void {
    if (!this.events.othersListening()) return;
    this.pendingAnnouncements.add(queue);
    if (this.announcing) return;
    this.announcing = true;
    setImmediate(() => {
      this.announcing = false;
      const queues = [...this.pendingAnnouncements];
      this.pendingAnnouncements.clear();
      for (const name of queues) {
        const payload = this.events.encode({ kind: "messages", queue: name });
        // Prepared, as the other per-message statements: at low rates there is one NOTIFY per send.
        this.db.statement(sql.notify, [this.events.channel, payload]).catch(() => {
          // Unreachable database: the other nodes' long polls end at their deadline and look again.
        });
      }
    });
  }

  /** Announces the queues (announceCommitted) once the transaction on `client` has committed. */
  announceOnCommit(client: Client, ...queues: readonly string[]): void {
    for (const queue of queues) this.db.afterCommit(client, () => this.announceCommitted(queue));
  }

  /**
   * Tells the other nodes, once the transaction on `client` has committed, that entries were appended
   * to these recipients of inbox namespace `inbox`: one NOTIFY per append, sent after the commit for
   * the reason announceCommitted gives, and only while another node listens. A payload that would pass
   * limits.postgresInboxNotifyPayloadBytesMax names no recipient (null), and every subscriber of the namespace looks
   * again: PostgreSQL refuses a payload of 8,000 bytes or more.
   */
  announceInboxOnCommit(client: Client, inbox: string, recipients: readonly string[]): void {
    this.db.afterCommit(client, () => {
      if (!this.events.othersListening()) return;
      let payload = this.events.encode({ kind: "inbox", inbox, recipients: [...recipients] });
      if (Buffer.byteLength(payload) > limits.postgresInboxNotifyPayloadBytesMax) {
        payload = this.events.encode({ kind: "inbox", inbox, recipients: null });
      }
      this.db.statement(sql.notify, [this.events.channel, payload]).catch(() => {
        // Unreachable database: the other nodes' subscribers catch up at their next read or resync.
      });
    });
  }

  /**
   * Tells the other nodes, once the transaction on `client` has committed, that records were appended
   * to these partitions of `stream`, so that their waiting fetches look again: sent after the commit
   * for the reason announceCommitted gives, and only while another node listens.
   */
  announceStreamOnCommit(client: Client, stream: string, partitions: readonly number[]): void {
    this.db.afterCommit(client, () => {
      if (!this.events.othersListening()) return;
      const payload = this.events.encode({ kind: "stream", stream, partitions: [...partitions] });
      this.db.statement(sql.notify, [this.events.channel, payload]).catch(() => {
        // Unreachable database: the other nodes' fetches end at their deadline and look again.
      });
    });
  }

  /** Queues a notification that other nodes receive when (and only if) the transaction commits. */
  async announce(
    client: Client,
    event: Exclude<StoreEvent, { kind: "resync" } | { kind: "signal" }>,
  ): Promise<void> {
    await client.query(sql.notify, [this.events.channel, this.events.encode(event)]);
  }
}
