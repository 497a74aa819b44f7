import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { serverNodeFlags } from "./server-process.js";

test("the bench runs the server with the node flags of npm start", () => {
  assert.deepEqual(serverNodeFlags(), [], "npm start runs the server with V8's defaults (architecture.md)");
  const dir = mkdtempSync(join(tmpdir(), "hopper-bench-flags-"));
  try {
    const packagePath = join(dir, "package.json");
    const withStart = (start: string) => writeFileSync(packagePath, JSON.stringify({ scripts: { start } }));
    withStart("npm run build && node  --a=1 --b packages/server/dist/cli/main.js serve");
    assert.deepEqual(serverNodeFlags(packagePath), ["--a=1", "--b"]);
    withStart("node packages/server/dist/cli/main.js serve");
    assert.deepEqual(serverNodeFlags(packagePath), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
