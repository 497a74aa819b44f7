/**
 * `ws` masks and unmasks frames with bufferutil's native code when it can load it, and byte by byte
 * in JavaScript when not, silently: a missing optional dependency would cost every frame the server
 * reads (docs/architecture.md, Dependencies). This checks that the `ws` serving /v1/ws loads it.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { test } from "node:test";

test("the ws under @fastify/websocket loads bufferutil's native masking, not its JavaScript fallback", () => {
  const require = createRequire(import.meta.url);
  const fromWs = createRequire(
    require.resolve("ws", { paths: [dirname(require.resolve("@fastify/websocket"))] }),
  );
  const loaded = fromWs("bufferutil") as { unmask: unknown };
  const fallback = fromWs("bufferutil/fallback") as { unmask: unknown };
  assert.equal(typeof loaded.unmask, "function");
  assert.notEqual(
    loaded.unmask,
    fallback.unmask,
    "bufferutil fell back to JavaScript: its prebuilt binary did not load",
  );
});
