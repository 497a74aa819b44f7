/** Small measuring tools shared by the workloads: percentiles and Hopper's request counts. */

export interface Percentiles {
  count: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

/** Nearest-rank percentiles (no interpolation), so every figure is a sample that really happened. */
export function percentiles(samples: readonly number[]): Percentiles {
  const sorted = Float64Array.from(samples).sort();
  const rank = (fraction: number) =>
    sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
  return { count: sorted.length, p50: rank(0.5), p99: rank(0.99), p999: rank(0.999), max: rank(1) };
}

export type RequestKind = "send" | "publish" | "receive" | "ack" | "other";

/**
 * Counts HopperClient's requests by kind (its `onRequest`). Send, receive and ack are each one
 * group-commit job on the server (a receive at least one), so their rate, set against the disk's flush
 * rate, shows whether commits are shared across requests and not only within a batch.
 */
export class RequestCounter {
  readonly counts: Record<RequestKind, number> = { send: 0, publish: 0, receive: 0, ack: 0, other: 0 };

  readonly onRequest = (method: string, path: string): void => {
    this.counts[requestKind(path, method)]++;
  };

  snapshot(): Record<RequestKind, number> {
    return { ...this.counts };
  }
}

function requestKind(url: string, method = "GET"): RequestKind {
  if (method !== "POST") return "other";
  if (url.endsWith("/messages")) return "send";
  if (url.endsWith("/publish")) return "publish";
  if (url.endsWith("/receive")) return "receive";
  if (url.endsWith("/ack")) return "ack";
  return "other";
}
