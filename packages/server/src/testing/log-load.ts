/**
 * A log store directory written by a real `hopper serve --store log:<dir>` under load, then killed
 * with SIGKILL, for the corruption suite: the load generator records every id whose send was
 * confirmed (a 200 answer arrived) and every id whose ack was confirmed, so that an oracle can judge
 * what a recovery of a damaged copy brought back. Also the tools the suite damages copies with.
 *
 * The server's segments roll at limits.logSegmentBytesMax (64 MiB) and no flag or variable changes
 * that, so the load reaches two segments the way a busy server does: large messages, acked as soon as
 * they are sent, grow the log past limits.logCompactBytesMin while the live state stays small; the
 * server then compacts into a base segment, and what follows goes to a regular segment after it. The
 * directory left is small (the base holds only the live state), so each damage case copies it cheaply.
 */
import assert from "node:assert/strict";
import { cpSync, readdirSync, readFileSync } from "node:fs";
import { systemClock } from "../clock.js";
import { limits } from "../limits.js";
import type { MessageState } from "../model/message.js";
import {
  decodeFrameHeader,
  frameHeaderBytes,
  manifestFileName,
  segmentFilePattern,
  segmentHeaderBytes,
} from "../store/log/log-format.js";
import type { Store } from "../store/store.js";
import { call, queuePath, results } from "./http-calls.js";
import { createTempDir, type ServerProcess, startServerProcess, type TempDir } from "./server-process.js";

/** Queues of large messages, each acked at once: they grow the log until the server compacts it. */
const bulkQueues = ["bulk-0", "bulk-1", "bulk-2", "bulk-3"] as const;
/** Queues of small messages, some acked, some leased and kept, most left available: the live state. */
const keepQueues = ["keep-0", "keep-1", "keep-2"] as const;
export const loadQueues: readonly string[] = [...bulkQueues, ...keepQueues];
/** 4 queues × 450 × 48 KiB ≈ 88 MB appended: past the 64 MiB at which the server compacts. */
const bulkBodyBytes = 48 * 1024;
const bulkBatch = 50;
const bulkMessagesPerQueueMax = 450;
const keepBatch = 20;
/** Every queue is sent at most limits.peekMax messages, so one peek per state sees all it holds. */
const keepMessagesPerQueueMax = 600;
/** Rounds of the small-message producer after the compaction: the regular segment after the base. */
const keepRoundsAfterCompaction = 12;
/** Leases taken and not acked stay in flight across the restart: the oracle needs them present. */
const leaseMs = 12 * 3_600_000;

export interface LoadedLog {
  /** The killed server's log directory. Copy it (copyLog) before damaging or opening it. */
  readonly dir: string;
  /** Every id whose send was confirmed, with its queue. */
  readonly confirmed: ReadonlyMap<string, string>;
  /** Every id whose ack was confirmed. */
  readonly acked: ReadonlySet<string>;
  /** Ids whose ack was sent but never answered (the kill came first): either state is right. */
  readonly ackUnsure: ReadonlySet<string>;
  /** Removes the temporary directory. */
  remove(): void;
}

/** The ids each queue holds, in any state. */
export type HeldIds = ReadonlyMap<string, ReadonlySet<string>>;

function assertOk(answer: { status: number; body: unknown }, what: string): void {
  assert.ok(
    answer.status === 200 || answer.status === 201,
    `${what}: ${answer.status} ${JSON.stringify(answer.body)}`,
  );
}

/** The log's segment file names, in log order. */
export function segmentFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => segmentFilePattern.test(name))
    .sort();
}

/**
 * Starts a server on a new log directory, runs the load until the server has compacted and written a
 * regular segment after its base, and kills it with SIGKILL while a send is in flight.
 */
