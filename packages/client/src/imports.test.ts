/**
 * What the client loads at run time, read from its compiled files: a browser bundle of the client must
 * pull in nothing of the server, and no TypeBox (its types come from @hopper/wire as types only); and
 * what a browser loads, following the `browser` field's substitutions as a bundler does, must reach no
 * `ws` and no `node:*` (e2e/browser-inbox.test.ts runs that graph in Chromium).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const distDir = fileURLToPath(new URL(".", import.meta.url));
const packageDir = dirname(distDir);

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

/**
 * Every file reached from `entry` by static and dynamic imports, and the bare specifiers met on the way
 * that are not followed (anything but @hopper/wire/limits, which is followed into the wire package).
 * `substitutions` maps a file to the one loaded instead, as the `browser` field does.
 */
function importGraph(entry: string, substitutions: ReadonlyMap<string, string>) {
  const files = new Set<string>();
  const bare = new Set<string>();
  const visit = (file: string) => {
    const loaded = substitutions.get(file) ?? file;
    if (files.has(loaded)) return;
    files.add(loaded);
    for (const specifier of importsOf(readFileSync(loaded, "utf8"))) {
      if (specifier.startsWith(".")) visit(join(dirname(loaded), specifier));
      else if (specifier === "@hopper/wire/limits") visit(fileURLToPath(import.meta.resolve(specifier)));
      else bare.add(specifier);
    }
  };
  visit(entry);
  return { files, bare };
}

test("the browser entry, with the `browser` field's substitutions, reaches no ws and no node:*", () => {
  const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
    main: string;
    browser: Record<string, string>;
  };
  const substitutions = new Map(
    Object.entries(manifest.browser).map(([from, to]) => [join(packageDir, from), join(packageDir, to)]),
  );
  assert.ok(substitutions.size > 0, "the client's package.json has a browser field");
  const entry = join(packageDir, manifest.main);
  const browser = importGraph(entry, substitutions);
  const forbidden = [...browser.bare].filter((specifier) => specifier === "ws" || isBuiltin(specifier));
  assert.deepEqual(forbidden, [], "modules a browser cannot load");
  for (const from of substitutions.keys()) {
    assert.ok(!browser.files.has(from), `${relative(packageDir, from)} is replaced in a browser`);
  }
  // The same walk without the substitutions finds them, so the check above looks where they would be.
  const node = importGraph(entry, new Map());
  assert.ok(node.bare.has("ws") && node.bare.has("node:http"), `Node's graph: ${[...node.bare].join(", ")}`);
});
