/**
 * The bench's message body: a JSON object holding the sequence number (to check exactly-once
 * delivery) and the intended send time (to measure latency), padded so that its serialized form, which
 * is what the server stores, is exactly the requested number of bytes.
 *
 *   {"seq":41,"intendedAtMs":1234.567,"pad":"xxxx…"}   ← JSON.stringify length == bodyBytes
 */

export interface BenchBody {
  seq: number;
  /** performance.now() in the bench process when the message was meant to be sent. */
  intendedAtMs: number;
  pad: string;
}

/** Builds a body whose JSON is exactly `bodyBytes` bytes (all of it ASCII, so bytes equal chars). */
export function benchBody(seq: number, intendedAtMs: number, bodyBytes: number): BenchBody {
  const unpadded = JSON.stringify({ seq, intendedAtMs, pad: "" }).length;
  const padLength = bodyBytes - unpadded;
  if (padLength < 0) throw new Error(`a ${bodyBytes}-byte body cannot hold ${unpadded} bytes of fields`);
  return { seq, intendedAtMs, pad: "x".repeat(padLength) };
}

/** Reads a received body back; anything else in the queue is a bug in the bench or the server. */
export function readBenchBody(body: unknown): BenchBody {
  const candidate = body as Partial<BenchBody> | null;
  if (
    typeof candidate !== "object" ||
    candidate === null ||
    typeof candidate.seq !== "number" ||
    typeof candidate.intendedAtMs !== "number"
  ) {
    throw new Error(`received a body that is not a bench message: ${JSON.stringify(body).slice(0, 200)}`);
  }
  return candidate as BenchBody;
}
