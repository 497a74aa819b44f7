/**
 * The commit count: how a start tells that SQLite's WAL lost committed transactions. SQLite's WAL
 * frame checksums are cumulative, so one damaged frame makes recovery stop there and silently drop
 * every later commit; no integrity check can see what is no longer there. So each group commit also
 * writes its number into the database (the commit_count row, inside the transaction), and, once the
 * commit has returned, into a side file beside the database, outside the WAL. At the next start the
 * database must hold at least the number the side file holds; if it holds less, commits it had made
 * are gone, and the store refuses to open (integrity.ts). docs/reliability.md says what this detects
 * and what it does not.
 *
 * The side file is rewritten in place by one 16-byte pwrite per commit and never fsynced: the pwrite
 * costs a few microseconds, an fsync would double a commit's cost. Its page is in the OS's cache at
 * once, so a process crash (kill -9) loses none of it; a power loss may leave it older than the
 * database, which hides a loss of the commits made since it last reached the disk, but never makes a
 * false alarm, as it is written only after the WAL holding that commit was fsynced.
 *
 * Layout (big-endian):
 *
 *   0   "HCC1"    what the file is, and the version of its layout
 *   4   commits   u64: the number of the latest group commit made
 *   12  crc       CRC-32 of bytes 0-11, so that damage to this file is told apart from a count
 */
import { closeSync, existsSync, openSync, readFileSync, writeSync } from "node:fs";
import { crc32 } from "node:zlib";
import type { Database, Statement } from "better-sqlite3";
import { storeDamaged } from "../../errors.js";
import type { CommitHooks } from "./group-commit.js";
import * as sql from "./statements.js";

// The layout's own constants, drawn above; they stay here rather than in limits.ts.
const magic = "HCC1";
const fileBytes = 16;

/** The side file of a database file. */
export function commitCountPath(databasePath: string): string {
  return `${databasePath}-commits`;
}

/** The count a side file holds, or undefined when there is none; store_damaged when it is not one. */
export function readCommitCount(path: string): number | undefined {
  if (!existsSync(path)) return undefined;
  const bytes = readFileSync(path);
  if (
    bytes.length !== fileBytes ||
    bytes.toString("latin1", 0, 4) !== magic ||
    crc32(bytes.subarray(0, 12)) !== bytes.readUInt32BE(12)
  ) {
    throw storeDamaged(
      path,
      "this is not a commit-count file, or it is damaged.",
      "Check the database itself (sqlite3 its file 'PRAGMA integrity_check'), then delete this file to start without comparing the commits made.",
    );
  }
  return Number(bytes.readBigUInt64BE(4));
}

function encode(commits: number): Buffer {
  const bytes = Buffer.alloc(fileBytes);
  bytes.write(magic, 0, "latin1");
  bytes.writeBigUInt64BE(BigInt(commits), 4);
  bytes.writeUInt32BE(crc32(bytes.subarray(0, 12)), 12);
  return bytes;
}

/** Counts a store's group commits, in its database and in its side file (GroupCommit's hooks). */
export class CommitCounter implements CommitHooks {
  private commits: number;
  private readonly fd: number;
  private readonly update: Statement;
  private closed = false;

  constructor(db: Database, path: string) {
    this.commits = (db.prepare(sql.commitCountSelect).get() as { commits: number }).commits;
    this.update = db.prepare(sql.commitCountUpdate);
    // The database's count, checked against the old file's before this opened (integrity.ts), becomes
    // the file's: from here on the file never runs ahead of a commit that is durable.
    this.fd = openSync(path, "w");
    writeSync(this.fd, encode(this.commits), 0, fileBytes, 0);
  }

  /** Inside the transaction: records it as the next commit. */
  inTransaction(): void {
    this.update.run({ commits: this.commits + 1 });
  }

  /** After the commit returned (and so, with durability fsync, after its fsync): the side file follows. */
  committed(): void {
    this.commits++;
    writeSync(this.fd, encode(this.commits), 0, fileBytes, 0);
  }

  /** Closes the side file; a second close (a store closed twice) does nothing. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}
