/**
 * Follows a running redrive task until it ends: polls `GET /v1/tasks/{id}`, shows the progress on
 * stderr (a bar redrawn in place on a terminal, a line now and then otherwise), and on an interrupt
 * cancels the task and reports where it stopped. Time, output and the interrupt are injected, so the
 * drawing and the cancel are tested without a terminal, a server or a real Ctrl-C.
 */
import type { Clock, HopperClient, Task } from "@hopper/client";
import { limits } from "../limits.js";
import { formatProgressBar, formatProgressLine, type ProgressEstimate } from "./dlq-output.js";

/** Erases from the cursor to the end of the line, so a shorter redraw leaves no tail of the last one. */
const eraseLineEnd = "\u001b[K";

export interface ProgressOutput {
  /** True for a terminal: the bar is redrawn in place with \r. */
  isTTY: boolean;
  write(text: string): void;
}

export interface FollowOptions {
  client: Pick<HopperClient, "getTask" | "cancelTask">;
  clock: Clock;
  progress: ProgressOutput;
  /** Calls `handler` on each interrupt (Ctrl-C) until the returned function is called. */
  onInterrupt(handler: () => void): () => void;
}

export interface FollowResult {
  /** The task as it ended: done, failed or cancelled. */
  task: Task;
  /** True when an interrupt asked for the cancel. */
  interrupted: boolean;
}

/** Measures the rate of a task's progress from the polls of the last `limits.cliRateWindowMs`. */
export class RateEstimator {
  private samples: { atMs: number; moved: number }[] = [];

  record(atMs: number, moved: number): void {
    this.samples.push({ atMs, moved });
    // Keep one sample older than the window, so the window is always covered end to end.
    while (this.samples.length > 2 && (this.samples[1]?.atMs ?? atMs) <= atMs - limits.cliRateWindowMs) {
      this.samples.shift();
    }
  }

  estimate(task: Pick<Task, "moved" | "total">): ProgressEstimate {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.atMs <= first.atMs) return { ratePerSecond: null, etaMs: null };
    const ratePerSecond = ((last.moved - first.moved) / (last.atMs - first.atMs)) * 1000;
    const remaining = Math.max(0, task.total - task.moved);
    if (remaining === 0) return { ratePerSecond, etaMs: 0 };
    const etaMs = ratePerSecond > 0 ? (remaining / ratePerSecond) * 1000 : null;
    return { ratePerSecond, etaMs };
  }
}

/** Polls the task until it ends, drawing its progress; an interrupt cancels it. */
export async function followTask(started: Task, options: FollowOptions): Promise<FollowResult> {
  const { client, clock, progress } = options;
  const rate = new RateEstimator();
  let task = started;
  let interrupted = false;
  let wakeEarly: (() => void) | undefined;
  let lastLineAtMs = Number.NEGATIVE_INFINITY;
  let barDrawn = false;

  const draw = (final: boolean) => {
    const estimate = rate.estimate(task);
    // A task that ended has no time left to estimate; one that stopped short never will.
    if (final) estimate.etaMs = task.state === "done" ? 0 : null;
    if (progress.isTTY) {
      progress.write(`\r${formatProgressBar(task, estimate)}${eraseLineEnd}`);
      barDrawn = true;
    } else if (final || clock.now() - lastLineAtMs >= limits.cliProgressLineIntervalMs) {
      progress.write(`${formatProgressLine(task, estimate)}\n`);
      lastLineAtMs = clock.now();
    }
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = clock.setTimeout(() => wake(), ms);
      const wake = () => {
        clock.clearTimeout(timer);
        wakeEarly = undefined;
        resolve();
      };
      wakeEarly = wake;
    });

  const unsubscribe = options.onInterrupt(() => {
    interrupted = true;
    wakeEarly?.();
  });
  try {
    rate.record(clock.now(), task.moved);
    draw(false);
    while (task.state === "running") {
      if (!interrupted) await pause(limits.cliTaskPollMs);
      if (interrupted) {
        task = await client.cancelTask(task.id);
        // A step under way when the cancel came still completes (it is one transaction) and adds
        // to `moved`; one more read after a poll's pause reports the count it ended at.
        await pause(limits.cliTaskPollMs);
        task = await client.getTask(task.id);
        break;
      }
      task = await client.getTask(task.id);
      rate.record(clock.now(), task.moved);
      if (task.state === "running") draw(false);
    }
    draw(true);
    return { task, interrupted };
  } finally {
    unsubscribe();
    // The bar's line is ended even when a poll failed, so the error starts on a line of its own.
    if (barDrawn) progress.write("\n");
  }
}
