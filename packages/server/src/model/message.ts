/** A message as it is sent, stored and leased, and the outcome of a receipt. Types and pure rules. */

export interface NewMessage {
  id: string;
  /**
   * The body's bytes, or, for a JSON body, its text or bytes: the form it came in (a send over HTTP or
   * a WebSocket brings the bytes the producer sent; sendInTransaction serializes a value to text), so
   * the log store, which keeps either, converts nothing; SQLite's BLOB column and PostgreSQL's bytea take
   * bytes (bodyBytes). Its size is bodyByteLength.
   */
  body: Buffer | string;
  contentType: string;
  headers: Record<string, string>;
  key: string | null;
  /** 0–9, higher leased first; always 0 in a FIFO queue. */
  priority: number;
  /** Set when the queue deduplicates this message (the broker leaves it null otherwise). */
  dedupId: string | null;
  publishedAt: number;
  visibleAt: number;
}

export interface StoredMessage extends Omit<NewMessage, "body"> {
  /**
   * The body's bytes, or, for a JSON body, the same bytes as text (UTF-8): the SQLite store reads JSON
   * bodies as text, cheaper there than a Buffer (bench/results/2026-12-01-session-8.md); the log store
   * hands a body over as it came (NewMessage.body).
   */
  body: Buffer | string;
  deliveryCount: number;
  firstDeliveredAt: number | null;
  /** Set, by peek only, on a message whose body no longer matches the checksum stored with it. */
  corrupt?: true;
}

/** A body as bytes, to write it where only bytes go (a dead-letter copy, a move, PostgreSQL's bytea). */
export function bodyBytes(body: Buffer | string): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}

/** A body's size in bytes, the figure the queue's maxMessageBytes limits. */
export function bodyByteLength(body: Buffer | string): number {
  return typeof body === "string" ? Buffer.byteLength(body, "utf8") : body.length;
}

export interface LeasedMessage extends StoredMessage {
  /** Names this lease, not only the message: an ack with an older receipt is refused. */
  receipt: string;
}

export type MessageState = "available" | "delayed" | "in-flight";

/**
 * The outcome of one item of a receipt batch; `stale_receipt` and `invalid_receipt` are per item, and
 * `no_dead_letter_target` answers a dead-lettering nack in a queue with nowhere to put it.
 */
export type ReceiptResult =
  | { ok: true }
  | { error: "stale_receipt" | "invalid_receipt" | "no_dead_letter_target" };

/**
 * A dead-lettering nack's result for a receipt in a queue with no dead-letter target: a receipt that
 * names a lease answers `no_dead_letter_target` (and the lease stays); a refused one keeps its error.
 */
export function noTargetUnlessRefused(result: ReceiptResult): ReceiptResult {
  return "ok" in result ? { error: "no_dead_letter_target" } : result;
}
