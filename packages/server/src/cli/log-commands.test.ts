/**
 * `hopper log verify` and `hopper log salvage`, run as the compiled CLI on copies of a log that a real
 * server wrote under load and was killed in (testing/log-load.ts): verify tells an intact log from a
 * damaged one, naming the damage; salvage copies the records before the damage into a log that opens,
 * and with --skip-damaged the intact records after it too.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { seededRandom } from "../random.js";
import { frameKind } from "../store/log/log-format.js";
import { LogStore } from "../store/log/log-store.js";
import {
  copyLog,
  type FrameAt,
  type LoadedLog,
  segmentFiles,
  segmentFrames,
  writeLoadedLog,
} from "../testing/log-load.js";
import { createTempDir, type TempDir } from "../testing/server-process.js";

/** The compiled CLI, beside this compiled file. */
const mainPath = fileURLToPath(new URL("./main.js", import.meta.url));
/** verify and salvage read a few MB here; a cold start of the CLI takes under a second. */
const cliTimeoutMs = 30_000;

let load: LoadedLog;
let work: TempDir;
let caseNumber = 0;

before(async () => {
  load = await writeLoadedLog();
  work = createTempDir("hopper-log-commands-");
});

after(() => {
  load?.remove();
  work?.remove();
});

function hopper(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [mainPath, ...args], { encoding: "utf8", timeout: cliTimeoutMs });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

function freshCopy(): string {
  return copyLog(load, join(work.path, `case-${++caseNumber}`));
}

interface Damaged {
  dir: string;
  fileName: string;
  frame: FrameAt;
  /** Records of the log before the damaged one, and in all. */
  recordsBefore: number;
  recordsTotal: number;
}

/** A copy with one payload bit flipped in a record in the middle of the newest segment. */
function damagedCopy(): Damaged {
  const dir = freshCopy();
  const segments = segmentFiles(dir);
  const fileName = segments.at(-1) as string;
  const newestFrames = segmentFrames(join(dir, fileName));
  const frame = newestFrames[Math.floor(newestFrames.length / 2)] as FrameAt;
  const isRecord = (candidate: FrameAt) => candidate.kind === frameKind.record;
  const olderRecords = segments
    .slice(0, -1)
    .reduce((count, segment) => count + segmentFrames(join(dir, segment)).filter(isRecord).length, 0);
  const path = join(dir, fileName);
  const bytes = readFileSync(path);
  const at = frame.offset + 16 + Math.floor(frame.length / 2);
  bytes[at] = (bytes[at] as number) ^ 0x80;
  writeFileSync(path, bytes);
  return {
    dir,
    fileName,
    frame,
    recordsBefore:
      olderRecords + newestFrames.filter((found) => isRecord(found) && found.offset < frame.offset).length,
    recordsTotal: olderRecords + newestFrames.filter(isRecord).length,
  };
}

/** Opens a salvaged log in process and answers how many records it replayed. */
async function recordsReplayed(dir: string): Promise<number> {
  const store = LogStore.open({ dir, random: seededRandom(1) });
  try {
    return store.recovery?.recordsReplayed ?? -1;
  } finally {
    await store.close();
  }
}

test("log verify exits 0 on an intact log and lists its segments", () => {
  const dir = freshCopy();
  const run = hopper("log", "verify", dir);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  for (const segment of segmentFiles(dir)) assert.match(run.stdout, new RegExp(`^${segment} `, "m"));
  assert.match(run.stdout, /^ok: the log opens with \d+ record\(s\)$/m);
});

test("log verify exits 1 on a damaged log, naming the file, the offset and the damage", () => {
  const damaged = damagedCopy();
  const run = hopper("log", "verify", damaged.dir);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    new RegExp(
      `^damaged: ${damaged.fileName} at offset ${damaged.frame.offset}: a record's payload fails its CRC`,
      "m",
    ),
  );
});

test("log salvage copies the records before the damage into a log that opens", async () => {
  const damaged = damagedCopy();
  const to = join(work.path, `salvaged-${++caseNumber}`);
  const run = hopper("log", "salvage", damaged.dir, "--to", to);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stdout, new RegExp(`^copied ${damaged.recordsBefore} record\\(s\\) into `, "m"));
  assert.match(
    run.stdout,
    new RegExp(`^left behind: damage in ${damaged.fileName} at offset ${damaged.frame.offset}: `, "m"),
  );
  assert.match(run.stdout, /opens as a log store/);
  assert.equal(await recordsReplayed(to), damaged.recordsBefore);
});

test("log salvage --skip-damaged also copies the intact records after the damage", async () => {
  const damaged = damagedCopy();
  const to = join(work.path, `salvaged-${++caseNumber}`);
  const run = hopper("log", "salvage", damaged.dir, "--to", to, "--skip-damaged");
  assert.equal(run.code, 1, run.stdout + run.stderr);
  // Only the damaged record is left behind.
  const copied = damaged.recordsTotal - 1;
  assert.ok(copied > damaged.recordsBefore);
  assert.match(run.stdout, new RegExp(`^copied ${copied} record\\(s\\) into `, "m"));
  assert.equal(await recordsReplayed(to), copied);
});
