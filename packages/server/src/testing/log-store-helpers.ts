/** Helpers of the log store's tests (store/log/log-store*.test.ts): directories, and failing writes. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seededRandom } from "../random.js";
import { fileIo } from "../store/log/append-log-io.js";
import { LogStore } from "../store/log/log-store.js";

const dirs: string[] = [];

/** A new temporary directory, removed when the process exits. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "hopper-log-store-"));
  dirs.push(dir);
  return dir;
}
process.on("exit", () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A log store whose log writes fail, from `failWrites(true)` on, with an injected EIO. */
export function openFailing(dir: string): { store: LogStore; failWrites: (failing: boolean) => void } {
  let fail = false;
  const store = LogStore.open({
    dir,
    random: seededRandom(1),
    io: {
      write: async (file, buffers, position) => {
        if (fail) throw new Error("EIO (injected)");
        await fileIo.write(file, buffers, position);
      },
    },
  });
  return {
    store,
    failWrites: (failing) => {
      fail = failing;
    },
  };
}

/** `bytes` bytes that differ with `index` in every byte, so a body read from the wrong place shows. */
export function patternedBody(index: number, bytes: number): Buffer {
  const body = Buffer.alloc(bytes);
  for (let at = 0; at < bytes; at++) body[at] = (index * 31 + at * 7) & 0xff;
  return body;
}
