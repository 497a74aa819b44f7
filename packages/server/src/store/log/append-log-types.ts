/** The append log's options, what it counts, and what its callers hand it (append-log.ts). */
import type { Durability } from "../store.js";
import type { AppendLogIo } from "./append-log-io.js";

export interface AppendLogOptions {
  /** Created if missing. */
  dir: string;
  /** A flush whose batch would take the current segment past this size starts a new segment; a batch
   * always goes whole into one segment, so a record larger than this gets a segment of its own. */
  segmentBytesMax?: number;
  /** Tests only: replaces the writes and fdatasyncs of segment files, to observe or fail them. */
  io?: Partial<AppendLogIo>;
  /** Tests only: recovery cuts the newest segment at its first damage, whatever the damage, as it did
   * before damage was told from an unfinished write; the corruption suite must catch the losses. */
  weakenedRecoveryForTests?: boolean;
  /**
   * "fsync" (default): a flush resolves once its batch is written and fdatasync'ed. "os": once it is
   * written, into the page cache: a process crash loses nothing, a power loss may lose the last
   * batches. Even then a segment is fdatasync'ed before the log leaves it (a new segment, a rewrite's
   * base, close), and a rewrite's snapshot always is, so a power loss can leave unsynced batches only
   * at the newest segment's end, which recovery may cut (log-recovery.ts, rule 2).
   */
  durability?: Durability;
}

/** What the writer counts, for tests and for the store's metrics. */
export interface AppendLogStats {
  /** Batches that flushes handed to the disk, one write and one fdatasync each (counted as the write
   * begins): flush() calls made while one was on the disk share the next. */
  batches: number;
  /** Positional writes issued on segment files (flush batches, headers, snapshot pieces). */
  writes: number;
  /** fdatasync calls issued on segment files. */
  syncs: number;
  /** fsync calls issued on the directory. */
  directorySyncs: number;
}

/** Where a record's payload lands: told once it is written (append's and rewrite's `located`). */
export type RecordLocated = (seq: number, offset: number) => void;

/** A record of a rewrite's snapshot: its bytes, given when the rewrite reaches it, and who wants to
 * know where it lands. */
export type SnapshotRecord = Buffer | { record: () => Buffer; located?: RecordLocated };
