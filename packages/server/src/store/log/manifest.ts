/**
 * MANIFEST of a log directory (format in log-format.ts): read at open, and replaced — a temporary file,
 * fsync, rename, then the caller's directory fsync (as LevelDB's CURRENT) — so that a crash leaves the
 * old manifest or the new one, never a mix.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { join } from "node:path";
import { decodeManifest, encodeManifest, type Manifest, manifestFileName } from "./log-format.js";

/** The manifest, undefined when there is none, or a sentence saying what is wrong with its bytes. */
export function readManifest(dir: string): Manifest | string | undefined {
  const path = join(dir, manifestFileName);
  if (!existsSync(path)) return undefined;
  return decodeManifest(readFileSync(path));
}

/** Replaces MANIFEST at open (recovery), synchronously, then fsyncs the directory. */
export function writeManifest(dir: string, dirFd: number, manifest: Manifest): void {
  const temporary = join(dir, `${manifestFileName}.tmp`);
  const fd = openSync(temporary, "w");
  try {
    const bytes = encodeManifest(manifest);
    let written = 0;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, join(dir, manifestFileName));
  fsyncSync(dirFd);
}

/** Replaces MANIFEST while the log runs; the caller fsyncs the directory after. */
export async function replaceManifest(dir: string, manifest: Manifest): Promise<void> {
  const temporary = join(dir, `${manifestFileName}.tmp`);
  const file = await open(temporary, "w");
  try {
    await file.writeFile(encodeManifest(manifest));
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, join(dir, manifestFileName));
}
