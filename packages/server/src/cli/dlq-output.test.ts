import assert from "node:assert/strict";
import { test } from "node:test";
import type { PeekedMessage } from "@hopper/client";
import {
  bodyPreview,
  formatDeadLetterSummary,
  formatDeadLetterTable,
  formatProgressBar,
  formatProgressLine,
  messageAgeMs,
} from "./dlq-output.js";

const nowMs = Date.parse("2026-01-01T12:00:00.000Z");

function deadLetter(id: string, fields: Partial<PeekedMessage> = {}): PeekedMessage {
  return {
    id,
    body: { order: 7 },
    contentType: "application/json",
    headers: {
      "x-dead-letter-reason": "max_deliveries",
      "x-original-queue": "orders",
      "x-delivery-count": "5",
      "x-original-published-at": "2026-01-01T11:00:00.000Z",
    },
    key: "cust-1",
    deliveryCount: 0,
    publishedAt: "2026-01-01T11:59:00.000Z",
    visibleAt: "2026-01-01T11:59:00.000Z",
    firstDeliveredAt: null,
    priority: 0,
    dedupId: null,
    ...fields,
  };
}

test("bodyPreview: JSON compact, text on one line, other bytes described, long ones cut", () => {
  assert.equal(bodyPreview({ body: { a: [1, 2] }, contentType: "application/json" }), '{"a":[1,2]}');
  const text = Buffer.from("two\n  lines\tof text").toString("base64");
  assert.equal(bodyPreview({ bodyBase64: text, contentType: "text/plain" }), "two lines of text");
  assert.equal(
    bodyPreview({ bodyBase64: "AAECAw==", contentType: "application/octet-stream" }),
    "(4 bytes application/octet-stream)",
  );
  const long = bodyPreview({ body: "é".repeat(100), contentType: "application/json" });
  assert.equal(Array.from(long).length, 40);
  assert.ok(long.endsWith("…"));
});

test("messageAgeMs counts from the original publish, or from publishedAt without the header", () => {
  assert.equal(messageAgeMs(deadLetter("a"), nowMs), 3_600_000);
  assert.equal(messageAgeMs(deadLetter("b", { headers: {} }), nowMs), 60_000);
});

test("formatDeadLetterTable shows why each message is there; a missing header is '-'", () => {
  const table = formatDeadLetterTable(
    [
      deadLetter("m1"),
      deadLetter("m2", {
        headers: {
          "x-dead-letter-reason": "max_depth",
          "x-original-queue": "payments",
          "x-delivery-count": "0",
        },
        key: null,
        body: "hi",
      }),
    ],
    nowMs,
  );
  assert.equal(
    table,
    [
      "ID  AGE  REASON          ORIGINAL-QUEUE  DELIVERIES  KEY     BODY",
      'm1   1h  max_deliveries  orders                   5  cust-1  {"order":7}',
      'm2   1m  max_depth       payments                 0  -       "hi"',
    ].join("\n"),
  );
  const plain = formatDeadLetterTable([deadLetter("m3", { headers: {}, deliveryCount: 2 })], nowMs);
  assert.match(plain, /^m3 +1m +- +- +2 +cust-1/m);
});

test("formatDeadLetterSummary counts the shown messages by reason and origin, most first", () => {
  const messages = [
    deadLetter("a"),
    deadLetter("b", { headers: { "x-dead-letter-reason": "max_depth", "x-original-queue": "payments" } }),
    deadLetter("c", { headers: { "x-dead-letter-reason": "max_depth", "x-original-queue": "payments" } }),
    deadLetter("d", { headers: {} }),
  ];
  assert.equal(
    formatDeadLetterSummary(messages, 120),
    "4 of 120 messages shown; by reason: max_depth 2, - 1, max_deliveries 1; " +
      "by original queue: payments 2, - 1, orders 1",
  );
});

test("formatProgressBar fills the bar by percent and shows the rate and time left", () => {
  assert.equal(
    formatProgressBar({ moved: 0, total: 200 }, { ratePerSecond: null, etaMs: null }),
    "[------------------------]  0/200  0%  - msg/s  ETA -",
  );
  assert.equal(
    formatProgressBar({ moved: 50, total: 200 }, { ratePerSecond: 24.96, etaMs: 6_010 }),
    "[######------------------]  50/200  25%  25.0 msg/s  ETA 7.0s",
  );
  assert.equal(
    formatProgressBar({ moved: 0, total: 0 }, { ratePerSecond: 0, etaMs: 0 }),
    "[########################]  0/0  100%  0.0 msg/s  ETA 0s",
  );
});

test("formatProgressLine says the same on a line of its own", () => {
  assert.equal(
    formatProgressLine({ id: "t1", moved: 30, total: 120 }, { ratePerSecond: 10, etaMs: 9_000 }),
    "redrive t1: 30/120 moved (25%), 10.0 msg/s, ETA 9.0s",
  );
});
