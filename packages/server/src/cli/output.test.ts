import assert from "node:assert/strict";
import { test } from "node:test";
import type { QueueStats, ReceivedMessage } from "@hopper/client";
import {
  attributePairs,
  formatAge,
  formatBlock,
  formatBody,
  formatBytes,
  formatMessage,
  formatQueueTable,
  formatTable,
  plural,
  statPairs,
} from "./output.js";

const stats: QueueStats = {
  available: 12,
  delayed: 1,
  inFlight: 3,
  corrupt: 1,
  oldestMessageAgeMs: 125_000,
  consumers: 0,
  published: 20,
  delivered: 7,
  acked: 4,
  nacked: 0,
  expired: 0,
  deadLettered: 2,
  purged: 0,
  redelivered: 1,
  dropped: 3,
  redriven: 4,
};

test("formatAge shows two units at most, and '-' when there is no message", () => {
  assert.equal(formatAge(0), "-");
  assert.equal(formatAge(850), "850ms");
  assert.equal(formatAge(12_345), "12.3s");
  assert.equal(formatAge(60_000), "1m");
  assert.equal(formatAge(245_999), "4m 5s");
  assert.equal(formatAge(2 * 3_600_000 + 10 * 60_000 + 59_000), "2h 10m");
  assert.equal(formatAge(3 * 86_400_000 + 4 * 3_600_000), "3d 4h");
});

test("formatBytes uses KiB or MiB only for whole numbers of them", () => {
  assert.equal(formatBytes(1_048_576), "1 MiB");
  assert.equal(formatBytes(2048), "2 KiB");
  assert.equal(formatBytes(2049), "2049 bytes");
});

test("plural adds an s except for one", () => {
  assert.equal(plural(1, "message"), "1 message");
  assert.equal(plural(0, "message"), "0 messages");
  assert.equal(plural(3, "message"), "3 messages");
});

test("formatTable pads columns and right-aligns the numeric ones", () => {
  const table = formatTable(
    ["NAME", "N"],
    [
      ["a", "5"],
      ["longer", "123"],
    ],
    new Set([1]),
  );
  assert.equal(table, ["NAME      N", "a         5", "longer  123"].join("\n"));
});

test("formatBlock lines values up in one column", () => {
  assert.equal(
    formatBlock([
      ["a", "1"],
      ["bbb", "2"],
    ]),
    "  a    1\n  bbb  2",
  );
});

test("formatQueueTable shows depths and a human oldest age", () => {
  const table = formatQueueTable([{ name: "orders", kind: "standard", stats }]);
  const [header, row] = table.split("\n");
  assert.match(header ?? "", /^NAME +KIND +AVAILABLE +IN-FLIGHT +DELAYED +OLDEST +DEAD-LETTERED$/);
  assert.match(row ?? "", /^orders +standard +12 +3 +1 +2m 5s +2$/);
});

test("attributePairs shows durations for people, the dead-letter policy, and unknown attributes as JSON", () => {
  const pairs = attributePairs({
    visibilityTimeoutMs: 45_000,
    retentionMs: 4 * 86_400_000,
    delayMs: 0,
    receiveWaitMs: 20_000,
    maxMessageBytes: 1_048_576,
    deadLetter: { queue: "dlq", maxDeliveries: 1 },
    retry: { initialDelayMs: 1000, multiplier: 2, maxDelayMs: 900_000, jitter: "full" },
    maxDepth: 10,
    overflow: "drop-oldest",
    dedupWindowMs: 300_000,
    contentBasedDedup: true,
    pushbackDepth: 7,
  });
  assert.deepEqual(pairs, [
    ["visibility timeout", "45s"],
    ["retention", "4d"],
    ["delay", "0s"],
    ["receive wait", "20s"],
    ["max message size", "1 MiB"],
    ["dead letter", "to dlq after 1 delivery"],
    ["retry", "1s x2 up to 15m, full jitter"],
    ["max depth", "10, then drop-oldest"],
    ["dedup", "5m window, by body too"],
    ["pushbackDepth", "7"],
  ]);
});

test("attributePairs says when a queue has no bound and does not deduplicate", () => {
  const pairs = attributePairs({
    maxDepth: null,
    overflow: "reject",
    dedupWindowMs: 0,
    contentBasedDedup: false,
  });
  assert.deepEqual(pairs, [
    ["max depth", "none"],
    ["dedup", "off"],
  ]);
});

test("attributePairs says 'none' for the server's null dead-letter policy", () => {
  const attributes = JSON.parse('{"deadLetter":null}');
  assert.deepEqual(attributePairs(attributes), [["dead letter", "none"]]);
});

test("statPairs lists depths, the oldest age, then every counter", () => {
  const pairs = new Map(statPairs({ ...stats, purged: 5 }));
  assert.equal(pairs.get("oldest message age"), "2m 5s");
  assert.equal(pairs.get("in flight"), "3");
  assert.equal(pairs.get("corrupt"), "1");
  assert.equal(pairs.get("dead-lettered"), "2");
  assert.equal(pairs.get("purged"), "5");
  assert.equal(pairs.get("dropped"), "3");
  assert.equal(pairs.get("redriven"), "4");
  assert.equal(pairs.size, 16);
});

test("formatBody pretty-prints JSON, decodes text/* and leaves other bytes as base64", () => {
  assert.equal(
    formatBody({ body: { a: [1] }, contentType: "application/json" }),
    '{\n  "a": [\n    1\n  ]\n}',
  );
  const text = Buffer.from("héllo", "utf8").toString("base64");
  assert.equal(formatBody({ bodyBase64: text, contentType: "text/plain" }), "héllo");
  assert.equal(formatBody({ bodyBase64: "AAEC", contentType: "application/octet-stream" }), "(base64) AAEC");
});

test("formatMessage shows the receipt only when asked", () => {
  const message: ReceivedMessage = {
    id: "m1",
    receipt: "r1",
    body: "hi",
    contentType: "application/json",
    headers: { "x-a": "b" },
    key: null,
    deliveryCount: 2,
    publishedAt: "2025-01-01T00:00:00.000Z",
    firstDeliveredAt: "2025-01-01T00:00:01.000Z",
  };
  const shown = formatMessage(message, true);
  assert.equal(
    shown,
    [
      "id            m1",
      "delivery      2",
      "content type  application/json",
      "header        x-a: b",
      "receipt       r1",
      "body",
      '  "hi"',
    ].join("\n"),
  );
  assert.doesNotMatch(formatMessage(message, false), /receipt/);
});
