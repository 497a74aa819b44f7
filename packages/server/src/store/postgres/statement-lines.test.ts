import assert from "node:assert/strict";
import { test } from "node:test";
import { StatementLines } from "./statement-lines.js";

/** Lines whose statements are held until released, recording each batch's items. */
function heldLines(bounds: ConstructorParameters<typeof StatementLines<number, number>>[1]) {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const lines = new StatementLines<number, number>(async (_key, items) => {
    batches.push(items);
    await new Promise<void>((resolve) => releases.push(resolve));
    return items.map((item) => item * 10);
  }, bounds);
  const releaseAll = async () => {
    while (releases.length > 0 || batches.length === 0) {
      releases.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { lines, batches, releaseAll };
}

test("calls that wait while a statement runs go together, within every bound, each with its own answer", async () => {
  const { lines, batches, releaseAll } = heldLines([
    { sizeOf: () => 1, max: 3 },
    { sizeOf: (item) => item, max: 10 },
  ]);
  const first = lines.run("q", 1);
  // These wait for the first statement: at most 3 calls and 10 units each.
  const waiting = [4, 4, 1, 1, 1, 1, 9, 20].map((item) => lines.run("q", item));
  await releaseAll();
  assert.deepEqual(await Promise.all([first, ...waiting]), [10, 40, 40, 10, 10, 10, 10, 90, 200]);
  assert.deepEqual(batches, [[1], [4, 4, 1], [1, 1, 1], [9], [20]], "a call past a bound alone goes alone");
});

test("each key has its own line", async () => {
  const { lines, batches, releaseAll } = heldLines([{ sizeOf: () => 1, max: 100 }]);
  const answers = Promise.all([lines.run("a", 1), lines.run("b", 2), lines.run("a", 3), lines.run("b", 4)]);
  await releaseAll();
  assert.deepEqual(await answers, [10, 20, 30, 40]);
  assert.deepEqual(batches, [[1], [2], [3], [4]]);
});
