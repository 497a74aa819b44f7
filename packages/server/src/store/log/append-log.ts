/**
 * An append-only log in a directory of segment files: the durability layer of a log-structured store
 * that keeps its state in memory and appends every mutation as a record. `append()` only encodes the
 * record into memory; `flush()` makes everything appended so far durable with one positional write, made
 * on the calling thread, and one fdatasync, made on libuv's thread pool (fileIo, in append-log-io.ts);
 * `rewrite()` compacts the log into a snapshot of the state.
 *
 * Invariants
 *  1. A flush resolves only after every record appended before its call is written and fdatasync'ed
 *     (written only, with durability "os": see AppendLogOptions), and, when the flush created the
 *     segment file, after the directory holding it is fsync'ed.
 *  2. One batch is written at a time, in append order, its last frame marked as the batch's end, so
 *     the durable records are always a prefix of the appended ones. A batch goes to a segment only
 *     after every earlier batch is durable (durability "fsync"), so only the newest segment's last
 *     batch can be unfinished after a crash: recovery cuts it only when it looks unfinished, and
 *     throws, naming the file and offset, for any other damage (log-recovery.ts).
 *  3. A new segment's header goes in the same write as its first batch, and both are fdatasync'ed (in
 *     either durability) before the segment is named in MANIFEST and before any later segment exists.
 *  4. Segment files change only at their end: appends, and recovery's cut of an unfinished last batch.
 *  5. Segments older than a base segment are deleted only after the base's snapshot and its marker
 *     are durable and MANIFEST names the base. Until then the older segments plus the segments after the base hold the whole log;
 *     after it the base plus the segments after it do. Both describe the same state.
 *  6. Every segment header names the regular segment before it (`previousSeq`), so recovery throws on
 *     a missing segment (or a lost base) instead of replaying around the gap.
 *  7. After any I/O failure the log refuses appends, flushes and rewrites: the bytes at its tail are
 *     unknown (a failed fdatasync may drop pages the OS reported written), and only a reopen, which
 *     reads and checks the disk, can tell which records survived.
 *  8. One process writes a directory at a time: open takes its LOCK file (log-lock.ts).
 *
 * The on-disk format is drawn in log-format.ts. Recovery, which reads a directory of segments back,
 * checks them against these invariants and repairs what a crash can leave, is in log-recovery.ts.
 *
 * Ordering of flush and rewrite
 *  - `flush()` resolves once every record appended before the call is durable; flushes resolve in call
 *    order. flush() calls made while a write is in flight share the next write and fdatasync.
 *  - `rewrite(records)` splits the log at its call: records appended before it are written (flushed
 *    or not, and even if no one flushes them) into the segments before the new base; then the base
 *    segment is created with a durable header; records appended after the call go to segments after
 *    the base. Flushes during a rewrite wait only for the base's creation (one small write, one
 *    fdatasync, one directory fsync), not for the snapshot. `records` is read while the rewrite runs,
 *    in pieces, so it must not change after the call: pass the state as of the call (an array copy
 *    or an immutable view). rewrite() resolves once the snapshot and marker are durable and the older
 *    segments are deleted; by then every record appended before its call is durable too. One rewrite
 *    runs at a time. A failed rewrite fails the log, as a failed flush does (invariant 7).
 */
import assert from "node:assert/strict";
import {
  close as closeCallback,
  closeSync,
  fsync as fsyncCallback,
  open as openCallback,
  openSync,
} from "node:fs";
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import * as zlib from "node:zlib";
import { limits } from "../../limits.js";
import { type AppendLogIo, fileIo } from "./append-log-io.js";
import type { AppendLogOptions, AppendLogStats, RecordLocated, SnapshotRecord } from "./append-log-types.js";
import { type Deferred, deferred } from "./deferred.js";
import {
  encodeSegmentHeader,
  FrameEncoder,
  frameHeaderBytes,
  type Manifest,
  requireZlibCrc32,
  segmentFileName,
  segmentHeaderBytes,
  totalBytes,
} from "./log-format.js";
import { lockDirectory } from "./log-lock.js";
import {
  createDirectory,
  type OpenSegment,
  type RecoveredLog,
  type RecoveryOutcome,
  recoverLog,
} from "./log-recovery.js";
import { replaceManifest } from "./manifest.js";
import { SegmentReads } from "./segment-reads.js";

/** Rolling costs a file creation and a directory fsync, so segments should be large enough for it to be
 * rare; compaction deletes whole segments, so they should not be so large that space comes back late. */
