/**
 * Finds the block bodies of the functions in a TypeScript file (declarations, methods, getters,
 * constructors and arrows with a `{` body, `describe`/`test` callbacks included), for the size rules
 * (size-rules.test.ts). It is a scanner, not a parser: strings, template literals, comments and regex
 * literals are blanked first, then each `{` is judged by what comes before it. That is exact enough
 * for this tree, whose code biome formats; a case it misjudges should be fixed here, not worked around.
 */

/** One function's block body: the lines of its `{` and its `}`, 1-based. */
export interface FunctionSpan {
  openLine: number;
  closeLine: number;
  /** The first non-blank line inside the body, trimmed ("" when the body is empty). */
  firstBodyLine: string;
}

/** Words before `(` whose block is a statement's, not a function's. */
const statementWords = new Set(["if", "for", "while", "switch", "catch", "with"]);

/** Characters after which a `/` starts a regex literal rather than a division. */
const regexAfter = new Set([..."(,=:[!&|?{};+-*%<>~^"]);
const regexAfterWords = new Set([
  "return",
  "typeof",
  "case",
  "do",
  "else",
  "in",
  "of",
  "void",
  "yield",
  "await",
]);

/**
 * The text with the insides of strings, template literals (not their `${…}` code), comments and regex
 * literals replaced by spaces; newlines are kept, so offsets and lines stay those of the text.
 */
export function blankNonCode(text: string): string {
  const out = text.split("");
  const blank = (from: number, to: number) => {
    for (let i = from; i < to; i++) if (out[i] !== "\n") out[i] = " ";
  };
  // One entry per template literal whose `${` code is being read: the brace depth inside that code.
  const templateDepths: number[] = [];
  let i = 0;
  const readTemplate = () => {
    // At the first character of a template literal's text; stops after its closing "`" or at "${".
    const start = i;
    while (i < text.length) {
      const c = text[i];
      if (c === "\\") i += 2;
      else if (c === "`") {
        blank(start, i);
        i++;
        return;
      } else if (c === "$" && text[i + 1] === "{") {
        blank(start, i);
        i += 2;
        templateDepths.push(0);
        return;
      } else i++;
    }
    blank(start, i);
  };
  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === "/" && next === "/") {
      const end = text.indexOf("\n", i);
      const stop = end === -1 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end === -1 ? text.length : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < text.length && text[j] !== c && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else if (c === "`") {
      i++;
      readTemplate();
    } else if (c === "/" && startsRegex(text, i)) {
      let j = i + 1;
      let inClass = false;
      while (j < text.length && text[j] !== "\n") {
        const r = text[j];
        if (r === "\\") j++;
        else if (r === "[") inClass = true;
        else if (r === "]") inClass = false;
        else if (r === "/" && !inClass) break;
        j++;
      }
      blank(i + 1, j);
      i = j + 1;
    } else if (templateDepths.length > 0 && (c === "{" || c === "}")) {
      const depth = templateDepths.length - 1;
      if (c === "{") templateDepths[depth] = (templateDepths[depth] as number) + 1;
      else if (templateDepths[depth] === 0) {
        // The `}` that ends a `${…}`: the template's text goes on.
        templateDepths.pop();
        i++;
        readTemplate();
        continue;
      } else templateDepths[depth] = (templateDepths[depth] as number) - 1;
      i++;
    } else i++;
  }
  return out.join("");
}

function startsRegex(text: string, at: number): boolean {
  let j = at - 1;
  while (j >= 0 && /\s/.test(text[j] as string)) j--;
  if (j < 0) return true;
  const before = text[j] as string;
  if (regexAfter.has(before)) return true;
  const word = /[A-Za-z_$]+$/.exec(text.slice(Math.max(0, j - 10), j + 1));
  return word !== null && regexAfterWords.has(word[0]);
}

/** The function bodies of a TypeScript file, in the order their `{` appear. */
export function functionSpans(text: string): FunctionSpan[] {
  const code = blankNonCode(text);
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") lineStarts.push(i + 1);
  const lineOf = (offset: number) => {
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((lineStarts[mid] as number) <= offset) low = mid;
      else high = mid - 1;
    }
    return low + 1;
  };
  const lines = text.split("\n");
  const spans: FunctionSpan[] = [];
  const open: { at: number; isFunction: boolean }[] = [];
  for (let i = 0; i < code.length; i++) {
    const c = code[i];
    if (c === "{") open.push({ at: i, isFunction: opensFunctionBody(code, i) });
    else if (c === "}") {
      const start = open.pop();
      if (start === undefined || !start.isFunction) continue;
      const openLine = lineOf(start.at);
      const closeLine = lineOf(i);
      const body = lines.slice(openLine, closeLine - 1).map((line) => line.trim());
      spans.push({ openLine, closeLine, firstBodyLine: body.find((line) => line !== "") ?? "" });
    }
  }
  return spans.sort((a, b) => a.openLine - b.openLine);
}

/** Whether the `{` at `at` (in blanked code) opens a function's body. */
function opensFunctionBody(code: string, at: number): boolean {
  let j = previousNonSpace(code, at - 1);
  if (j < 0) return false;
  if (code[j] === ">" && code[j - 1] === "=") return true;
  if (code[j] !== ")") {
    // Maybe a return type: `): Type {`. Walk back over the type to a `:` at depth 0.
    const colon = returnTypeColon(code, j);
    if (colon === undefined) return false;
    j = previousNonSpace(code, colon - 1);
    if (j < 0) return false;
    if (code[j] !== ")") return false;
  }
  const paren = matchingOpen(code, j);
  if (paren === undefined) return false;
  const wordEnd = previousNonSpace(code, paren - 1);
  const word = /[A-Za-z_$][\w$]*$/.exec(code.slice(Math.max(0, wordEnd - 40), wordEnd + 1))?.[0];
  if (word === undefined) return true;
  if (statementWords.has(word)) return false;
  if (word === "await") {
    const forEnd = previousNonSpace(code, wordEnd - word.length);
    return !code.slice(0, forEnd + 1).endsWith("for");
  }
  return true;
}

function previousNonSpace(code: string, from: number): number {
  let j = from;
  while (j >= 0 && /\s/.test(code[j] as string)) j--;
  return j;
}

/** The `(` that the `)` at `close` closes, in blanked code. */
function matchingOpen(code: string, close: number): number | undefined {
  let depth = 0;
  for (let j = close; j >= 0; j--) {
    const c = code[j];
    if (c === ")") depth++;
    else if (c === "(" && --depth === 0) return j;
  }
  return undefined;
}

/**
 * Walking back from `end` over a type, the `:` that begins it, if the text there is a type at all. A
 * line break outside brackets ends the walk: biome breaks a long return type inside its brackets.
 */
function returnTypeColon(code: string, end: number): number | undefined {
  let depth = 0;
  for (let j = end; j >= 0 && end - j < 600; j--) {
    const c = code[j] as string;
    if (c === ">" && code[j - 1] === "=") {
      j--;
      continue;
    }
    if (c === ")" || c === "]" || c === "}" || c === ">") depth++;
    else if (c === "(" || c === "[" || c === "{" || c === "<") {
      if (depth === 0) return undefined;
      depth--;
    } else if (depth === 0 && (c === ";" || c === "=" || c === "," || c === "\n")) return undefined;
    else if (depth === 0 && c === ":") return j === end ? undefined : j;
  }
  return undefined;
}
