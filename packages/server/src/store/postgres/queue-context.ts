/**
 * What the PostgreSQL store's queue files share: the database, the cluster link, the message writes
 * (message-writes.ts), the random source of lease tokens, and the kind last seen of each queue.
 */
import { queueNotFound } from "../../errors.js";
import { limits } from "../../limits.js";
import type { QueueKind } from "../../model/queue.js";
import type { NewStreamRecord } from "../../model/stream.js";
import type { Random } from "../../random.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import { type LockedQueue, MessageWrites } from "./message-writes.js";

/** Queue names in one order on every node: the order in which a call locks several queue rows. */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class QueueContext {
  readonly writes: MessageWrites;
  /**
   * The kind last seen of each queue name: which one-statement lease to try first, and whether a send
   * or an ack can be one statement. Only a hint: those statements check the kind themselves, since a
   * queue may have been deleted and created again as the other kind (on another node, too).
   */
  private readonly kindHints = new Map<string, QueueKind>();

  constructor(
    readonly db: PostgresDatabase,
    readonly link: PostgresClusterLink,
    readonly random: Random,
    /** Appends records to a stream inside the transaction on `client`: an exchange publish's copies
     * into streams (the stream store's StreamAppends.appendIn). */
    readonly appendToStream: (
      client: Client,
      params: { name: string; records: readonly NewStreamRecord[]; now: number },
    ) => Promise<unknown>,
  ) {
    this.writes = new MessageWrites(db.schema, () => db.counterShard());
  }

  /** The kind last seen of `queue`, if any (a hint, kindHints). */
  kindHint(queue: string): QueueKind | undefined {
    return this.kindHints.get(queue);
  }

  hintKind(queue: string, kind: QueueKind): void {
    // Bounded as the queues are; a full map is dropped whole, since it only saves a retry.
    if (this.kindHints.size >= limits.queuesMax && !this.kindHints.has(queue)) this.kindHints.clear();
    this.kindHints.set(queue, kind);
  }

  /** Locks the queue row against deletion until commit; throws queue_not_found when there is none. */
  async lockQueueShared(client: Client, name: string): Promise<LockedQueue> {
    const queue = await this.writes.lockQueue(client, name, "share");
    if (!queue) throw queueNotFound(name);
    this.hintKind(name, queue.kind);
    return queue;
  }
}

/** A part of the queue store (queue-send.ts, queue-lease.ts, …): the context's database, cluster link
 * and message writes under short names. */
export abstract class QueuePart {
  protected readonly db: PostgresDatabase;
  protected readonly link: PostgresClusterLink;
  protected readonly writes: MessageWrites;

  constructor(protected readonly queues: QueueContext) {
    this.db = queues.db;
    this.link = queues.link;
    this.writes = queues.writes;
  }
}
