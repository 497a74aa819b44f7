/**
 * The `hopper` command as npm installs it: node_modules/.bin/hopper must link to the committed
 * bin/hopper.js (npm links a bin at install time, when dist/ may not exist yet), which runs the built
 * CLI, or says to build when there is none.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { createTempDir } from "../testing/server-process.js";

/** From packages/server/dist/cli: the repository's root, and the server package's. */
const rootPath = fileURLToPath(new URL("../../../../", import.meta.url));
const serverPath = fileURLToPath(new URL("../../", import.meta.url));
const binPath = join(serverPath, "bin", "hopper.js");

/** Starting Node and loading the CLI's modules takes well under a second; this leaves room. */
const runTimeoutMs = 20_000;

test("node_modules/.bin/hopper links to the committed bin/hopper.js, not to dist/", () => {
  const linked = join(rootPath, "node_modules", ".bin", "hopper");
  assert.equal(realpathSync(linked), realpathSync(binPath), `${linked} (run npm install to link it)`);
});

test("node_modules/.bin/hopper --help exits 0 and shows the commands", () => {
  const result = spawnSync(join(rootPath, "node_modules", ".bin", "hopper"), ["--help"], {
    encoding: "utf8",
    timeout: runTimeoutMs,
  });
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /^Usage: hopper/m);
  assert.match(result.stdout, /\bserve\b/);
});

test("without dist/, bin/hopper.js exits 1 and says to run the build", () => {
  const dir = createTempDir();
  try {
    mkdirSync(dir.file("bin"));
    const copy = join(dir.file("bin"), "hopper.js");
    copyFileSync(binPath, copy);
    // The server's package.json beside it ("type": "module"), so Node reads the copy as it does the file.
    copyFileSync(join(serverPath, "package.json"), dir.file("package.json"));
    const result = spawnSync(process.execPath, [copy, "--help"], { encoding: "utf8", timeout: runTimeoutMs });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /dist\/cli\/main\.js is missing; run npm run build first/);
    assert.equal(result.stdout, "");
  } finally {
    dir.remove();
  }
});
