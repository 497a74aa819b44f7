import assert from "node:assert/strict";
import { test } from "node:test";
import { type Random, seededRandom } from "../../random.js";
import { sendBodySpans } from "./body-spans.js";

/** What JSON.parse makes of each message's body: the scan must find the same values. */
function bodiesFound(text: string): unknown[] | undefined {
  const bytes = Buffer.from(text, "utf8");
  const spans = sendBodySpans(bytes);
  return spans?.map((span) => (span ? JSON.parse(bytes.toString("utf8", span.start, span.end)) : undefined));
}

function bodiesParsed(text: string): unknown[] | undefined {
  const parsed = JSON.parse(text) as { messages?: unknown };
  if (!Array.isArray(parsed.messages)) return undefined;
  return parsed.messages.map((message: unknown) =>
    typeof message === "object" && message !== null && !Array.isArray(message)
      ? (message as { body?: unknown }).body
      : undefined,
  );
}

test("body spans: the bodies JSON.parse reads, in frames written by hand to be awkward", () => {
  const frames = [
    '{"op":"send","queue":"q","messages":[{"body":{"a":1}},{"body":[1,"]",{"}":"\\""}]}],"ref":3}',
    ' { "messages" : [ { "key" : "k" , "body" : "x\\\\" } , { "body":  -1.5e+3 } ] } ',
    '{"messages":[{"body":"a \\\\\\" b"},{"body":null},{"body":true},{"body":false},{"body":0}]}',
    // The last of repeated keys counts, as in JSON.parse; an escaped key is the key it decodes to.
    '{"messages":[{"body":1,"body":2}],"messages":[{"b\\u006fdy":"é ✓ 😀"},{"x":{"body":9}}]}',
    '{"messages":[],"queue":"q"}',
    '{"messages":[1,"body",[{"body":2}],{"body":{"body":{}}}]}',
    '{"queue":"q","messages":[{"body":{}},{"body":[]},{"body":""}]}',
    '{"messages":{"body":1}}',
    '{"op":"ack","receipts":["a"]}',
    '{"messages":[{"body":"\\ud83d\\ude00 and \\u0000"},{"headers":{"body":"h"},"body":"\\/"}]}',
  ];
  for (const frame of frames) assert.deepEqual(bodiesFound(frame), bodiesParsed(frame), frame);
  // A byte order mark before an HTTP body, which Fastify's parser skips.
  assert.deepEqual(bodiesFound('\ufeff{"messages":[{"body":[7]}]}'), [[7]]);
});

/** A JSON value of strings made to trouble a scanner: quotes, backslashes, brackets, wide characters. */
function value(random: Random, depth: number): unknown {
  const pick = Math.floor(random.float() * (depth > 3 ? 4 : 6));
  if (pick === 0) return Math.round((random.float() - 0.5) * 1e6) / 100;
  if (pick === 1) return [null, true, false][Math.floor(random.float() * 3)];
  if (pick === 2 || pick === 3) {
    const pieces = [
      '"',
      "\\",
      "\\\\",
      '\\"',
      "]",
      "}",
      "[",
      "{",
      ",",
      ":",
      "é",
      "✓",
      "😀",
      "\n",
      "\u0001",
      "x",
    ];
    let text = "";
    const length = Math.floor(random.float() * 12);
    for (let i = 0; i < length; i++) text += pieces[Math.floor(random.float() * pieces.length)];
    return text;
  }
  const size = Math.floor(random.float() * 4);
  if (pick === 4) return Array.from({ length: size }, () => value(random, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) object[String(value(random, 9))] = value(random, depth + 1);
  return object;
}

test("body spans: 2,000 random frames, spaced out or not, find what JSON.parse reads", () => {
  const random = seededRandom(11);
  for (let round = 0; round < 2_000; round++) {
    const messages = Array.from({ length: Math.floor(random.float() * 4) }, () =>
      random.float() < 0.9 ? { key: value(random, 2), body: value(random, 0) } : { key: "no body" },
    );
    const frame = { op: "send", ref: value(random, 3), queue: "q", messages, tail: value(random, 1) };
    const text = JSON.stringify(frame, null, random.float() < 0.5 ? undefined : 2);
    assert.deepEqual(bodiesFound(text), bodiesParsed(text), text);
  }
});