export const segmentBytesMaxDefault = limits.logSegmentBytesMax;

const closeAsync = promisify(closeCallback);
const fsyncAsync = promisify(fsyncCallback);
const openAsync = promisify(openCallback);

export type { AppendLogOptions, AppendLogStats, RecordLocated, SnapshotRecord } from "./append-log-types.js";

/** A record whose place someone wants to know: `at` is its payload's offset from the batch's start. */
interface PendingLocate {
  at: number;
  located: RecordLocated;
}

/** Records handed to one write: everything appended up to `recordCountEnd`. */
interface Batch {
  buffers: Buffer[];
  bytes: number;
  recordCountEnd: number;
  locates: PendingLocate[];
  /** Set on the batch that rewrite() sealed: the base segment is created right after it is durable. */
  startsBase: boolean;
}

interface FlushWaiter {
  recordCount: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

export class AppendLog {
  readonly stats: AppendLogStats = { batches: 0, writes: 0, syncs: 0, directorySyncs: 0 };

  private readonly dir: string;
  private readonly dirFd: number;
  private readonly segmentBytesMax: number;
  private readonly io: AppendLogIo;
  private readonly syncEachBatch: boolean;
  /** Whether `current` holds batches written but not fdatasync'ed (durability "os"). */
  private currentUnsynced = false;
  /** What opening found and repaired (log-recovery.ts). */
  readonly recovery: RecoveryOutcome;
  /** What MANIFEST says, as last written; manifest writes go one at a time, in this chain. */
  private readonly manifest: Manifest;
  private manifestWrites: Promise<void> = Promise.resolve();
  /** Releases the directory's LOCK (log-lock.ts); set by open. */
  private unlock: () => void = () => {};
  private readonly encoder = new FrameEncoder();
  /** Who wants to know where the records appended since the last batch land. */
  private openLocates: PendingLocate[] = [];
  /** What readAt reads through: a descriptor per segment, closed when the segment is deleted. */
  private readonly reads: SegmentReads;
  /** Bytes of every segment file, by seq. */
  private readonly segmentBytes: Map<number, number>;
  /** The regular segment that flushes write into; undefined until the next flush creates one. */
  private current: OpenSegment | undefined;
  private nextSeq: number;
  /** The regular segment a new segment names as its predecessor (invariant 6). */
  private lastRegularSeq: number;

  private appendedCount = 0;
  private durableCount = 0;
  /** In call order, so in recordCount order. */
  private readonly flushWaiters: FlushWaiter[] = [];
  /** Batches that rewrite() cut off the tail; written before anything appended later. */
  private readonly sealedBatches: Batch[] = [];
  private driving = false;
  private driverDone: Promise<void> = Promise.resolve();

  private baseStart: Deferred<OpenSegment> | undefined;
  private baseSegment: OpenSegment | undefined;
  private rewriting = false;
  private rewriteSettled: Promise<void> = Promise.resolve();

  private failure: Error | undefined;
  private closing = false;
  private closed: Promise<void> | undefined;

  private constructor(
    options: AppendLogOptions,
    segmentBytesMax: number,
    dirFd: number,
    recovered: RecoveredLog,
  ) {
    this.dir = options.dir;
    this.reads = new SegmentReads(options.dir);
    this.dirFd = dirFd;
    this.segmentBytesMax = segmentBytesMax;
    this.io = { ...fileIo, ...options.io };
    this.syncEachBatch = (options.durability ?? "fsync") === "fsync";
    this.segmentBytes = recovered.segmentBytes;
    this.current = recovered.current;
    this.nextSeq = recovered.nextSeq;
    this.lastRegularSeq = recovered.lastRegularSeq;
    this.recovery = recovered.outcome;
    this.manifest = recovered.manifest;
  }

