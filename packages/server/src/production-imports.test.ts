/**
 * Test helpers stay out of the product: no production file (a .ts under a package's src/ that is
 * neither a *.test.ts nor under src/testing/) imports from a testing/ folder or from a test file,
 * statically, dynamically or by `new URL(…, import.meta.url)`. Test code may import anything.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

/** The sources, read from the tree beside dist (this file runs as packages/server/dist/…). */
const packagesDir = fileURLToPath(new URL("../../", import.meta.url));
const sourceRoots = ["server", "wire", "client"].map((name) => join(packagesDir, name, "src"));

/** Relative specifiers in `from "…"`, `import "…"`, `import("…")` and `new URL("…", import.meta.url)`. */
const specifierPatterns = [
  /\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g,
  /\bimport\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g,
  /\bnew URL\(\s*["'](\.{1,2}\/[^"']+)["']\s*,\s*import\.meta\.url/g,
];

function typeScriptFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

function isTestCode(file: string, root: string): boolean {
  const path = relative(root, file);
  return /\.test\.[cm]?[jt]s$/.test(path) || path.split(sep).includes("testing");
}

test("no production file imports from testing/ or from a test file", () => {
  const offences: string[] = [];
  let checked = 0;
  for (const root of sourceRoots) {
    for (const file of typeScriptFiles(root)) {
      if (isTestCode(file, root)) continue;
      checked++;
      const text = readFileSync(file, "utf8");
      for (const pattern of specifierPatterns) {
        for (const [, specifier] of text.matchAll(pattern)) {
          const target = resolve(dirname(file), specifier as string);
          if (isTestCode(target, root)) offences.push(`${relative(packagesDir, file)} imports ${specifier}`);
        }
      }
    }
  }
  assert.ok(checked > 50, `only ${checked} production files found under ${sourceRoots.join(", ")}`);
  assert.deepEqual(offences, []);
});

test("the check sees each form of import", () => {
  const root = join(packagesDir, "server", "src");
  const lines = [
    'import { TestSocket } from "../testing/ws-test-client.js";',
    'export { x } from "./thing.test.js";',
    'await import("../testing/pg.js");',
    'const child = new URL("../testing/child.js", import.meta.url);',
  ];
  for (const line of lines) {
    const [, specifier] = specifierPatterns.flatMap((pattern) => [...line.matchAll(pattern)])[0] ?? [];
    assert.ok(specifier, line);
    assert.ok(isTestCode(resolve(root, "broker", specifier), root), line);
  }
  assert.equal(isTestCode(resolve(root, "broker", "../store/store.js"), root), false);
});
