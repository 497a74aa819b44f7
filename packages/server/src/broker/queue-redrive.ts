/**
 * Redrive of a queue (a dead-letter queue, usually): checks a request, starts it as a task
 * (redrive.ts runs the tasks), and does each of its steps: one store move, after which the queues it
 * wrote to wake their long polls and set the timers of what arrived.
 */
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { type SendPolicy, sendPolicyOf } from "../model/policies.js";
import type { QueueAdmin } from "./queue-admin.js";
import { type QueueContext, wakeQueue } from "./queue-context.js";
import type { QueueSender } from "./queue-send.js";
import { RedriveTasks, type TaskInfo } from "./redrive.js";

export class QueueRedrive {
  private readonly tasks: RedriveTasks;

  constructor(
    private readonly context: QueueContext,
    private readonly admin: QueueAdmin,
    private readonly sender: QueueSender,
    newId: () => string,
  ) {
    this.tasks = new RedriveTasks(
      { movable: (queue) => this.movable(queue), move: (queue, to, max) => this.move(queue, to, max) },
      context.clock,
      newId,
      (error, task) =>
        context.log.error({ err: error, task: task.id, queue: task.queue }, "redrive step failed"),
    );
  }

  /**
   * Starts moving the queue's messages (a dead-letter queue's, usually) back to the queue each came
   * from (its x-original-queue header), or to `to`: a task, whose progress `task()` reads.
   */
  async redrive(
    name: string,
    options: { to?: string; max?: number; ratePerSecond?: number },
  ): Promise<TaskInfo> {
    await this.admin.queue(name);
    if (options.to !== undefined) await this.admin.queue(options.to);
    if (options.max !== undefined && !(Number.isInteger(options.max) && options.max >= 1)) {
      throw new HopperError("invalid_request", "max must be a positive integer.");
    }
    if (
      options.ratePerSecond !== undefined &&
      !(options.ratePerSecond > 0 && options.ratePerSecond <= limits.redriveRateMax)
    ) {
      throw new HopperError(
        "invalid_request",
        `ratePerSecond must be above 0 and at most ${limits.redriveRateMax}.`,
      );
    }
    return this.tasks.start(name, options);
  }

  task(id: string): TaskInfo {
    return this.tasks.get(id);
  }

  listTasks(): TaskInfo[] {
    return this.tasks.list();
  }

  cancelTask(id: string): TaskInfo {
    return this.tasks.cancel(id);
  }

  /** Ends every task's next step; a step under way completes. */
  stop(): void {
    this.tasks.stop();
  }

  /** What a redrive of the queue would move now: its messages not in flight. */
  private async movable(name: string): Promise<number> {
    const depth = await this.context.store.queueDepth({ name, now: this.context.clock.now() });
    return depth.available + depth.delayed;
  }

  /** One redrive step; the queues it wrote to wake their long polls. */
  private async move(
    name: string,
    to: string | null,
    max: number,
  ): Promise<{ moved: number; held: number; stoppedBy: HopperError | null }> {
    const { store, clock } = this.context;
    // With `to`, that queue is the only target; otherwise any queue a header names may be one.
    const candidates = to === null ? await store.queueList() : [await this.admin.queueOrError(to)];
    const policies = new Map<string, SendPolicy>();
    for (const queue of candidates) {
      if (!(queue instanceof HopperError)) policies.set(queue.name, await this.admin.sendPolicy(queue));
    }
    const now = clock.now();
    const { moved, held, targets, stoppedBy } = await store.queueMove({
      queue: name,
      to,
      max,
      now,
      policies,
    });
    // Moving FIFO heads out hands their groups on.
    if (moved > 0) wakeQueue(this.context, name);
    for (const target of targets) {
      const record = await this.admin.queueOrError(target);
      if (record instanceof HopperError) continue;
      wakeQueue(this.context, target);
      this.sender.sent(record, policies.get(target) ?? sendPolicyOf(record.attributes, null), now, now);
    }
    return { moved, held, stoppedBy };
  }
}
