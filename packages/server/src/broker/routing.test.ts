import assert from "node:assert/strict";
import { test } from "node:test";
import { bindingMatches, topicMatches } from "./routing.js";

test("topic patterns: the routing table", () => {
  const table: [pattern: string, key: string, matches: boolean][] = [
    ["message.committed", "message.committed", true],
    ["message.committed", "message.deleted", false],
    ["message.*", "message.committed", true],
    ["message.*", "message", false],
    ["message.*", "message.committed.v2", false],
    ["*.committed", "message.committed", true],
    ["#", "anything.at.all", true],
    ["#", "", true],
    ["#.committed", "committed", true],
    ["#.committed", "a.b.committed", true],
    ["#.committed", "a.b.committed.x", false],
    ["message.#", "message", true],
    ["message.#", "message.a.b", true],
    ["message.#", "messages.a", false],
    ["#.b.#", "b", true],
    ["#.b.#", "a.b.c", true],
    ["#.b.#", "a.c", false],
    ["a.#.#.z", "a.z", true],
    ["a.#.z", "a.x.y.z", true],
    ["a.*.#.z", "a.z", false],
    ["a.*.#.z", "a.x.z", true],
    // Empty words are words: "a..b" has three, the middle one empty.
    ["a.*.b", "a..b", true],
    ["a..b", "a..b", true],
    ["a..b", "a.b", false],
    ["", "", true],
    ["*", "", true],
    ["*", "a.b", false],
  ];
  for (const [pattern, key, expected] of table) {
    assert.equal(
      topicMatches(pattern, key),
      expected,
      `${JSON.stringify(pattern)} vs ${JSON.stringify(key)}`,
    );
  }
});

test("fanout ignores keys; direct needs equality", () => {
  assert.equal(bindingMatches("fanout", "x", "y"), true);
  assert.equal(bindingMatches("direct", "orders", "orders"), true);
  assert.equal(bindingMatches("direct", "orders", "orders.eu"), false);
  assert.equal(bindingMatches("direct", "*", "orders"), false, "direct has no wildcards");
});

test("many #s stay fast (no exponential backtracking)", () => {
  // Without memoization this pattern explores about 40 choose 20 ways before failing.
  const pattern = `${Array.from({ length: 20 }, () => "#.a").join(".")}.z`;
  const key = Array.from({ length: 40 }, () => "a").join(".");
  assert.equal(topicMatches(pattern, key), false);
  assert.equal(topicMatches(pattern, `${key}.z`), true);
});
