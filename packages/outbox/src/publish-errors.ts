/**
 * What a publish failure means for the rows it carried, in one place:
 *
 * - `retry`: the broker or the network failed (429, 503 and other 5xx, 408, no answer). The same rows
 *   are tried again after a back-off.
 * - `pause`: a configuration fault that would fail every row the same way (401, 403, a queue or exchange
 *   that does not exist). Nothing is marked; the destination (or, for auth, the whole relay) waits
 *   with a back-off until someone fixes it.
 * - `reject`: the broker refused this row itself (a 400 or 413, or an item error such as
 *   `message_too_large` or `unroutable`). Sending it again would fail again, so the row is marked
 *   `failed` and its key waits behind it until an operator retries or drops it.
 */
import { HopperError } from "@hopper/client";

export type FailureKind = "retry" | "pause" | "reject";

export function classifyRequestError(error: unknown): FailureKind {
  if (!(error instanceof HopperError)) return "retry";
  if (error.status === 0) return "retry"; // network_error, timeout, aborted: no answer at all
  if (error.status === 401 || error.status === 403) return "pause";
  if (error.status === 404 || error.code.endsWith("not_found")) return "pause";
  if (error.status === 408 || error.status === 429 || error.status >= 500) return "retry";
  if (error.status === 400 || error.status === 413) return "reject";
  // Any other answer (a 409 or 415 from a proxy or a newer server) is not the row's fault that we
  // know of; retrying keeps the row, where rejecting would block its key.
  return "retry";
}

/** An item error of a 200 answer: the broker refused that one message. */
export function classifyItemError(code: string): FailureKind {
  return code.endsWith("not_found") ? "pause" : "reject";
}

/** What is kept of an error on a failed row and in the relay's reports. */
export interface RecordedError {
  code: string;
  message: string;
  status?: number;
  details?: Record<string, unknown>;
}

export function recordError(error: unknown): RecordedError {
  if (error instanceof HopperError) {
    return {
      code: error.code,
      message: error.message,
      status: error.status,
      ...(error.details ? { details: error.details } : {}),
    };
  }
  return { code: "relay_error", message: error instanceof Error ? error.message : String(error) };
}
