import assert from "node:assert/strict";
import { test } from "node:test";
import { seededRandom } from "../../random.js";
import { type HeapSlot, IndexedHeap } from "./indexed-heap.js";

interface Item extends HeapSlot {
  key: number;
  id: number;
}

test("an indexed heap gives its items in order through pushes, pops, removals from the middle and re-keys", () => {
  const random = seededRandom(5);
  const heap = new IndexedHeap<Item>((a, b) => a.key < b.key || (a.key === b.key && a.id < b.id));
  const held = new Set<Item>();
  let nextId = 0;
  for (let step = 0; step < 20_000; step++) {
    const roll = random.float();
    const items = [...held];
    const some = items[Math.floor(random.float() * items.length)];
    if (roll < 0.45 || !some) {
      const item = { heapIndex: -1, key: Math.floor(random.float() * 1000), id: nextId++ };
      heap.push(item);
      held.add(item);
    } else if (roll < 0.65) {
      heap.remove(some);
      held.delete(some);
      assert.equal(some.heapIndex, -1);
    } else if (roll < 0.85) {
      some.key = Math.floor(random.float() * 1000);
      heap.update(some);
    } else {
      const expected = [...held].sort((a, b) => a.key - b.key || a.id - b.id)[0];
      assert.equal(heap.pop(), expected);
      if (expected) held.delete(expected);
    }
    // Every item knows where it is.
    for (const [index, item] of heap.values().entries()) assert.equal(item.heapIndex, index);
  }
  const drained: Item[] = [];
  for (let item = heap.pop(); item; item = heap.pop()) drained.push(item);
  assert.deepEqual(
    drained,
    [...held].sort((a, b) => a.key - b.key || a.id - b.id),
  );
});
