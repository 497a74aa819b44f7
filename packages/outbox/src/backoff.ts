/**
 * How long the relay waits after a failure: exponential back-off with full jitter (a uniform draw
 * between 0 and base · 2^attempt, capped), so relays that failed together do not retry together; and
 * never less than the broker's `Retry-After`.
 */
import type { RandomFloat } from "./clock.js";
import { outboxLimits } from "./limits.js";

export interface BackoffOptions {
  baseMs?: number;
  maxMs?: number;
}

/** The wait before try number `attempt + 1`, where `attempt` counts consecutive failures from 1. */
export function backoffDelayMs(
  attempt: number,
  random: RandomFloat,
  retryAfterMs: number | undefined,
  options: BackoffOptions = {},
): number {
  const baseMs = options.baseMs ?? outboxLimits.backoffBaseMs;
  const maxMs = options.maxMs ?? outboxLimits.backoffMaxMs;
  // 2^30 · base is past any cap; bounding the exponent keeps the product finite.
  const ceilingMs = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(attempt - 1, 0), 30));
  const jitteredMs = Math.floor(random() * ceilingMs);
  const floorMs = Math.min(retryAfterMs ?? 0, outboxLimits.retryAfterMsMax);
  return Math.max(jitteredMs, floorMs);
}
