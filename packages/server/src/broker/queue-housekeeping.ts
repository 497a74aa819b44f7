/**
 * Housekeeping and leadership: the work the scheduler's timers trigger for one queue (retention,
 * dead-letter sweeps, waking long polls for what fell due), which on PostgreSQL only the node leading
 * housekeeping does; and what the ClusterLink reports of other nodes, which feeds the queues'
 * wake-ups (wake.ts) and drops cached queue records. docs/invariants.md, "Housekeeping ordering".
 */
import { limits } from "../limits.js";
import type { QueueRecord } from "../model/queue.js";
import type { StoreEvent } from "../store/store.js";
import type { QueueAdmin } from "./queue-admin.js";
import { deadLettered, type QueueContext, wakeQueue } from "./queue-context.js";

export class QueueHousekeeping {
  /** The end of the last dead-letter sweep per queue: rows that became visible after it are looked at. */
  private readonly sweptUntil = new Map<string, number>();
  private readonly running = new Map<string, { rerun: boolean }>();
  /** Whether this node led housekeeping at its last check. */
  private leading = false;
  private cancelLeadershipCheck: (() => void) | undefined;

  constructor(
    private readonly context: QueueContext,
    private readonly admin: QueueAdmin,
  ) {}

  /** Listens to the other nodes, and looks at each queue once, so due work left from before a restart is done. */
  async start(): Promise<void> {
    const { store, clock, scheduler } = this.context;
    store.watch((event) => this.onStoreEvent(event));
    await this.checkLeadership();
    for (const queue of await store.queueList()) {
      this.admin.remember(queue);
      scheduler.offer(queue.name, clock.now());
    }
  }

  /** Ends every timer and wakes every long poll (the broker has set `stopped`, so they answer). */
  stop(): void {
    this.cancelLeadershipCheck?.();
    this.context.scheduler.stop();
    this.context.wake.advanceAll();
  }

  /** The queue is gone (deleted here, or found gone): its timer ends and its long polls look again. */
  forget(name: string): void {
    this.admin.drop(name);
    this.sweptUntil.delete(name);
    this.context.scheduler.forget(name);
    // Long polls on the queue look again and find it gone.
    wakeQueue(this.context, name);
  }

  /** Another node changed the store: wake long polls, and drop cached attributes that may be stale. */
  private onStoreEvent(event: StoreEvent): void {
    const { clock, scheduler, wake, log } = this.context;
    if (event.kind === "resync") {
      this.admin.drop();
      wake.advanceAll();
      // Messages other nodes committed meanwhile may not have been announced: the leader catches up.
      if (this.leading) {
        this.offerAllQueues(clock.now() + limits.leaderCatchUpMs).catch((error: unknown) =>
          log.error({ err: error }, "listing the queues to catch up on failed"),
        );
      }
      return;
    }
    if (
      event.kind === "exchange" ||
      event.kind === "signal" ||
      event.kind === "inbox" ||
      event.kind === "stream"
    )
      return;
    if (event.kind === "queue") {
      this.admin.drop(event.queue);
      scheduler.offer(event.queue, clock.now());
    } else if (this.leading) {
      // Messages arrived through another node: the leader must learn their retention and lease ends.
      // Offers within the interval share one housekeeping pass.
      scheduler.offer(event.queue, clock.now() + limits.leaderCatchUpMs);
    }
    wakeQueue(this.context, event.queue);
  }

  /**
   * Does the work that fell due in one queue: deletes what is past retention, dead-letters what used
   * its last delivery, wakes long polls for what became visible, then sets the next due time.
   */
  async run(name: string): Promise<void> {
    const running = this.running.get(name);
    if (running) {
      running.rerun = true;
      return;
    }
    const state = { rerun: true };
    this.running.set(name, state);
    try {
      while (state.rerun && !this.context.stopped) {
        state.rerun = false;
        await this.runOnce(name);
      }
    } catch (error) {
      // A pass still running when the broker stopped meets a closed store: nothing to report.
      if (this.context.stopped) return;
      this.context.log.error({ err: error, queue: name }, "housekeeping failed; retrying");
      this.context.scheduler.offer(name, this.context.clock.now() + limits.housekeepingRetryMs);
    } finally {
      this.running.delete(name);
    }
  }

  private async runOnce(name: string): Promise<void> {
    const { store, clock, scheduler } = this.context;
    const queue = await store.queueGet({ name });
    if (!queue) return this.forget(name);
    this.admin.remember(queue);
    const now = clock.now();
    const leading = await this.checkLeadership();
    if (leading) await this.sweep(queue, now);
    wakeQueue(this.context, name);
    const next = await store.queueNextEvents({ queue: name, now });
    if (next.nextVisibleAt !== null) scheduler.offer(name, next.nextVisibleAt);
    // Retention is the leader's work. Another node would only find the due time still due (it does not
    // sweep) and look again at once, without end.
    if (leading && next.oldestPublishedAt !== null) {
      scheduler.offer(name, next.oldestPublishedAt + queue.attributes.retentionMs);
    }
  }

  /** Offers every queue in the store to the housekeeping scheduler at `at`. */
  private async offerAllQueues(at: number): Promise<void> {
    for (const queue of await this.context.store.queueList()) this.context.scheduler.offer(queue.name, at);
  }

  /**
   * Asks the store whether this node leads housekeeping. A node that becomes leader looks at every
   * queue at once, since it may know nothing of their due times (the old leader kept them); a node that
   * does not lead asks again later, so that some node always takes over from a dead leader.
   */
  private async checkLeadership(): Promise<boolean> {
    const { store, clock, log } = this.context;
    const leading = await store.housekeepingLeader();
    if (leading && !this.leading) await this.offerAllQueues(clock.now());
    this.leading = leading;
    if (!leading && !this.context.stopped && !this.cancelLeadershipCheck) {
      this.cancelLeadershipCheck = clock.setTimer(clock.now() + limits.leadershipCheckIntervalMs, () => {
        this.cancelLeadershipCheck = undefined;
        return this.checkLeadership().then(
          () => {},
          (error: unknown) => log.error({ err: error }, "leadership check failed"),
        );
      });
    }
    return leading;
  }

  /** Deletes what is past retention and dead-letters what used its last delivery, in bounded batches. */
  private async sweep(queue: QueueRecord, now: number): Promise<void> {
    const { store } = this.context;
    const name = queue.name;
    const expiredBefore = now - queue.attributes.retentionMs;
    let expired: number;
    do {
      ({ expired } = await store.queueExpire({
        queue: name,
        expiredBefore,
        max: limits.housekeepingExpireBatchMax,
        now,
      }));
    } while (expired === limits.housekeepingExpireBatchMax);
    const deadLetter = await this.admin.deadLetterRoute(queue);
    if (deadLetter) {
      let moved: number;
      do {
        ({ deadLettered: moved } = await store.queueDeadLetterExhausted({
          queue: name,
          visibleFrom: this.sweptUntil.get(name) ?? Number.MIN_SAFE_INTEGER,
          now,
          max: limits.housekeepingDeadLetterBatchMax,
          deadLetter,
        }));
        deadLettered(this.context, deadLetter, moved);
      } while (moved === limits.housekeepingDeadLetterBatchMax);
    }
    this.sweptUntil.set(name, now);
  }
}
