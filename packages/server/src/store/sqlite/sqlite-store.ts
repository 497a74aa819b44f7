/**
 * The embedded store on SQLite: one file in WAL mode, written through group commit. Reads run at once
 * against the last committed state; writes are jobs of the next group commit. What queues and
 * exchanges mean is the embedded engine's (embedded/); this store keeps the rows (queue-rows.ts,
 * exchange-rows.ts), the file, its checks and its checkpoints.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database, { type Database as Db } from "better-sqlite3";
import { limits } from "../../limits.js";
import type { Random } from "../../random.js";
import { EmbeddedStore } from "../embedded/embedded-store.js";
import type { Durability } from "../store.js";
import { Checkpointer, type CheckpointerStats } from "./checkpointer.js";
import { CommitCounter, commitCountPath } from "./commit-count.js";
import { type ExchangeRow, SqliteExchangeRows } from "./exchange-rows.js";
import { GroupCommit } from "./group-commit.js";
import { type SqliteInbox, SqliteInboxRows } from "./inbox-rows.js";
import { checkDatabaseFiles } from "./integrity.js";
import { type QueueRef, type SqliteMessageRow, SqliteQueueRows, Statements } from "./queue-rows.js";
import { migrations } from "./schema.js";
import { lockDatabaseFile } from "./sqlite-lock.js";
import { type SqliteStream, SqliteStreamRows } from "./stream-rows.js";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:" for tests that need no file. */
  path: string;
  /** "fsync" (default): a commit survives power loss. "os": the OS flushes later; a process crash
   * loses nothing, a power loss may lose the last moments of writes. */
  durability?: Durability;
  random: Random;
  /** PRAGMA quick_check of the file before it is served (default true); false skips it, for a file so
   * large that the check would hold the start for long (docs/reliability.md). */
  integrityCheck?: boolean;
}

/** The open file and what writes through it. */
interface OpenDatabase {
  db: Db;
  writes: GroupCommit;
  checkpointer: Checkpointer | undefined;
  commitCounter: CommitCounter | undefined;
  /** Lets go of the file's lock (sqlite-lock.ts); undefined in memory. */
  releaseLock: (() => void) | undefined;
}

function openDatabase(options: SqliteStoreOptions): OpenDatabase {
  if (options.path === ":memory:") return { ...openLocked(options), releaseLock: undefined };
  mkdirSync(dirname(options.path), { recursive: true });
  // Before the checks: a file another process serves is neither checked nor opened.
  const releaseLock = lockDatabaseFile(options.path);
  try {
    return { ...openLocked(options), releaseLock };
  } catch (error) {
    releaseLock();
    throw error;
  }
}

function openLocked(options: SqliteStoreOptions): Omit<OpenDatabase, "releaseLock"> {
  const onFile = options.path !== ":memory:";
  // Durability "os" leaves the WAL unsynced, so after a power loss its last commits may be lost by
  // design: a commit count behind its side file could not be told from damage (commit-count.ts).
  const countCommits = onFile && options.durability !== "os";
  if (onFile) {
    checkDatabaseFiles(options.path, {
      integrityCheck: options.integrityCheck ?? true,
      commitCount: countCommits,
    });
  }
  const db = new Database(options.path);
  db.pragma("journal_mode = WAL");
  // FULL fsyncs the WAL on every commit; NORMAL leaves the flush to the OS (durability "os").
  db.pragma(`synchronous = ${options.durability === "os" ? "NORMAL" : "FULL"}`);
  db.pragma(`busy_timeout = ${limits.sqliteBusyTimeoutMs}`);
  // Each group-commit job runs in a savepoint, so SQLite copies every page a job first changes into a
  // sub-journal; in memory that is a memcpy, in the default temporary file a write per page (W3's
  // drain: 35 against 39-42 µs of server CPU per message, docs/benchmarks.md).
  db.pragma("temp_store = MEMORY");
  migrate(db);
  const commitCounter = countCommits ? new CommitCounter(db, commitCountPath(options.path)) : undefined;
  const writes = new GroupCommit(db, limits.commitMessagesMax, commitCounter);
  let checkpointer: Checkpointer | undefined;
  if (onFile) {
    // Checkpoints run on their own thread (checkpointer.ts); this connection's own is a backstop.
    db.pragma(`wal_autocheckpoint = ${limits.walBackstopPages}`);
    checkpointer = new Checkpointer(options.path, limits.checkpointIntervalMs);
  }
  return { db, writes, checkpointer, commitCounter };
}

function migrate(db: Db): void {
  const applied = db.pragma("user_version", { simple: true }) as number;
  migrations.slice(applied).forEach((migration, i) => {
    db.transaction(() => {
      db.exec(migration);
      db.pragma(`user_version = ${applied + i + 1}`);
    })();
  });
}

export class SqliteStore extends EmbeddedStore<
  QueueRef,
  SqliteMessageRow,
  ExchangeRow,
  SqliteInbox,
  SqliteStream
> {
  private readonly db: Db;
  /** One connection, one group commit: writes run and commit in the order they were called. */
  private readonly writes: GroupCommit;
  private readonly statements: Statements;
  private readonly checkpointer: Checkpointer | undefined;
  private readonly commitCounter: CommitCounter | undefined;
  private readonly releaseLock: (() => void) | undefined;

  constructor(options: SqliteStoreOptions) {
    const opened = openDatabase(options);
    const statements = new Statements(opened.db);
    const { writes } = opened;
    super(
      {
        queues: new SqliteQueueRows(statements),
        exchanges: new SqliteExchangeRows(statements),
        inboxes: new SqliteInboxRows(statements),
        streams: new SqliteStreamRows(statements),
      },
      {
        write: (apply, write) => writes.run(apply, write?.weight),
        lease: (apply, lease) => writes.run(apply, lease.weight),
        read: async (compute) => compute(),
      },
      options.random,
    );
    this.db = opened.db;
    this.writes = writes;
    this.statements = statements;
    this.checkpointer = opened.checkpointer;
    this.commitCounter = opened.commitCounter;
    this.releaseLock = opened.releaseLock;
  }

  /** Checkpoints made off the event loop (undefined for a store in memory, which has no WAL). */
  get checkpointStats(): CheckpointerStats | undefined {
    return this.checkpointer && { ...this.checkpointer.stats };
  }

  /** Jobs and commits so far: the group-commit ratio the benchmark reports. */
  get commitStats(): { commits: number; jobs: number } {
    return { ...this.writes.stats };
  }

  async ping(): Promise<void> {
    this.statements.get("SELECT 1").get();
  }

  async close(): Promise<void> {
    this.writes.close();
    await this.checkpointer?.close();
    this.db.close();
    this.commitCounter?.close();
    this.releaseLock?.();
  }
}
