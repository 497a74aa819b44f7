import assert from "node:assert/strict";
import { test } from "node:test";
import { Group, type Message } from "./queue-state.js";

const messages = (count: number) => Array.from({ length: count }, (_, seq) => ({ seq }) as Message);
const seqs = (group: Group) => Array.from({ length: group.length }, (_, i) => group.at(i)?.seq);

test("a FIFO group takes heads from its front, keeps its order through compaction, and puts back where asked", () => {
  const group = new Group();
  const all = messages(3000);
  for (const message of all) group.insert(group.length, message);
  // 2,500 heads taken: past the point where the array is compacted.
  for (const message of all.slice(0, 2500)) assert.equal(group.remove(message), 0);
  assert.deepEqual(seqs(group).slice(0, 3), [2500, 2501, 2502]);
  assert.equal(group.length, 500);
  // An undone ack puts the head back in front; a message from the middle comes out and goes back.
  group.insert(0, all[2499] as Message);
  assert.equal(group.at(0)?.seq, 2499);
  assert.equal(group.remove(all[2700] as Message), 201);
  group.insert(201, all[2700] as Message);
  assert.deepEqual(
    seqs(group),
    Array.from({ length: 501 }, (_, i) => 2499 + i),
  );
  assert.throws(() => group.remove(all[0] as Message), /not in its group/);
});
