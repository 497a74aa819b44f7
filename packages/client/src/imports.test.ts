/**
 * What the client loads at run time, read from its compiled files: a browser bundle of the client must
 * pull in nothing of the server, and no TypeBox (its types come from @hopper/wire as types only).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const distDir = fileURLToPath(new URL(".", import.meta.url));

/** The specifiers of every static and dynamic import in one compiled file. */
function importsOf(source: string): string[] {
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g;
  return [...source.matchAll(pattern)].map((match) => match[1] as string);
}

test("the client's code imports no server code, no TypeBox, and of @hopper/wire only its limits", () => {
  const files = readdirSync(distDir).filter((name) => name.endsWith(".js") && !name.endsWith(".test.js"));
  assert.ok(files.includes("client.js"), `compiled client files in ${distDir}`);
  const outside = new Set<string>();
  for (const name of files) {
    for (const specifier of importsOf(readFileSync(new URL(name, import.meta.url), "utf8"))) {
      if (!specifier.startsWith(".")) outside.add(specifier);
    }
  }
  for (const specifier of outside) {
    assert.ok(
      specifier.startsWith("node:") || specifier === "ws" || specifier === "@hopper/wire/limits",
      `the client imports ${specifier}`,
    );
  }
  assert.ok(outside.has("@hopper/wire/limits"), "the batch and wait limits come from the wire");
});
