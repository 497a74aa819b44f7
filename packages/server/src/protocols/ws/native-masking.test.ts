/**
 * `ws` masks and unmasks frames with bufferutil's native code when it can load it, and byte by byte
 * in JavaScript when not, silently: a missing optional dependency would cost every frame the server
 * reads and every frame the client sends (docs/architecture.md, Dependencies). This checks that both
 * copies of `ws` load it: the server's, under @fastify/websocket, and the client's.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { test } from "node:test";

const require = createRequire(import.meta.url);

/** Why the native code cannot be expected here, if it cannot: bufferutil ships no binary to build. */
function whyNoBinary(fromWs: NodeJS.Require): string | undefined {
  let packageJson: string;
  try {
    packageJson = fromWs.resolve("bufferutil/package.json");
  } catch {
    return "bufferutil is not installed (an optional dependency; npm install --omit=optional leaves it out)";
  }
  const platform = `${process.platform}-${process.arch}`;
  if (!existsSync(join(dirname(packageJson), "prebuilds", platform)))
    return `bufferutil ships no prebuilt binary for ${platform}`;
  return undefined;
}

for (const [copy, requiredBy] of [
  ["the server's ws", "@fastify/websocket"],
  ["the client's ws", "@hopper/client"],
] as const) {
  test(`${copy} loads bufferutil's native masking, not its JavaScript fallback`, (t) => {
    const fromWs = createRequire(require.resolve("ws", { paths: [dirname(require.resolve(requiredBy))] }));
    const skip = whyNoBinary(fromWs);
    if (skip !== undefined) {
      t.skip(skip);
      return;
    }
    const loaded = fromWs("bufferutil") as { mask: unknown; unmask: unknown };
    const fallback = fromWs("bufferutil/fallback") as { mask: unknown; unmask: unknown };
    assert.equal(typeof loaded.unmask, "function");
    assert.notEqual(
      loaded.mask,
      fallback.mask,
      "bufferutil fell back to JavaScript: its binary did not load",
    );
    assert.notEqual(loaded.unmask, fallback.unmask);
  });
}