export async function writeLoadedLog(): Promise<LoadedLog> {
  const temp: TempDir = createTempDir("hopper-log-load-");
  const dir = temp.file("log");
  const server = await startServerProcess({ store: `log:${dir}` });
  const confirmed = new Map<string, string>();
  const acked = new Set<string>();
  const ackUnsure = new Set<string>();
  try {
    for (const name of loadQueues) {
      const answer = await call(server, "PUT", queuePath(name), { visibilityTimeoutMs: leaseMs });
      assertOk(answer, `PUT ${name}`);
    }
    const compacted = () => Number(segmentFiles(dir)[0]?.slice(0, 20) ?? 0) > 1;
    let bulkDone = false;
    const bulk = (async () => {
      for (let sent = 0; sent < bulkMessagesPerQueueMax && !compacted(); sent += bulkBatch) {
        for (const name of bulkQueues) {
          const body = "b".repeat(bulkBodyBytes);
          await sendBatch(server, name, bulkBatch, () => body, confirmed);
          await receiveAndAck(server, name, bulkBatch, bulkBatch, acked, ackUnsure);
        }
      }
      bulkDone = true;
    })();
    // The small-message producer runs beside the bulk one, and on after it, into the new segment.
    let afterCompaction = 0;
    let round = 0;
    let killed: Promise<unknown> | undefined;
    while (killed === undefined) {
      const name = keepQueues[round % keepQueues.length] as string;
      assert.ok(
        round * keepBatch < keepMessagesPerQueueMax * keepQueues.length,
        "the load ran out of small messages before the server compacted",
      );
      if (bulkDone && compacted()) afterCompaction++;
      if (afterCompaction >= keepRoundsAfterCompaction) {
        // The kill comes while this send is on its way: its ids are never confirmed.
        const inFlight = sendBatch(server, name, keepBatch, (i) => ({ round, i }), confirmed).catch(() => {});
        killed = Promise.all([server.kill9(), inFlight]);
        break;
      }
      await sendBatch(server, name, keepBatch, (i) => ({ round, i, pad: "k".repeat(200) }), confirmed);
      // Every other round leases 10 and acks 6 of them: 4 stay in flight.
      if (round % 2 === 1) await receiveAndAck(server, name, 10, 6, acked, ackUnsure);
      round++;
    }
    await killed;
    await bulk.catch(() => {});
  } finally {
    if (server.exitStatus() === undefined) await server.kill9();
  }
  const segments = segmentFiles(dir);
  assert.ok(segments.length >= 2, `the load left ${segments.length} segment(s), not two or more`);
  return { dir, confirmed, acked, ackUnsure, remove: () => temp.remove() };
}

async function sendBatch(
  server: ServerProcess,
  name: string,
  count: number,
  body: (i: number) => unknown,
  confirmed: Map<string, string>,
): Promise<void> {
  const messages = Array.from({ length: count }, (_, i) => ({ body: body(i) }));
  const answer = await call(server, "POST", queuePath(name, "/messages"), { messages });
  assertOk(answer, `send to ${name}`);
  for (const item of results(answer)) {
    const id = (item as { id?: string }).id;
    assert.ok(typeof id === "string", `send to ${name}: ${JSON.stringify(item)}`);
    confirmed.set(id, name);
  }
}

async function receiveAndAck(
  server: ServerProcess,
  name: string,
  max: number,
  ackCount: number,
  acked: Set<string>,
  ackUnsure: Set<string>,
): Promise<void> {
  const answer = await call(server, "POST", queuePath(name, "/receive"), { max, waitMs: 0 });
  assertOk(answer, `receive from ${name}`);
  const leased = (answer.body as { messages: Array<{ id: string; receipt: string }> }).messages;
  const toAck = leased.slice(0, ackCount);
  if (toAck.length === 0) return;
  for (const message of toAck) ackUnsure.add(message.id);
  const ack = await call(server, "POST", queuePath(name, "/ack"), {
    receipts: toAck.map((message) => message.receipt),
  });
  assertOk(ack, `ack in ${name}`);
  results(ack).forEach((item, i) => {
    const id = toAck[i]?.id as string;
    assert.deepEqual(item, { ok: true }, `ack of ${id} in ${name}`);
    ackUnsure.delete(id);
    acked.add(id);
  });
}

/** A copy of the log directory under `into`, to damage or open; the original stays as the load left it. */
export function copyLog(load: LoadedLog, into: string): string {
  cpSync(load.dir, into, { recursive: true });
  return into;
}

