/**
 * Redrive tasks: move a dead-letter queue's messages back to where they came from (or to one queue),
 * at a rate, with progress that can be read and a cancel that can come at any moment.
 *
 * Invariants:
 * - Each step moves up to `redriveBatchMax` messages in one store transaction, oldest first, so a
 *   message is either moved or not — a cancel, a crash or a failure between steps loses and duplicates
 *   nothing, and order per key holds.
 * - One redrive at a time per source queue: two would interleave their steps and could reorder a key.
 * - With `ratePerSecond`, step k starts no earlier than `startedAt + moved / rate`, so the rate holds on
 *   average whatever the step sizes (each about a tenth of a second's worth).
 * - A message in flight in the source holds back the later messages of its key (redrive-order.ts);
 *   while only such messages are left, the task looks again every second. One that is still in flight
 *   when everything else has moved is left behind: the task ends done with moved < total.
 * - Tasks live in the memory of the node that runs them: a restart ends them (what was moved stays
 *   moved); finished tasks are kept for `taskKeepMs` to be read.
 */
import type { Clock } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";

export type TaskState = "running" | "done" | "failed" | "cancelled";

export interface TaskInfo {
  id: string;
  kind: "redrive";
  state: TaskState;
  moved: number;
  total: number;
  queue: string;
  to: string | null;
  ratePerSecond: number | null;
  error: HopperError | null;
  createdAt: number;
  finishedAt: number | null;
}

/** What a redrive needs from the queue broker. */
export interface RedriveSource {
  /** Messages the queue holds that are not in flight: what a redrive would move. */
  movable(queue: string): Promise<number>;
  /** One step: moves up to `max` of the oldest messages not in flight, in one transaction; `held`
   * counts those that wait behind an in-flight message of their key. */
  move(
    queue: string,
    to: string | null,
    max: number,
  ): Promise<{ moved: number; held: number; stoppedBy: HopperError | null }>;
}

interface Task extends TaskInfo {
  startedAt: number;
  cancelTimer: (() => void) | undefined;
}

export class RedriveTasks {
  private readonly tasks = new Map<string, Task>();
  private stopped = false;

  constructor(
    private readonly source: RedriveSource,
    private readonly clock: Clock,
    private readonly newId: () => string,
    /** Hears failures that are not a HopperError (a bug, or the store failing), for the log. */
    private readonly onError: (error: unknown, task: TaskInfo) => void,
  ) {}

  async start(
    queue: string,
    options: { to?: string; max?: number; ratePerSecond?: number },
  ): Promise<TaskInfo> {
    const running = [...this.tasks.values()].find((task) => task.queue === queue && task.state === "running");
    if (running) {
      throw new HopperError("redrive_running", `Queue "${queue}" is being redriven by task ${running.id}.`, {
        task: running.id,
      });
    }
    if (options.to === queue)
      throw new HopperError("invalid_request", "A queue cannot be redriven into itself.");
    this.makeRoom();
    const movable = await this.source.movable(queue);
    const now = this.clock.now();
    const task: Task = {
      id: this.newId(),
      kind: "redrive",
      state: "running",
      moved: 0,
      total: Math.min(movable, options.max ?? Number.POSITIVE_INFINITY),
      queue,
      to: options.to ?? null,
      ratePerSecond: options.ratePerSecond ?? null,
      error: null,
      createdAt: now,
      finishedAt: null,
      startedAt: now,
      cancelTimer: undefined,
    };
    this.tasks.set(task.id, task);
    this.schedule(task, now);
    return info(task);
  }

  get(id: string): TaskInfo {
    const task = this.tasks.get(id);
    if (!task) throw new HopperError("task_not_found", `Task "${id}" does not exist.`, { task: id });
    return info(task);
  }

  list(): TaskInfo[] {
    return [...this.tasks.values()].map(info);
  }

  /** Stops a running task before its next step; a step under way completes (it is one transaction). */
  cancel(id: string): TaskInfo {
    const task = this.tasks.get(id);
    if (!task) throw new HopperError("task_not_found", `Task "${id}" does not exist.`, { task: id });
    if (task.state === "running") this.finish(task, "cancelled");
    return info(task);
  }

  /** Ends every task's timers; running ones stay as they are, and move nothing more. */
  stop(): void {
    this.stopped = true;
    for (const task of this.tasks.values()) task.cancelTimer?.();
  }

  private schedule(task: Task, atMs: number): void {
    if (this.stopped) return;
    task.cancelTimer = this.clock.setTimer(atMs, () => {
      task.cancelTimer = undefined;
      return this.step(task);
    });
  }

  private async step(task: Task): Promise<void> {
    if (task.state !== "running") return;
    const rate = task.ratePerSecond;
    const batch = Math.min(
      limits.redriveBatchMax,
      task.total - task.moved,
      rate === null ? Number.POSITIVE_INFINITY : Math.max(1, Math.ceil(rate / limits.redriveStepsPerSecond)),
    );
    let result: { moved: number; held: number; stoppedBy: HopperError | null };
    try {
      result = await this.source.move(task.queue, task.to, batch);
    } catch (error) {
      // The task says only that it failed; the cause is for the server's log, not the client.
      if (!(error instanceof HopperError)) this.onError(error, task);
      task.error = error instanceof HopperError ? error : new HopperError("internal");
      if (task.state === "running") this.finish(task, "failed");
      return;
    }
    task.moved += result.moved;
    if (task.state !== "running") return; // cancelled while the step ran: it counted, and ends here
    if (result.stoppedBy) {
      task.error = result.stoppedBy;
      return this.finish(task, "failed");
    }
    if (task.moved >= task.total) return this.finish(task, "done");
    if (result.moved === 0) {
      // Nothing movable is left, or all of it waits behind a message in flight: look again later.
      if (result.held === 0) return this.finish(task, "done");
      return this.schedule(task, this.clock.now() + limits.redriveHeldRetryMs);
    }
    const next = rate === null ? this.clock.now() : task.startedAt + Math.ceil((task.moved / rate) * 1000);
    this.schedule(task, next);
  }

  private finish(task: Task, state: Exclude<TaskState, "running">): void {
    task.cancelTimer?.();
    task.cancelTimer = undefined;
    task.state = state;
    task.finishedAt = this.clock.now();
    if (this.stopped) return;
    this.clock.setTimer(task.finishedAt + limits.taskKeepMs, () => {
      this.tasks.delete(task.id);
    });
  }

  /** Forgets the oldest finished task when the table is full; refuses when every one is running. */
  private makeRoom(): void {
    if (this.tasks.size < limits.tasksMax) return;
    const finished = [...this.tasks.values()].find((task) => task.state !== "running");
    if (!finished)
      throw new HopperError("too_many_tasks", `The server runs ${limits.tasksMax} tasks already.`);
    this.tasks.delete(finished.id);
  }
}

function info(task: Task): TaskInfo {
  const { startedAt: _startedAt, cancelTimer: _cancelTimer, ...rest } = task;
  return { ...rest };
}
