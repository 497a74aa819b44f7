import { clientErrorCodes, HopperError } from "./errors.js";
import { batchSizeMax } from "./limits.js";

/** Sends one batch of items and answers one result per item, in order. */
export type BatchSender<Item, Result> = (items: Item[]) => Promise<Result[]>;

interface PendingItem<Item, Result> {
  item: Item;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

interface PendingBatch<Item, Result> {
  items: PendingItem<Item, Result>[];
  send: BatchSender<Item, Result>;
}

/** Runs `callback` after the current turn of the event loop, so that calls made in that turn share it. */
const deferToEndOfTurn: (callback: () => void) => void =
  typeof globalThis.setImmediate === "function"
    ? (callback) => globalThis.setImmediate(callback)
    : (callback) => queueMicrotask(callback);

/**
 * Gathers single-item calls made in the same event-loop turn into batch calls, one batch per key, and
 * hands each caller its own item's result. A batch is sent at the end of the turn, or at once when it
 * holds `sizeMax` items, so a burst of calls becomes a few requests instead of one per call.
 */
export class BatchCoalescer<Item, Result> {
  private readonly pending = new Map<string, PendingBatch<Item, Result>>();

  constructor(private readonly sizeMax: number = batchSizeMax) {}

  /**
   * Adds an item to the batch for `key` and answers that item's result. Every item of one key must be
   * sendable by the same `send`; the first caller's `send` sends the batch. A failed `send` rejects
   * every caller in the batch; a result missing from the answer rejects its caller.
   */
  add(key: string, item: Item, send: BatchSender<Item, Result>): Promise<Result> {
    let batch = this.pending.get(key);
    if (batch === undefined) {
      const created: PendingBatch<Item, Result> = { items: [], send };
      this.pending.set(key, created);
      deferToEndOfTurn(() => this.flush(key, created));
      batch = created;
    }
    const { items } = batch;
    const answer = new Promise<Result>((resolve, reject) => {
      items.push({ item, resolve, reject });
    });
    if (items.length >= this.sizeMax) {
      this.flush(key, batch);
    }
    return answer;
  }

  /** Sends `batch` unless it was already sent because it filled up. */
  private flush(key: string, batch: PendingBatch<Item, Result>): void {
    if (this.pending.get(key) !== batch) {
      return;
    }
    this.pending.delete(key);
    const { items } = batch;
    batch.send(items.map((pending) => pending.item)).then(
      (results) => {
        items.forEach((pending, index) => {
          const result = results[index];
          if (result === undefined) {
            const message = `batch answer has ${results.length} results for ${items.length} items`;
            pending.reject(new HopperError({ code: clientErrorCodes.invalidResponse, message, status: 200 }));
          } else {
            pending.resolve(result);
          }
        });
      },
      (error: unknown) => {
        for (const pending of items) {
          pending.reject(error);
        }
      },
    );
  }
}
