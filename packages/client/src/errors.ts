import { answerExcerptCharsMax, deadLetterReasonLengthMax } from "./limits.js";
import type { ErrorBody } from "./types.js";

/** Codes the client gives to failures that have no error body from the server. */
export const clientErrorCodes = {
  /** The request never got an answer: connection refused, reset, DNS failure. */
  network: "network_error",
  /** A non-2xx answer whose body is not Hopper's `{"error": {…}}`, e.g. from a proxy. */
  http: "http_error",
  /** A 2xx answer whose body is not what API.md promises. */
  invalidResponse: "invalid_response",
  /** The caller's AbortSignal fired. */
  aborted: "aborted",
  /** No answer within the client's request timeout. */
  timeout: "timeout",
} as const;

export interface HopperErrorInit {
  code: string;
  message: string;
  /** The HTTP status; 0 when there was no answer. */
  status: number;
  details?: Record<string, unknown>;
  /** From a `Retry-After` header, e.g. on 429 `backpressure`. */
  retryAfterMs?: number;
  cause?: unknown;
}

/** Every failure the client reports: a server error, a failed batch item, or a request with no answer. */
export class HopperError extends Error {
  override readonly name = "HopperError";
  readonly code: string;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(init: HopperErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.details = init.details;
    this.retryAfterMs = init.retryAfterMs;
  }

  /** Builds the error for one failed item of a batch; `status` is that of the batch answer. */
  static fromItem(body: ErrorBody, status: number): HopperError {
    return new HopperError({ code: body.code, message: body.message, status, details: body.details });
  }

  /** Parses a non-2xx answer: Hopper's `{"error": {code, message, details}}`, or anything else. */
  static fromResponse(status: number, text: string, retryAfter: string | null): HopperError {
    const retryAfterMs = parseRetryAfterMs(retryAfter);
    const body = parseErrorBody(text);
    if (body) {
      return new HopperError({ ...body, status, retryAfterMs });
    }
    const excerpt = text.trim().slice(0, answerExcerptCharsMax);
    return new HopperError({
      code: clientErrorCodes.http,
      message: excerpt ? `HTTP ${status}: ${excerpt}` : `HTTP ${status}`,
      status,
      retryAfterMs,
    });
  }
}

/**
 * Thrown by a worker's or consumer's handler to reject its message for good (BullMQ's
 * UnrecoverableError, AMQP's `basic.reject` with `requeue=false`): the message is not retried but
 * nacked with `deadLetter: true`, so it goes to the queue's dead-letter target at once, with
 * `x-dead-letter-reason` set to `reason` (the server's default is `rejected`).
 */
export class UnrecoverableError extends Error {
  override readonly name = "UnrecoverableError";
  /** The dead letter's `x-dead-letter-reason`, 1–128 characters; undefined leaves it `rejected`. */
  readonly reason: string | undefined;

  constructor(message = "rejected", options: { reason?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const { reason } = options;
    if (reason !== undefined && (reason.length < 1 || reason.length > deadLetterReasonLengthMax)) {
      throw new RangeError(
        `reason must be 1 to ${deadLetterReasonLengthMax} characters, got ${reason.length}`,
      );
    }
    this.reason = reason;
  }
}

/** How to nack a message whose handler threw `error`: dead-lettered for an UnrecoverableError, else retried. */
export function nackOptionsAfter(error: unknown): { deadLetter?: true; reason?: string } {
  if (!(error instanceof UnrecoverableError)) return {};
  return error.reason === undefined ? { deadLetter: true } : { deadLetter: true, reason: error.reason };
}

function parseErrorBody(text: string): ErrorBody | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const error = (parsed as { error?: unknown } | null)?.error as Partial<ErrorBody> | undefined;
  if (typeof error?.code !== "string") {
    return undefined;
  }
  const details = typeof error.details === "object" && error.details !== null ? error.details : undefined;
  return {
    code: error.code,
    message: typeof error.message === "string" ? error.message : error.code,
    details,
  };
}

/** Only the delay-seconds form is read; Hopper does not send HTTP dates. */
function parseRetryAfterMs(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) {
    return undefined;
  }
  return Number(header.trim()) * 1000;
}