  /**
   * Opens the log in `dir` and recovers it: calls `replay(record)` for every intact record in order
   * (the snapshot's records first when the log was rewritten), then returns the log ready to append.
   * A replayed buffer is never overwritten, but it shares memory with a 1 MiB read chunk: copy it to
   * keep it for long. Throws, naming the file and offset, for damage that a crash cannot explain.
   */
  static open(
    options: AppendLogOptions,
    replay: (record: Buffer, seq: number, offset: number) => void,
  ): AppendLog {
    requireZlibCrc32(zlib);
    const segmentBytesMax = options.segmentBytesMax ?? segmentBytesMaxDefault;
    if (!Number.isSafeInteger(segmentBytesMax) || segmentBytesMax < segmentHeaderBytes + frameHeaderBytes)
      throw new RangeError(
        `segmentBytesMax must be an integer of at least ${segmentHeaderBytes + frameHeaderBytes}`,
      );
    createDirectory(options.dir);
    const unlock = lockDirectory(options.dir);
    let dirFd: number | undefined;
    try {
      dirFd = openSync(options.dir, "r");
      const syncAtOpen = options.io?.syncAtOpen ?? fileIo.syncAtOpen;
      const unsynced = (options.durability ?? "fsync") === "os";
      const recovered = recoverLog(options.dir, dirFd, replay, {
        syncAtOpen,
        unsynced,
        weakenedForTests: options.weakenedRecoveryForTests ?? false,
      });
      const log = new AppendLog(options, segmentBytesMax, dirFd, recovered);
      log.unlock = unlock;
      return log;
    } catch (error) {
      if (dirFd !== undefined) closeSync(dirFd);
      unlock();
      throw error;
    }
  }

  /** Bytes in all segment files, for deciding when to compact. */
  get bytes(): number {
    let bytes = 0;
    for (const segmentBytes of this.segmentBytes.values()) bytes += segmentBytes;
    return bytes;
  }

  /**
   * Adds a record to the in-memory tail (copying it once): no syscall, nothing durable yet.
   * `located(seq, offset)`, if given, is told where the record's payload lies once its batch is
   * written (before its fdatasync: a read of it is then served by the page cache).
   */
  append(record: Buffer, located?: RecordLocated): void {
    this.assertWritable();
    const at = this.encoder.bytes + frameHeaderBytes;
    this.encoder.add(record);
    if (located) this.openLocates.push({ at, located });
    this.appendedCount += 1;
  }

  /** The `length` bytes at `offset` of segment `seq`, read now from the file (SegmentReads.read). */
  readAt(seq: number, offset: number, length: number): Buffer {
    return this.reads.read(seq, offset, length);
  }

  /** Resolves once every record appended before this call is written and fdatasync'ed. */
  flush(): Promise<void> {
    try {
      this.assertWritable();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.durable(this.appendedCount);
  }

  /**
   * Compaction: `records` is a complete snapshot of the state as of this call. Once this resolves the
   * log holds the snapshot followed by everything appended after the call, and the older segments are
   * gone. See "Ordering of flush and rewrite" at the top of this file.
   */
  rewrite(records: Iterable<SnapshotRecord>): Promise<void> {
    try {
      this.assertWritable();
      if (this.rewriting)
        throw new Error("append log: a rewrite is already running; await it before starting another");
    } catch (error) {
      return Promise.reject(error);
    }
    this.rewriting = true;
    this.baseStart = deferred();
    this.sealedBatches.push({ ...this.takeOpenBatch(), startsBase: true });
    this.startDriving();
    const done = this.writeRewrite(this.baseStart.promise, records);
    this.rewriteSettled = done.then(
      () => undefined,
      () => undefined,
    );
    return done;
  }

  /** Flushes what was appended, waits for a running rewrite, and closes the files. Rejects only if that
   * last flush fails; on a log that already failed it just closes the files. */
  close(): Promise<void> {
    this.closed ??= this.closeFiles();
    return this.closed;
  }

  private async closeFiles(): Promise<void> {
    this.closing = true;
    let flushError: unknown;
    if (this.failure === undefined)
      flushError = await this.durable(this.appendedCount).then(
        () => undefined,
        (error) => error,
      );
    await this.rewriteSettled;
    while (this.driving) await this.driverDone;
    try {
      // Only now, with no write in flight, may the descriptors close (a closed number can be reused).
      // A log that failed leaves its tail as it is: reopening finds out what it holds.
      if (this.failure === undefined) await this.leaveCurrent();
      for (const segment of [this.current, this.baseSegment])
        if (segment !== undefined) await closeAsync(segment.fd);
      this.current = undefined;
      this.baseSegment = undefined;
      this.reads.close();
      await closeAsync(this.dirFd);
    } finally {
      this.unlock();
    }
    if (flushError !== undefined) throw flushError;
  }

  private assertWritable(): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing) throw new Error(`append log ${this.dir} is closed`);
  }

