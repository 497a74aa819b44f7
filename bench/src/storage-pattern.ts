/**
 * W3's storage work laid out two ways, alone (no broker, no network), to size what a different store
 * would save: fill a queue with N messages of 1 KiB in commits of 600 (as the SQLite group commit now
 * takes them), then drain it in commits of one lease of 100 and the ack of the previous 100, each
 * commit made durable before the next (`synchronous = FULL` / `fdatasync`).
 *
 * - `rows`: SQLite as the store lays a queue out (a row per message in `messages`, its two indexes;
 *   a lease is an UPDATE of the row, an ack a DELETE), with plain statements: the B-tree work and the
 *   WAL pages, without the store's own logic (counters, FIFO, dead letters).
 * - `log`: an append-only file: a send appends each message (a header and the body), a lease appends
 *   a 17-byte record of the message's new delivery count (DESIGN.md §12: delivery counts reach the
 *   disk with the commit), an ack a 9-byte record; what is available and what is leased is kept in
 *   memory, and a lease reads its bodies back from the file in one read. Not a store: no recovery
 *   scan, no compaction (a drained segment would be deleted whole; a queue with old messages left
 *   among acked ones would need its live messages copied), one queue.
 *
 *   node bench/dist/storage-pattern.js [--messages 100000] [--rounds 3]
 *
 * Prints, per message of each phase: CPU µs of this process, bytes handed to write calls, write
 * calls (both from /proc/self/io), and commits.
 */
import {
  closeSync,
  fdatasyncSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "100000" },
    rounds: { type: "string", default: "3" },
  },
});
const total = Number(values.messages);
const rounds = Number(values.rounds);
if (!Number.isInteger(total) || total < 1000 || total % 100 !== 0)
  throw new Error("--messages: a multiple of 100");
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds: a positive integer");

/** Messages per fill commit and per lease, as the server's limits have them. */
const fillCommit = 600;
const leaseSize = 100;
const body = Buffer.from(JSON.stringify({ seq: 0, intendedAtMs: 0, pad: "x".repeat(980) }));

interface PhaseCost {
  cpuMicros: number;
  bytes: number;
  writes: number;
  commits: number;
}

/** A lease as the drain holds it until the next commit acks it. */
interface Receipt {
  seq: number;
  token: number;
}

/** One way to lay the queue out; each call is one durable commit. */
interface Pattern {
  /** Stores messages `from` … `to` − 1. */
  send(from: number, to: number): void;
  /** Leases up to `leaseSize` and acks `previous`; answers what it leased. */
  leaseAndAck(previous: Receipt[]): Receipt[];
  /** Messages still stored (unacked): 0 once drained, or the pattern is wrong. */
  left(): number;
  close(): void;
}