/**
 * What the oracle finds wrong with the ids a recovered log holds: every id whose send was confirmed
 * and whose ack was not must be there, and no id whose ack was confirmed may be. Ids never confirmed,
 * and ids whose ack was never answered, may be either way. Empty when the recovery kept its promises.
 */
export function oracleProblems(load: LoadedLog, held: HeldIds): string[] {
  const problems: string[] = [];
  for (const [id, queue] of load.confirmed) {
    if (load.acked.has(id) || load.ackUnsure.has(id)) continue;
    if (!held.get(queue)?.has(id)) problems.push(`confirmed message ${id} of ${queue} is missing`);
  }
  for (const id of load.acked) {
    const queue = load.confirmed.get(id) as string;
    if (held.get(queue)?.has(id)) problems.push(`acked message ${id} of ${queue} is back`);
  }
  return problems;
}

const states: readonly MessageState[] = ["available", "delayed", "in-flight"];

/** The ids each load queue holds in a store opened in this process. */
export async function heldInStore(store: Store): Promise<HeldIds> {
  const held = new Map<string, Set<string>>();
  const now = systemClock.now();
  for (const queue of loadQueues) {
    const ids = new Set<string>();
    for (const state of states) {
      const messages = await store.queuePeek({ queue, state, limit: limits.peekMax, now });
      for (const message of messages) ids.add(message.id);
    }
    // A queue of the load never held more than peekMax messages, so the peeks saw every one.
    const depth = await store.queueDepth({ name: queue, now });
    assert.equal(
      ids.size,
      depth.available + depth.delayed + depth.inFlight,
      `the peeks of ${queue} missed messages`,
    );
    held.set(queue, ids);
  }
  return held;
}

/** The ids each load queue holds in a running server, read over HTTP. */
export async function heldInServer(server: ServerProcess): Promise<HeldIds> {
  const held = new Map<string, Set<string>>();
  for (const queue of loadQueues) {
    const ids = new Set<string>();
    for (const state of states) {
      const answer = await call(
        server,
        "GET",
        queuePath(queue, `/messages?state=${state}&limit=${limits.peekMax}`),
      );
      assertOk(answer, `peek ${queue}`);
      for (const message of (answer.body as { messages: Array<{ id: string }> }).messages)
        ids.add(message.id);
    }
    // As in heldInStore: the queue's depth says whether the peeks saw every message it holds.
    const queueAnswer = await call(server, "GET", queuePath(queue));
    assertOk(queueAnswer, `GET ${queue}`);
    const { stats } = queueAnswer.body as { stats: { available: number; delayed: number; inFlight: number } };
    assert.equal(
      ids.size,
      stats.available + stats.delayed + stats.inFlight,
      `the peeks of ${queue} missed messages`,
    );
    held.set(queue, ids);
  }
  return held;
}

/** A frame of a segment file, as its (intact) header describes it. */
export interface FrameAt {
  offset: number;
  /** frameKind in log-format.ts: a record, or a base's snapshot marker. */
  kind: number;
  length: number;
  batchEnd: boolean;
  /** Where the next frame starts. */
  end: number;
}

/** The frames of an intact segment file, in order. */
export function segmentFrames(path: string): FrameAt[] {
  const bytes = readFileSync(path);
  const frames: FrameAt[] = [];
  let offset = segmentHeaderBytes;
  while (offset + frameHeaderBytes <= bytes.length) {
    const header = decodeFrameHeader(bytes, offset);
    assert.ok(header !== undefined, `${path}: no intact frame at ${offset}`);
    const end = offset + frameHeaderBytes + header.length;
    frames.push({ offset, kind: header.kind, length: header.length, batchEnd: header.batchEnd, end });
    offset = end;
  }
  assert.equal(offset, bytes.length, `${path}: the frames do not end at the end of the file`);
  return frames;
}

/** The files a bit flip may hit: every segment and MANIFEST. */
export function damageableFiles(dir: string): string[] {
  return [...segmentFiles(dir), manifestFileName];
}
