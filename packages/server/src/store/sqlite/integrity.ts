/**
 * The checks a SQLite store's files pass before it serves them (docs/reliability.md): SQLite's
 * `PRAGMA quick_check` of the database as the WAL leaves it, and the commit count (commit-count.ts).
 * Each failure is store_damaged, naming the file, what failed and what to do.
 *
 * They run on a read-only connection of their own, closed before the store opens its own. A
 * read-write connection that is the last to close checkpoints the WAL into the database and deletes
 * it, which, when the WAL was damaged, would destroy the very frames an operator may still recover;
 * a read-only one never writes the database or the WAL.
 */
import { existsSync } from "node:fs";
import { crc32 } from "node:zlib";
import Database from "better-sqlite3";
import { HopperError, storeDamaged } from "../../errors.js";
import { limits } from "../../limits.js";
import { commitCountPath, readCommitCount } from "./commit-count.js";
import * as sql from "./statements.js";

/** What to check; the commit count only where the store keeps one (durability fsync, a file). */
export interface DatabaseChecks {
  integrityCheck: boolean;
  commitCount: boolean;
}

/** The CRC-32 of a body as stored: its bytes, or a JSON body's text as its UTF-8 bytes. */
export function bodyCrc(body: Buffer | string): number {
  return crc32(body);
}

const restoreAdvice =
  "Keep a copy of the database with its -wal and -shm files, then restore from a backup, or save what SQLite can still read with the sqlite3 shell's .recover command into a new file.";

/** Throws store_damaged if the database file at `path`, or its absence, fails a check. */
export function checkDatabaseFiles(path: string, checks: DatabaseChecks): void {
  const sidePath = commitCountPath(path);
  const recorded = checks.commitCount ? readCommitCount(sidePath) : undefined;
  if (!existsSync(path)) {
    // A side file that counts commits for a database that is gone: it was deleted, or moved.
    if (recorded) throw commitsGone(path, sidePath, 0, recorded);
    return;
  }
  let stored = 0;
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    if (checks.integrityCheck) quickCheck(db, path);
    // A database without the count (emptied, or never written) holds no commits.
    if (recorded !== undefined) stored = storedCommitCount(db) ?? 0;
  } catch (error) {
    if (error instanceof HopperError) throw error;
    // SQLite refused to read it at all: "file is not a database", "database disk image is malformed".
    throw storeDamaged(path, `SQLite cannot read it: ${(error as Error).message}.`, restoreAdvice);
  } finally {
    db?.close();
  }
  if (recorded !== undefined && stored < recorded) throw commitsGone(path, sidePath, stored, recorded);
}

/** The database holds fewer commits than its side file records were made. */
function commitsGone(path: string, sidePath: string, stored: number, recorded: number): HopperError {
  return storeDamaged(
    path,
    `it holds ${stored} commits, but ${sidePath} records that ${recorded} were made: ${recorded - stored} committed transactions are gone. SQLite drops every commit after a damaged frame of ${path}-wal, or all of them if the WAL was lost or the database was emptied, deleted or replaced by an older copy.`,
    `${restoreAdvice} If the database was restored from a backup or removed on purpose, delete ${sidePath} and start again.`,
  );
}

/** PRAGMA quick_check: SQLite's check of every b-tree page, without comparing indexes to their tables. */
function quickCheck(db: Database.Database, path: string): void {
  let problems: string[];
  try {
    const rows = db.pragma(`quick_check(${limits.integrityProblemsShownMax})`) as { quick_check: string }[];
    problems = rows.map((row) => row.quick_check);
  } catch (error) {
    // A page so damaged that SQLite stops reading ("database disk image is malformed").
    problems = [(error as Error).message];
  }
  if (problems.length === 1 && problems[0] === "ok") return;
  throw storeDamaged(
    path,
    `SQLite's integrity check (PRAGMA quick_check) found: ${problems.join("; ")}.`,
    `${restoreAdvice} (hopper serve --skip-integrity-check starts without this check, which takes a while on a very large file; it does not make a damaged file safe.)`,
  );
}

/** The database's commit count; undefined before the migration that adds it has run. */
function storedCommitCount(db: Database.Database): number | undefined {
  if (!db.prepare(sql.commitCountTableExists).get()) return undefined;
  return (db.prepare(sql.commitCountSelect).get() as { commits: number } | undefined)?.commits;
}
