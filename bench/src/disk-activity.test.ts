import assert from "node:assert/strict";
import { test } from "node:test";
import { diskDelta, parseDiskstats } from "./disk-activity.js";

// Two whole disks, a partition of one (its writes are already in the disk's line), and a loop device;
// vdb's line is from a kernel before 5.5, which reports no flushes.
const modern = [
  " 254       0 vda 54889 8490 3179458 57081 3551297 73644 167306472 708061 0 178072 819334 79530 7 36265456 8163 1171090 46028",
  " 254       1 vda1 54000 8000 3000000 57000 3551000 73000 167300000 708000 0 178000 819000 79000 7 36265000 8000 0 0",
  "   7       0 loop0 10 0 80 0 5 0 999 0 0 0 0 0 0 0 0 7 0",
  " 254      16 vdc 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 3 0",
].join("\n");

test("sums the sectors written and the flushes of the disks named, and nothing of other lines", () => {
  const counters = parseDiskstats(modern, new Set(["vda", "vdc"]));
  assert.deepEqual(counters, { flushes: 1171093, bytesWritten: (167306472 + 16) * 512 });
});

test("a disk whose kernel reports no flushes leaves flushes unknown, not zero", () => {
  const old = `${modern}\n 254      32 vdb 1 0 8 0 2 0 16 0 0 0 0`;
  const counters = parseDiskstats(old, new Set(["vda", "vdb"]));
  assert.equal(counters.flushes, undefined);
  assert.equal(counters.bytesWritten, (167306472 + 16) * 512);
  assert.deepEqual(diskDelta(counters, { flushes: 5, bytesWritten: counters.bytesWritten + 4096 }), {
    flushes: undefined,
    bytesWritten: 4096,
  });
});

test("the delta of two readings is what happened between them", () => {
  assert.deepEqual(diskDelta({ flushes: 10, bytesWritten: 1000 }, { flushes: 25, bytesWritten: 9192 }), {
    flushes: 15,
    bytesWritten: 8192,
  });
});
