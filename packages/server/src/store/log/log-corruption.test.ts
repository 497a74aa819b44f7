/**
 * The corruption suite, in process: seeded bit flips at random offsets in every segment and in
 * MANIFEST of a log written by a real server under load (testing/log-load.ts), each copy opened with
 * LogStore.open. Each must end in a refusal that names the damaged file and an offset, or in a store
 * that holds every message whose send was confirmed and whose ack was not, and no acked one. The same
 * flips against the weakened recovery (the old one: cut at the first damage) must break that promise
 * at least once, which shows the suite can fail.
 */
import assert from "node:assert/strict";
import { copyFileSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Random, seededRandom } from "../../random.js";
import {
  copyLog,
  damageableFiles,
  type FrameAt,
  heldInStore,
  type LoadedLog,
  oracleProblems,
  segmentFiles,
  segmentFrames,
  writeLoadedLog,
} from "../../testing/log-load.js";
import { createTempDir, type TempDir } from "../../testing/server-process.js";
import { manifestFileName, segmentFilePattern, segmentHeaderBytes } from "./log-format.js";
import { LogCorruption } from "./log-recovery.js";
import { LogStore } from "./log-store.js";

/** 200 flips in each of the load's files (two or three segments and MANIFEST): 600 cases or more,
 * each a copy of the flipped file and the newest segment and one open: about 15 ms each on an idle
 * 2-core machine, several times that when other builds share it. */
const flipsPerFile = 200;
/** The weakened recovery sees flips in the segments only: a damaged MANIFEST stops it as it stops the
 * strict one. */
const weakenedFlipsPerSegment = 40;
const seed = 0x5eed_1065;

let load: LoadedLog;
let work: TempDir;
let caseNumber = 0;

before(async () => {
  load = await writeLoadedLog();
  work = createTempDir("hopper-log-corruption-");
});

after(() => {
  load?.remove();
  work?.remove();
});

interface Flip {
  fileName: string;
  offset: number;
  bit: number;
}

type Verdict =
  | { kind: "refused"; error: LogCorruption }
  | { kind: "opened"; problems: string[]; cut: string | undefined };

/** Opens the directory in process and judges what it holds; the store is closed again. */
async function openAndJudge(dir: string, weakened = false): Promise<Verdict> {
  let store: LogStore;
  try {
    store = LogStore.open({ dir, random: seededRandom(1), weakenedRecoveryForTests: weakened });
  } catch (error) {
    if (error instanceof LogCorruption) return { kind: "refused", error };
    throw error;
  }
  try {
    const held = await heldInStore(store);
    const cut = store.recovery?.cut;
    return {
      kind: "opened",
      problems: oracleProblems(load, held),
      cut: cut && `${cut.fileName}@${cut.offset}`,
    };
  } finally {
    await store.close();
  }
}

function flipBit(dir: string, flip: Flip): void {
  const path = join(dir, flip.fileName);
  const bytes = readFileSync(path);
  assert.ok(flip.offset < bytes.length, `${flip.fileName} has no byte at ${flip.offset}`);
  bytes[flip.offset] = (bytes[flip.offset] as number) ^ (1 << flip.bit);
  writeFileSync(path, bytes);
}

function randomFlips(random: Random, fileNames: readonly string[], perFile: number): Flip[] {
  const flips: Flip[] = [];
  for (const fileName of fileNames) {
    const bytes = readFileSync(join(load.dir, fileName)).length;
    for (let i = 0; i < perFile; i++)
      flips.push({
        fileName,
        offset: Math.floor(random.float() * bytes),
        bit: Math.floor(random.float() * 8),
      });
  }
  return flips;
}

/**
 * A copy of the load's directory with one bit flipped, made cheaply: the flipped file and the newest
 * segment (which an open takes for appends) are copied, the other segments hard-linked (recovery
 * only reads them, or unlinks one a base replaced). The previous case's copy is removed first.
 */
function flippedCopy(flip: Flip): string {
  rmSync(join(work.path, `case-${caseNumber}`), { recursive: true, force: true });
  const dir = join(work.path, `case-${++caseNumber}`);
  mkdirSync(dir);
  const newest = segmentFiles(load.dir).at(-1);
  for (const fileName of readdirSync(load.dir)) {
    const writable = fileName === flip.fileName || fileName === newest || !segmentFilePattern.test(fileName);
    (writable ? copyFileSync : linkSync)(join(load.dir, fileName), join(dir, fileName));
  }
  flipBit(dir, flip);
  return dir;
}

/** A fresh copy of the load's directory with `damage` applied. */
function damagedCopy(damage: (dir: string) => void): string {
  const dir = copyLog(load, join(work.path, `case-${++caseNumber}`));
  damage(dir);
  return dir;
}

/** The frames of each source segment, read once. */
const framesOf = new Map<string, FrameAt[]>();

/**
 * Where a refusal must point for a flip at `flip.offset`: the start of the frame that holds the byte
 * (its header or payload fails its check), or 0 for a segment header or MANIFEST.
 */
function expectedOffset(flip: Flip, sourceDir: string): number {
  if (flip.fileName === manifestFileName || flip.offset < segmentHeaderBytes) return 0;
  const path = join(sourceDir, flip.fileName);
  const frames = framesOf.get(path) ?? segmentFrames(path);
  framesOf.set(path, frames);
  const holder = frames.find((frame) => frame.end > flip.offset);
  assert.ok(holder !== undefined, `no frame holds offset ${flip.offset} of ${flip.fileName}`);
  return holder.offset;
}

/** What is wrong with a verdict on a copy of `sourceDir` damaged by `flip`: empty when the suite's
 * rule holds. */
