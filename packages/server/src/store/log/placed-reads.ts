/**
 * Reading bodies back from the segment files where they lie (inbox bodies today; any record whose
 * bytes stay on disk with only its place in memory). Bodies that lie close together in one segment —
 * appends one after another — are read with one read of the span they share, so a replay of a hundred
 * entries costs a few reads, not a hundred.
 */
import { invariant } from "../../errors.js";
import { limits } from "../../limits.js";

/** A body as a read needs it: its length, whether it reads back as text, and where it lies. */
export interface PlacedBody {
  readonly byteLength: number;
  readonly text: boolean;
  /** The bytes when memory still holds them (then `place` is not read). */
  readonly bytes: Buffer | string | undefined;
  readonly place: { seq: number; offset: number } | undefined;
}

/** Reads `length` bytes at `offset` of segment `seq` (AppendLog.readAt). */
export type ReadPlaced = (seq: number, offset: number, length: number) => Buffer;

/** The bytes of `bodies`, in their order; each is held in memory or placed in the log. */
export function readPlacedBodies(
  bodies: readonly PlacedBody[],
  readPlaced: ReadPlaced,
): Array<Buffer | string> {
  const bytes: Array<Buffer | string | undefined> = bodies.map((body) => body.bytes);
  const placed = bodies
    .map((body, index) => ({ body, index, place: body.place }))
    .filter(
      (item): item is { body: PlacedBody; index: number; place: { seq: number; offset: number } } =>
        item.body.bytes === undefined && item.place !== undefined,
    )
    .sort((a, b) => a.place.seq - b.place.seq || a.place.offset - b.place.offset);
  for (let first = 0; first < placed.length; ) {
    const start = placed[first] as (typeof placed)[number];
    let last = first;
    let end = start.place.offset + start.body.byteLength;
    while (last + 1 < placed.length) {
      const next = placed[last + 1] as (typeof placed)[number];
      const nextEnd = next.place.offset + next.body.byteLength;
      if (
        next.place.seq !== start.place.seq ||
        nextEnd - start.place.offset > limits.logInboxSpanReadBytesMax
      )
        break;
      end = Math.max(end, nextEnd);
      last += 1;
    }
    const span = readPlaced(start.place.seq, start.place.offset, end - start.place.offset);
    for (let at = first; at <= last; at++) {
      const { body, index, place } = placed[at] as (typeof placed)[number];
      const slice = span.subarray(
        place.offset - start.place.offset,
        place.offset - start.place.offset + body.byteLength,
      );
      bytes[index] = body.text ? slice.toString("utf8") : Buffer.from(slice);
    }
    first = last + 1;
  }
  invariant(
    bytes.every((body) => body !== undefined),
    "a body not held in memory has a place in the log",
  );
  return bytes as Array<Buffer | string>;
}
