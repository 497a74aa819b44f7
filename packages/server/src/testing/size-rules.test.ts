/**
 * The size rules of the restructuring issue: no source file over 600 lines (tests and the conformance
 * suite included), and no function over 80 lines unless the first line of its body is a comment
 * starting `// Over 80 lines` that says why. `describe` and `test` callbacks count as functions.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { functionSpans } from "./function-spans.js";

/** A source file's lines at most. */
const fileLinesMax = 600;
/** A function's lines at most, from its `{` to its `}`, unless its first body line says why. */
const functionLinesMax = 80;
const reasonPrefix = "// Over 80 lines";

/** The tree's root, read beside dist (this file runs as packages/server/dist/testing/…). */
const rootDir = fileURLToPath(new URL("../../../../", import.meta.url));
/** Every package's src/, and the bench's. */
const sourceRoots = [
  ...readdirSync(join(rootDir, "packages"))
    .map((name) => `packages/${name}/src`)
    .filter((root) => existsSync(join(rootDir, root))),
  "bench/src",
];

/**
 * Files over a rule that another change is rewriting now, each with the reason it waits. The test
 * fails once a listed file keeps the rules, so that its entry is removed rather than left to rot.
 */
const pending = new Map<string, string>([]);

function typeScriptFiles(): string[] {
  return sourceRoots.flatMap((root) =>
    readdirSync(join(rootDir, root), { withFileTypes: true, recursive: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts"))
      .map((entry) => relative(rootDir, join(entry.parentPath, entry.name))),
  );
}

/** What a file breaks of the size rules, one line each ("" for nothing). */
function offences(path: string, text: string): string[] {
  const found: string[] = [];
  const lineCount = text.endsWith("\n") ? text.split("\n").length - 1 : text.split("\n").length;
  if (lineCount > fileLinesMax) found.push(`${path}: ${lineCount} lines (at most ${fileLinesMax})`);
  for (const span of functionSpans(text)) {
    const lines = span.closeLine - span.openLine + 1;
    if (lines > functionLinesMax && !span.firstBodyLine.startsWith(reasonPrefix)) {
      found.push(`${path}:${span.openLine}: a function of ${lines} lines with no "${reasonPrefix}" reason`);
    }
  }
  return found;
}

describe("size rules", () => {
  test("no file over 600 lines, no function over 80 lines without a reason", () => {
    const files = typeScriptFiles();
    assert.ok(files.length > 100, `only ${files.length} files found under ${rootDir}`);
    const broken = files.flatMap((path) =>
      pending.has(path) ? [] : offences(path, readFileSync(join(rootDir, path), "utf8")),
    );
    assert.deepEqual(broken, []);
  });

  test("every pending file still breaks a rule", () => {
    const kept = [...pending.keys()].filter(
      (path) => offences(path, readFileSync(join(rootDir, path), "utf8")).length === 0,
    );
    assert.deepEqual(kept, [], "these files keep the rules now: remove them from `pending`");
  });

  test("the scanner finds functions, and not statements, objects or classes", () => {
    const body = (first: string) => [first, ...Array.from({ length: 80 }, () => "  x++;")].join("\n");
    // A string, a template literal with code in it, and a comment opener, none of which is code.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the text is code to scan, a template in it.
    const tricky = '  const s = "{ \\"" + ' + '`{ ${ { a: "}" }.a } /*`' + " + '}'; // {";
    const text = [
      `export function long(a: number): { b: string } {\n${body("  a++;")}\n}`,
      `class C extends D {\n  method(): Map<string, number> {\n${body("  // Over 80 lines: a test.")}\n  }\n}`,
      `describe("s", () => {\n${body(tricky)}\n});`,
      `if (x) {\n${body("")}\n}`,
      `const o = {\n${body("")}\n};`,
      "const re = /[{]/;",
    ].join("\n");
    const spans = functionSpans(text).map((span) => [span.openLine, span.closeLine - span.openLine + 1]);
    assert.deepEqual(spans, [
      [1, 83],
      [85, 83],
      [169, 83],
    ]);
    assert.deepEqual(
      offences("f.ts", text).map((line) => line.split(":")[1]),
      ["1", "169"],
    );
  });
});