  /** Resolves once the first `recordCount` records are durable. */
  private durable(recordCount: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (recordCount <= this.durableCount) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.flushWaiters.push({ recordCount, resolve, reject });
      this.startDriving();
    });
  }

  private takeOpenBatch(): Batch {
    const bytes = this.encoder.bytes;
    const locates = this.openLocates;
    this.openLocates = [];
    return {
      buffers: this.encoder.take(),
      bytes,
      recordCountEnd: this.appendedCount,
      locates,
      startsBase: false,
    };
  }

  private startDriving(): void {
    if (this.driving || this.failure !== undefined) return;
    this.driving = true;
    this.driverDone = this.drive();
  }

  /** Writes batches one at a time, in order, until none is sealed and no flush waits for the tail. */
  private async drive(): Promise<void> {
    try {
      for (;;) {
        const batch = this.failure === undefined ? this.nextBatch() : undefined;
        if (batch === undefined) break;
        if (batch.bytes > 0) await this.writeBatch(batch);
        this.durableCount = batch.recordCountEnd;
        this.resolveFlushWaiters();
        if (batch.startsBase && this.failure === undefined) await this.startBaseSegment();
      }
    } catch (error) {
      this.fail(error);
    }
    // Cleared in the same turn as the decision to stop, so a flush() from now on starts a new drive.
    this.driving = false;
  }

  private nextBatch(): Batch | undefined {
    const sealed = this.sealedBatches.shift();
    if (sealed !== undefined) return sealed;
    const lastWaiter = this.flushWaiters.at(-1);
    if (lastWaiter === undefined || lastWaiter.recordCount <= this.durableCount) return undefined;
    return this.takeOpenBatch();
  }

  private resolveFlushWaiters(): void {
    while (this.flushWaiters.length > 0 && (this.flushWaiters[0]?.recordCount ?? 0) <= this.durableCount) {
      this.flushWaiters.shift()?.resolve();
    }
  }

  /** Writes one batch with one positional writev and one fdatasync, into the current segment, or into a
   * new one when the current one would pass segmentBytesMax (a new segment's header goes in the same
   * write, and its directory entry is fsync'ed before the batch counts as durable). */
  private async writeBatch(batch: Batch): Promise<void> {
    let segment = this.current;
    if (
      segment !== undefined &&
      segment.bytes > segmentHeaderBytes &&
      segment.bytes + batch.bytes > this.segmentBytesMax
    ) {
      await this.leaveCurrent();
      segment = undefined;
    }
    const created = segment === undefined;
    if (segment === undefined) {
      segment = await this.createSegment(false);
      this.current = segment;
    }
    const buffers = created ? [encodeSegmentHeader(segment), ...batch.buffers] : batch.buffers;
    this.stats.batches += 1;
    const batchStart = segment.bytes + (created ? segmentHeaderBytes : 0);
    await this.writeAt(segment, buffers);
    for (const { at, located } of batch.locates) located(segment.seq, batchStart + at);
    // A new segment's first write is synced in either durability: MANIFEST names only durable segments.
    if (this.syncEachBatch || created) await this.syncFile(segment);
    else this.currentUnsynced = true;
    if (created) {
      await this.syncDirectory();
      await this.updateManifest({ newestSeq: segment.seq });
    }
  }

  /** Closes the segment that flushes write into, fdatasync'ing first what was left unsynced, so that
   * only the newest segment can end torn (durability "os"). */
  private async leaveCurrent(): Promise<void> {
    const segment = this.current;
    if (segment === undefined) return;
    const unsynced = this.currentUnsynced;
    this.current = undefined;
    this.currentUnsynced = false;
    try {
      if (unsynced) await this.syncFile(segment);
    } finally {
      await closeAsync(segment.fd);
    }
  }

  /**
   * The rewrite's boundary, after the records appended before rewrite() are durable: closes the segment
   * that took them and creates the base segment with a durable header, so no later segment exists
   * before the base's header is on disk (invariant 3). Flushes wait for this, not for the snapshot.
   */
  private async startBaseSegment(): Promise<void> {
    await this.leaveCurrent();
    const base = await this.createSegment(true);
    this.baseSegment = base;
    await this.writeAt(base, [encodeSegmentHeader(base)]);
    await this.syncFile(base);
    await this.syncDirectory();
    this.baseStart?.resolve(base);
    this.baseStart = undefined;
  }

  /** Writes the snapshot and its marker into the base segment, makes them durable, then deletes every
   * older segment (invariant 5). */
  private async writeRewrite(
    baseCreated: Promise<OpenSegment>,
    records: Iterable<SnapshotRecord>,
  ): Promise<void> {
    try {
      const base = await baseCreated;
      const encoder = new FrameEncoder();
      const locates: PendingLocate[] = [];
      for (const item of records) {
        const record = Buffer.isBuffer(item) ? item : item.record();
        if (!Buffer.isBuffer(item) && item.located)
          locates.push({ at: encoder.bytes + frameHeaderBytes, located: item.located });
        encoder.add(record);
        if (encoder.bytes >= limits.logSnapshotPieceBytes) {
          await this.writeSnapshotPiece(base, encoder, locates);
          // Writes are made on the calling thread (fileIo): other work runs between the pieces.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      encoder.addMarker();
      await this.writeSnapshotPiece(base, encoder, locates);
      await this.syncFile(base);
      // The directory was fsync'ed when the base was created; this one also covers a file system that
      // orders metadata loosely, before older segments go.
      await this.syncDirectory();
      // Named before the segments it replaces go, so no open ever looks for a deleted base.
      await this.updateManifest({
        baseSeq: base.seq,
        newestSeq: Math.max(this.manifest.newestSeq, base.seq),
      });
      await this.deleteSegmentsBefore(base.seq);
      this.baseSegment = undefined;
      await closeAsync(base.fd);
    } catch (error) {
      throw this.fail(error);
    } finally {
      this.rewriting = false;
    }
  }

  /** Writes what the encoder holds, then tells each record of it where it landed. */
  private async writeSnapshotPiece(
    base: OpenSegment,
    encoder: FrameEncoder,
    locates: PendingLocate[],
  ): Promise<void> {
    // A failure elsewhere stops the snapshot: the log's state on disk is no longer known.
    if (this.failure !== undefined) throw this.failure;
    const pieceStart = base.bytes;
    await this.writeAt(base, encoder.take());
    for (const { at, located } of locates.splice(0)) located(base.seq, pieceStart + at);
  }

  private async deleteSegmentsBefore(seq: number): Promise<void> {
    assert.ok(this.current === undefined || this.current.seq > seq, "no segment before the base is open");
    const older = [...this.segmentBytes.keys()].filter((olderSeq) => olderSeq < seq);
    for (const olderSeq of older) {
      await unlink(join(this.dir, segmentFileName(olderSeq)));
      this.segmentBytes.delete(olderSeq);
      this.reads.forget(olderSeq);
    }
    if (older.length > 0) await this.syncDirectory();
  }

  private async createSegment(base: boolean): Promise<OpenSegment> {
    const seq = this.nextSeq;
    this.nextSeq += 1;
    const fileName = segmentFileName(seq);
    // "wx": a segment file is never reused; an existing one would mean a second writer in the directory.
    const fd = await openAsync(join(this.dir, fileName), "wx");
    const segment = {
      fd,
      fileName,
      seq,
      base,
      previousSeq: this.lastRegularSeq,
      unsynced: !this.syncEachBatch,
      bytes: 0,
    };
    if (!base) this.lastRegularSeq = seq;
    this.segmentBytes.set(seq, 0);
    return segment;
  }

  private async writeAt(segment: OpenSegment, buffers: readonly Buffer[]): Promise<void> {
    this.stats.writes += 1;
    await this.io.write(segment, buffers, segment.bytes);
    segment.bytes += totalBytes(buffers);
    this.segmentBytes.set(segment.seq, segment.bytes);
  }

  private async syncFile(segment: OpenSegment): Promise<void> {
    this.stats.syncs += 1;
    await this.io.sync(segment);
  }

  /** Replaces MANIFEST with `change` applied, after what it names is durable (manifest.ts). */
  private updateManifest(change: Partial<Manifest>): Promise<void> {
    Object.assign(this.manifest, change);
    const manifest = { ...this.manifest };
    this.manifestWrites = this.manifestWrites
      .catch(() => {})
      .then(async () => {
        await replaceManifest(this.dir, manifest);
        await this.syncDirectory();
      });
    return this.manifestWrites;
  }

  private async syncDirectory(): Promise<void> {
    this.stats.directorySyncs += 1;
    await fsyncAsync(this.dirFd);
  }

  /** Puts the log in its failed state (invariant 7) and rejects everyone waiting; answers the error. */
  private fail(cause: unknown): Error {
    if (this.failure === undefined) {
      const message = cause instanceof Error ? cause.message : String(cause);
      this.failure = new Error(
        `append log ${this.dir}: ${message}. The tail of the log on disk is now unknown (a failed write or ` +
          "fdatasync may lose bytes the OS reported written), so the log refuses appends, flushes and " +
          "rewrites; reopen it to recover every intact record",
        { cause },
      );
      for (const waiter of this.flushWaiters.splice(0)) waiter.reject(this.failure);
      this.baseStart?.reject(this.failure);
      this.baseStart = undefined;
    }
    return this.failure;
  }
}