function verdictProblems(verdict: Verdict, flip: Flip, sourceDir = load.dir): string[] {
  if (verdict.kind === "opened") return verdict.problems;
  const { error } = verdict;
  const problems: string[] = [];
  if (error.fileName !== flip.fileName)
    problems.push(`the refusal names ${error.fileName}, not ${flip.fileName}`);
  else if (error.offset !== expectedOffset(flip, sourceDir))
    problems.push(`the refusal names offset ${error.offset}, not ${expectedOffset(flip, sourceDir)}`);
  if (!error.message.includes(`${error.fileName} at offset ${error.offset}:`))
    problems.push(`the refusal does not say where: ${error.message}`);
  return problems;
}

test("the load's log opens intact, and the oracle holds for it", async () => {
  assert.ok(load.confirmed.size - load.acked.size > 500, "the load left fewer than 500 live messages");
  const verdict = await openAndJudge(damagedCopy(() => {}));
  assert.equal(verdict.kind, "opened");
  assert.deepEqual(verdict.kind === "opened" && verdict.problems, []);
  assert.equal(verdict.kind === "opened" && verdict.cut, undefined);
});

test("the oracle sees a lost message and an acked one that came back", () => {
  const live = [...load.confirmed].find(([id]) => !load.acked.has(id) && !load.ackUnsure.has(id));
  const ackedId = [...load.acked][0];
  assert.ok(live !== undefined && ackedId !== undefined);
  const queue = load.confirmed.get(ackedId) as string;
  const held = new Map<string, Set<string>>([[queue, new Set([ackedId])]]);
  const problems = oracleProblems(load, held);
  assert.ok(problems.some((line) => line.includes(`${live[0]} of ${live[1]} is missing`)));
  assert.ok(problems.includes(`acked message ${ackedId} of ${queue} is back`));
});

test(`${flipsPerFile} seeded bit flips in every segment and in MANIFEST: refused where named, or nothing lost`, async () => {
  const files = damageableFiles(load.dir);
  assert.ok(files.length >= 3, `two segments and MANIFEST expected, found ${files.join(", ")}`);
  const flips = randomFlips(seededRandom(seed), files, flipsPerFile);
  const failures: string[] = [];
  let refused = 0;
  for (const flip of flips) {
    const verdict = await openAndJudge(flippedCopy(flip));
    if (verdict.kind === "refused") refused++;
    for (const problem of verdictProblems(verdict, flip))
      failures.push(`${flip.fileName} offset ${flip.offset} bit ${flip.bit}: ${problem}`);
  }
  assert.deepEqual(failures.slice(0, 10), [], `${failures.length} of ${flips.length} cases failed`);
  // Every byte of the format is under a CRC, so no flip can open unnoticed.
  assert.equal(refused, flips.length, "a bit flip was opened without a refusal");
});

test("the weakened recovery (cut at the first damage) fails the oracle on the same kind of flips", async (t) => {
  const flips = randomFlips(seededRandom(seed + 1), segmentFiles(load.dir), weakenedFlipsPerSegment);
  const caught = new Map<string, { lost: number; back: number; cases: number }>();
  let example = "";
  for (const flip of flips) {
    const verdict = await openAndJudge(flippedCopy(flip), true);
    if (verdict.kind !== "opened" || verdict.problems.length === 0) continue;
    const tally = caught.get(flip.fileName) ?? { lost: 0, back: 0, cases: 0 };
    tally.cases += 1;
    tally.lost += verdict.problems.filter((problem) => problem.endsWith("is missing")).length;
    tally.back += verdict.problems.filter((problem) => problem.endsWith("is back")).length;
    caught.set(flip.fileName, tally);
    example ||= `${flip.fileName} offset ${flip.offset} (cut at ${verdict.cut}): ${verdict.problems[0]}`;
  }
  t.diagnostic(
    `flips the weakened recovery opened wrongly, per file: ${JSON.stringify(Object.fromEntries(caught))}`,
  );
  t.diagnostic(`e.g. ${example}`);
  assert.ok(caught.size > 0, "the suite did not catch the weakened recovery");
});

/** The byte of a segment header that holds its flags (log-format.ts): bit 0 marks a base. */
const segmentFlagsOffset = 6;

test("a compacted log whose base is the newest segment: a flipped header or snapshot bit is refused", async () => {
  const compacted = damagedCopy(() => {});
  const store = LogStore.open({ dir: compacted, random: seededRandom(1) });
  await store.compact();
  await store.close();
  const segments = segmentFiles(compacted);
  const base = segments.at(-1) as string;
  const headerFlags = readFileSync(join(compacted, base))[segmentFlagsOffset] as number;
  assert.equal(headerFlags & 1, 1, `${base}, the newest segment, is not a base`);
  assert.equal(segments.length, 1, "the compaction left segments older than its base");

  // The snapshot's largest record: a marker frame has no payload to flip.
  const frames = segmentFrames(join(compacted, base));
  const middle = frames.reduce((largest, frame) => (frame.length > largest.length ? frame : largest));
  assert.ok(middle.length > 0);
  const cases: Flip[] = [
    { fileName: base, offset: 9, bit: 0 },
    { fileName: base, offset: middle.offset + 16 + Math.floor(middle.length / 2), bit: 3 },
  ];
  for (const flip of cases) {
    const dir = copyLog({ ...load, dir: compacted }, join(work.path, `case-${++caseNumber}`));
    flipBit(dir, flip);
    const verdict = await openAndJudge(dir);
    assert.equal(verdict.kind, "refused", `${base} offset ${flip.offset}: ${JSON.stringify(verdict)}`);
    assert.deepEqual(verdictProblems(verdict, flip, compacted), []);
  }
});
