import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { serverNodeFlags } from "./server-process.js";

test("the bench runs the server with the node flags of hopper's first line", () => {
  assert.ok(
    serverNodeFlags().some((flag) => flag.startsWith("--max-semi-space-size=")),
    "the built server's shebang names its young-generation size",
  );
  const dir = mkdtempSync(join(tmpdir(), "hopper-bench-flags-"));
  try {
    const main = join(dir, "main.js");
    writeFileSync(main, "#!/usr/bin/env -S node  --a=1 --b\nconsole.log(1);\n");
    assert.deepEqual(serverNodeFlags(main), ["--a=1", "--b"]);
    writeFileSync(main, "#!/usr/bin/env node\nconsole.log(1);\n");
    assert.deepEqual(serverNodeFlags(main), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
