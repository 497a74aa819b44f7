import assert from "node:assert/strict";
import { test } from "node:test";
import { GroupOrderCheck, groupKey } from "./group-order.js";

/** Four messages in two groups (g0: 0, 2; g1: 1, 3), sent as two requests of two: [0, 1] then [2, 3]. */
function twoRequests(options: { firstConfirmedBeforeSecond: boolean }): GroupOrderCheck {
  const check = new GroupOrderCheck(4, 2);
  const first = check.requestIssued(0, 2, 10);
  if (options.firstConfirmedBeforeSecond) check.requestConfirmed(first, 11);
  const second = check.requestIssued(2, 2, 12);
  if (!options.firstConfirmedBeforeSecond) check.requestConfirmed(first, 13);
  check.requestConfirmed(second, 14);
  return check;
}

function deliver(check: GroupOrderCheck, seqs: number[]): void {
  for (const seq of seqs) check.recordDelivery(seq, groupKey(seq, 2));
}

test("every group in send order: no violations", () => {
  const check = twoRequests({ firstConfirmedBeforeSecond: true });
  deliver(check, [0, 1, 3, 2]);
  assert.deepEqual(check.result(), {
    groups: 2,
    violations: 0,
    outOfOrder: 0,
    disagreeing: 0,
    requestPairsReversed: 0,
  });
});

test("a later request ahead of one confirmed before it was sent is out of order", () => {
  const check = twoRequests({ firstConfirmedBeforeSecond: true });
  deliver(check, [2, 0, 1, 3]);
  assert.equal(check.result().outOfOrder, 1);
});

test("concurrent requests stored the other way round, seen so by every group, are allowed", () => {
  const check = twoRequests({ firstConfirmedBeforeSecond: false });
  deliver(check, [2, 3, 0, 1]);
  const result = check.result();
  assert.equal(result.violations, 0);
  assert.equal(result.requestPairsReversed, 1);
});

test("concurrent requests that two groups see in different orders disagree", () => {
  const check = twoRequests({ firstConfirmedBeforeSecond: false });
  deliver(check, [2, 0, 1, 3]);
  const result = check.result();
  assert.equal(result.outOfOrder, 0);
  assert.equal(result.disagreeing, 1);
  assert.equal(result.violations, 1);
});

test("two messages of one group in one request must keep their order", () => {
  const check = new GroupOrderCheck(4, 2);
  check.requestIssued(0, 4, 10);
  deliver(check, [2, 0]);
  assert.equal(check.result().outOfOrder, 1);
});

test("a redelivery counts once and a wrong key throws", () => {
  const check = twoRequests({ firstConfirmedBeforeSecond: true });
  deliver(check, [0, 0, 2]);
  assert.equal(check.result().violations, 0);
  assert.throws(() => check.recordDelivery(1, "g0"), /arrived with key g0, not g1/);
});