/** Bytes passed to write calls and the write calls made by this process so far (Linux). */
function ioSoFar(): { bytes: number; writes: number } {
  const io = readFileSync("/proc/self/io", "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? Number.NaN);
  return { bytes: field("wchar"), writes: field("syscw") };
}

/** What `phase` cost per message of the queue's `total`. */
function measure(phase: () => number): PhaseCost {
  const ioBefore = ioSoFar();
  const cpuBefore = process.cpuUsage();
  const commits = phase();
  const cpu = process.cpuUsage(cpuBefore);
  const io = ioSoFar();
  return {
    cpuMicros: (cpu.user + cpu.system) / total,
    bytes: (io.bytes - ioBefore.bytes) / total,
    writes: (io.writes - ioBefore.writes) / total,
    commits: commits / total,
  };
}

/** Fills the queue in commits of `fillCommit`; answers the commits made. */
function fill(pattern: Pattern): number {
  let commits = 0;
  for (let sent = 0; sent < total; sent += fillCommit) {
    pattern.send(sent, Math.min(total, sent + fillCommit));
    commits++;
  }
  return commits;
}

/** Drains the queue, each commit leasing the next messages and acking the last commit's; answers the commits. */
function drain(pattern: Pattern): number {
  let previous: Receipt[] = [];
  for (let commits = 1; ; commits++) {
    const leased = pattern.leaseAndAck(previous);
    if (leased.length === 0) return commits;
    previous = leased;
  }
}

// better-sqlite3 is the server's dependency; load it from there.
const Database = createRequire(new URL("../../packages/server/package.json", import.meta.url))(
  "better-sqlite3",
) as typeof import("better-sqlite3");

const now = 1_000_000;

function rowsPattern(dir: string): Pattern {
  const db = new Database(join(dir, "rows.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(`
    CREATE TABLE messages (seq INTEGER PRIMARY KEY, queue_id INTEGER NOT NULL, id TEXT NOT NULL,
      body BLOB NOT NULL, content_type TEXT NOT NULL, headers TEXT, key TEXT, published_at INTEGER NOT NULL,
      visible_at INTEGER NOT NULL, delivery_count INTEGER NOT NULL DEFAULT 0, first_delivered_at INTEGER,
      lease_token INTEGER) STRICT;
    CREATE INDEX messages_by_visibility ON messages (queue_id, visible_at, lease_token);
    CREATE INDEX messages_by_publish ON messages (queue_id, published_at);`);
  const insert = db.prepare(
    "INSERT INTO messages (queue_id, id, body, content_type, published_at, visible_at) VALUES (1, ?, ?, 'application/json', ?, ?)",
  );
  const candidates = db.prepare(
    "SELECT seq, CAST(body AS TEXT) AS body, delivery_count FROM messages WHERE queue_id = 1 AND visible_at <= ? AND lease_token IS NULL ORDER BY visible_at LIMIT ?",
  );
  const lease = db.prepare(
    "UPDATE messages SET visible_at = ?, lease_token = ?, delivery_count = delivery_count + 1, first_delivered_at = coalesce(first_delivered_at, ?) WHERE seq = ?",
  );
  const ack = db.prepare("DELETE FROM messages WHERE seq = ? AND queue_id = 1 AND lease_token = ?");
  let token = 1;
  return {
    send: db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) insert.run(`m${i}`, body, now, now);
    }),
    leaseAndAck: db.transaction((previous: Receipt[]) => {
      const rows = candidates.all(now, leaseSize) as { seq: number; body: string }[];
      const taken = rows.map((row) => {
        lease.run(now + 30_000, token, now, row.seq);
        return { seq: row.seq, token: token++ };
      });
      for (const message of previous) ack.run(message.seq, message.token);
      return taken;
    }),
    left() {
      return (db.prepare("SELECT count(*) AS n FROM messages").get() as { n: number }).n;
    },
    close() {
      db.close();
    },
  };
}

/** Record types of the log. */
const messageRecord = 1;
const leaseRecord = 2;
const ackRecord = 3;
/** A message record: type, seq (8), body length (4), then the body. */
const messageHeaderBytes = 13;

function logPattern(dir: string): Pattern {
  // Over 80 lines: one storage pattern whose operations share the file and its indexes in memory.
  const fd = openSync(join(dir, "queue.log"), "a+");
  let end = 0;
  /** Appends the buffers as one write and makes them durable: one commit. */
  const commit = (records: Buffer[]) => {
    const buffer = Buffer.concat(records);
    writeSync(fd, buffer, 0, buffer.length, end);
    end += buffer.length;
    fdatasyncSync(fd);
  };
  // In memory: each message's place in the file, what is available (in order), what is leased.
  const offsets: number[] = [];
  const available: number[] = [];
  let head = 0;
  const leased = new Map<number, { token: number; deliveries: number }>();
  let token = 1;
  return {
    send(from, to) {
      const records: Buffer[] = [];
      // Each record's place: where it lands once this commit is appended.
      let at = end;
      for (let seq = from; seq < to; seq++) {
        const header = Buffer.allocUnsafe(messageHeaderBytes);
        header.writeUInt8(messageRecord, 0);
        header.writeBigUInt64LE(BigInt(seq), 1);
        header.writeUInt32LE(body.length, 9);
        records.push(header, body);
        offsets[seq] = at;
        at += messageHeaderBytes + body.length;
        available.push(seq);
      }
      commit(records);
    },
    leaseAndAck(previous) {
      const records: Buffer[] = [];
      const taken: Receipt[] = [];
      const count = Math.min(leaseSize, available.length - head);
      if (count > 0) {
        const first = available[head] as number;
        const last = available[head + count - 1] as number;
        const from = offsets[first] as number;
        const to = (offsets[last] as number) + messageHeaderBytes + body.length;
        const span = Buffer.allocUnsafe(to - from);
        readSync(fd, span, 0, span.length, from);
        const lease = Buffer.allocUnsafe(17 * count);
        for (let i = 0; i < count; i++) {
          const seq = available[head + i] as number;
          const at = (offsets[seq] as number) - from;
          const length = span.readUInt32LE(at + 9);
          const text = span.toString("utf8", at + messageHeaderBytes, at + messageHeaderBytes + length);
          if (text.length === 0) throw new Error("empty body");
          const deliveries = (leased.get(seq)?.deliveries ?? 0) + 1;
          leased.set(seq, { token, deliveries });
          lease.writeUInt8(leaseRecord, 17 * i);
          lease.writeBigUInt64LE(BigInt(seq), 17 * i + 1);
          lease.writeUInt32LE(deliveries, 17 * i + 9);
          lease.writeUInt32LE(token, 17 * i + 13);
          taken.push({ seq, token: token++ });
        }
        head += count;
        records.push(lease);
      }
      if (previous.length > 0) {
        const acks = Buffer.allocUnsafe(9 * previous.length);
        previous.forEach((message, i) => {
          if (leased.get(message.seq)?.token !== message.token) throw new Error("stale receipt");
          leased.delete(message.seq);
          acks.writeUInt8(ackRecord, 9 * i);
          acks.writeBigUInt64LE(BigInt(message.seq), 9 * i + 1);
        });
        records.push(acks);
      }
      if (records.length > 0) commit(records);
      return taken;
    },
    left() {
      return available.length - head + leased.size;
    },
    close() {
      closeSync(fd);
    },
  };
}

const format = (cost: PhaseCost) =>
  `${cost.cpuMicros.toFixed(1)} µs CPU · ${(cost.bytes / 1024).toFixed(2)} KiB written · ` +
  `${cost.writes.toFixed(2)} writes · ${(cost.commits * 100).toFixed(2)} commits per 100`;

for (let round = 1; round <= rounds; round++) {
  for (const [name, make] of [
    ["rows", rowsPattern],
    ["log", logPattern],
  ] as const) {
    const dir = mkdtempSync(join(tmpdir(), `hopper-pattern-${name}-`));
    try {
      const pattern = make(dir);
      const filled = measure(() => fill(pattern));
      const drained = measure(() => drain(pattern));
      const left = pattern.left();
      pattern.close();
      if (left !== 0) throw new Error(`${name}: ${left} messages left after the drain`);
      console.log(`round ${round} ${name}: fill ${format(filled)}; drain ${format(drained)}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
