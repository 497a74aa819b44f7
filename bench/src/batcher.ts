/**
 * Gathers single-item calls made in one event-loop turn into one batch call (at most `sizeMax` items),
 * the way Hopper's client coalesces `publish` and `ackLater`, so the peers get the same batching.
 */

/** Sends a batch; answers one result per item, in order. */
export type BatchSend<Item, Result> = (items: Item[]) => Promise<Result[]>;

interface Pending<Item, Result> {
  item: Item;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

export class TurnBatcher<Item, Result> {
  private pending: Pending<Item, Result>[] = [];

  constructor(
    private readonly send: BatchSend<Item, Result>,
    private readonly sizeMax: number,
  ) {}

  /** Adds `item` to the batch of this turn and answers its own result. */
  add(item: Item): Promise<Result> {
    if (this.pending.length === 0) setImmediate(() => this.flush());
    const answer = new Promise<Result>((resolve, reject) => this.pending.push({ item, resolve, reject }));
    if (this.pending.length >= this.sizeMax) this.flush();
    return answer;
  }

  private flush(): void {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    this.send(batch.map((pending) => pending.item)).then(
      (results) => {
        if (results.length !== batch.length) {
          const error = new Error(`a batch of ${batch.length} answered ${results.length} results`);
          for (const pending of batch) pending.reject(error);
          return;
        }
        batch.forEach((pending, index) => {
          pending.resolve(results[index] as Result);
        });
      },
      (error: unknown) => {
        for (const pending of batch) pending.reject(error);
      },
    );
  }
}
