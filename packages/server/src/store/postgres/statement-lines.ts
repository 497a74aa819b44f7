/**
 * One statement at a time per key (a queue's name): a call that arrives while another call of its key
 * is in flight waits, and the calls that waited go together as one batch, one statement, once it is
 * done; each gets its own answer. Like a group commit, it trades a wait of at most one statement for
 * fewer statements and round trips under load (at low rates nothing waits), and keeps a node's calls
 * for a key in their order. A batch stays within every bound (its items' sizeOf summed, at most max),
 * unless one call alone passes one: that call goes alone.
 */
import { invariant } from "../../errors.js";

interface Waiting<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

interface Line<T, R> {
  busy: boolean;
  waiting: Waiting<T, R>[];
}

/** A limit on a batch: the sum of sizeOf over its items, at most max. */
export interface BatchBound<T> {
  sizeOf: (item: T) => number;
  max: number;
}

export class StatementLines<T, R> {
  private readonly lines = new Map<string, Line<T, R>>();

  constructor(
    /** Runs the calls of one batch as one statement; answers one result per call, in order. */
    private readonly runBatch: (key: string, items: T[]) => Promise<R[]>,
    private readonly bounds: readonly BatchBound<T>[],
  ) {}

  run(key: string, item: T): Promise<R> {
    let line = this.lines.get(key);
    if (!line) {
      line = { busy: false, waiting: [] };
      this.lines.set(key, line);
    }
    const ready = line;
    const answer = new Promise<R>((resolve, reject) => ready.waiting.push({ item, resolve, reject }));
    if (!ready.busy) void this.drain(key, ready);
    return answer;
  }

  /** Runs what waits in the line, a batch at a time, until nothing waits. */
  private async drain(key: string, line: Line<T, R>): Promise<void> {
    line.busy = true;
    while (line.waiting.length > 0) {
      const batch = this.nextBatch(line.waiting);
      line.waiting.splice(0, batch.length);
      try {
        const results = await this.runBatch(
          key,
          batch.map((waiting) => waiting.item),
        );
        invariant(results.length === batch.length, "a batch answers each of its calls");
        batch.forEach((waiting, i) => {
          waiting.resolve(results[i] as R);
        });
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
    }
    line.busy = false;
    if (this.lines.get(key) === line) this.lines.delete(key);
  }

  /** The first waiting calls, as many as fit every bound; at least one. */
  private nextBatch(waiting: readonly Waiting<T, R>[]): Waiting<T, R>[] {
    const sums = this.bounds.map(() => 0);
    const batch: Waiting<T, R>[] = [];
    for (const next of waiting) {
      const sizes = this.bounds.map((bound) => bound.sizeOf(next.item));
      const fits = this.bounds.every((bound, i) => (sums[i] ?? 0) + (sizes[i] ?? 0) <= bound.max);
      if (batch.length > 0 && !fits) break;
      batch.push(next);
      sizes.forEach((size, i) => {
        sums[i] = (sums[i] ?? 0) + size;
      });
    }
    return batch;
  }
}
