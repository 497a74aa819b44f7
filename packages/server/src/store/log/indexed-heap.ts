/**
 * A binary min-heap whose items know their own position, so that one can be removed or re-keyed in
 * O(log n) without a search: the log store keeps every queue's messages in such heaps, in the order a
 * lease takes them, and an ack removes the acked message from the middle.
 *
 * Invariant: for every item at position i > 0, `before(items[parent(i)], items[i])` is not false,
 * and `positionOf(items[i]) === i`; an item outside the heap has position -1.
 */
export interface HeapSlot {
  /** Position in the one heap that holds the item, or -1. Owned by that heap. */
  heapIndex: number;
}

export class IndexedHeap<Item extends HeapSlot> {
  private readonly items: Item[] = [];

  /** `before(a, b)`: a comes out first. Must be a strict order that stays fixed while both are held. */
  constructor(private readonly before: (a: Item, b: Item) => boolean) {}

  push(item: Item): void {
    item.heapIndex = this.items.length;
    this.items.push(item);
    this.up(item.heapIndex);
  }

  pop(): Item | undefined {
    const top = this.items[0];
    if (top) this.remove(top);
    return top;
  }

  remove(item: Item): void {
    const index = item.heapIndex;
    if (index < 0 || this.items[index] !== item) return;
    const last = this.items.pop() as Item;
    item.heapIndex = -1;
    if (last === item) return;
    this.items[index] = last;
    last.heapIndex = index;
    this.up(index);
    this.down(last.heapIndex);
  }

  /** Restores the order after the item's key changed. */
  update(item: Item): void {
    this.up(item.heapIndex);
    this.down(item.heapIndex);
  }

  /** Every item, in no particular order (for scans that filter and sort themselves). */
  values(): readonly Item[] {
    return this.items;
  }

  private up(index: number): void {
    const items = this.items;
    const item = items[index] as Item;
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = items[parentIndex] as Item;
      if (!this.before(item, parent)) break;
      items[index] = parent;
      parent.heapIndex = index;
      index = parentIndex;
    }
    items[index] = item;
    item.heapIndex = index;
  }

  private down(index: number): void {
    const items = this.items;
    const length = items.length;
    const item = items[index] as Item;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= length) break;
      const right = left + 1;
      const child = right < length && this.before(items[right] as Item, items[left] as Item) ? right : left;
      const childItem = items[child] as Item;
      if (!this.before(childItem, item)) break;
      items[index] = childItem;
      childItem.heapIndex = index;
      index = child;
    }
    items[index] = item;
    item.heapIndex = index;
  }
}
