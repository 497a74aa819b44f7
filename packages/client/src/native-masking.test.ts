/**
 * `ws` masks every frame a client sends, with bufferutil's native code when it can load it and byte by
 * byte in JavaScript when not, silently (docs/architecture.md, Dependencies). This checks that the
 * client's `ws` loads it.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";

test("the client's ws loads bufferutil's native masking, not its JavaScript fallback", () => {
  const require = createRequire(import.meta.url);
  const fromWs = createRequire(require.resolve("ws"));
  const loaded = fromWs("bufferutil") as { mask: unknown };
  const fallback = fromWs("bufferutil/fallback") as { mask: unknown };
  assert.equal(typeof loaded.mask, "function");
  assert.notEqual(
    loaded.mask,
    fallback.mask,
    "bufferutil fell back to JavaScript: its prebuilt binary did not load",
  );
});
