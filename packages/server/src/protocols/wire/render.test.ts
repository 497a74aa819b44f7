import assert from "node:assert/strict";
import { test } from "node:test";
import type { LeasedMessage } from "../../model/message.js";
import { leasedListJson, renderLeased } from "./render.js";

/** One leased message as leasedListJson writes it, read back. */
function leasedJson(message: LeasedMessage): string {
  return leasedListJson("", [message], "").toString("utf8");
}

function leased(overrides: Partial<LeasedMessage>): LeasedMessage {
  return {
    id: "01a22c17-498c-7000-a040-7c0a294bab0d",
    receipt: "1.2c3jvy08ha",
    body: Buffer.from(JSON.stringify({ text: 'quote " and \\u2028 and ✓', n: [1, 2.5, null] })),
    contentType: "application/json",
    headers: { traceparent: "00-a-b-01", "x-odd": 'a "quoted" \n value' },
    key: null,
    priority: 0,
    dedupId: null,
    publishedAt: Date.UTC(2026, 10, 30),
    visibleAt: Date.UTC(2026, 10, 30, 0, 0, 30),
    deliveryCount: 2,
    firstDeliveredAt: Date.UTC(2026, 10, 30, 0, 0, 1),
    ...overrides,
  };
}

test("leasedListJson writes exactly what renderLeased serializes, for JSON and binary bodies", () => {
  for (const message of [
    leased({}),
    leased({ body: Buffer.from([0, 255, 10, 13]), contentType: "application/octet-stream", key: "group-1" }),
    leased({ firstDeliveredAt: null, headers: {} }),
  ]) {
    assert.deepEqual(JSON.parse(leasedJson(message)), JSON.parse(JSON.stringify(renderLeased(message))));
  }
});

test("leasedListJson writes each message's own times when they change from one message to the next", () => {
  const times = [
    Date.UTC(2026, 10, 29),
    Date.UTC(2026, 10, 29),
    Date.UTC(2026, 10, 30, 1),
    Date.UTC(2026, 10, 29),
  ];
  const firsts = [null, Date.UTC(2026, 10, 30, 2), Date.UTC(2026, 10, 30, 2), null];
  times.forEach((publishedAt, i) => {
    const firstDeliveredAt = firsts[i] ?? null;
    const written = JSON.parse(leasedJson(leased({ publishedAt, firstDeliveredAt })));
    assert.equal(written.publishedAt, new Date(publishedAt).toISOString());
    assert.equal(
      written.firstDeliveredAt,
      firstDeliveredAt === null ? null : new Date(firstDeliveredAt).toISOString(),
    );
  });
});

test("a JSON body handed over as text renders as the same body as its bytes, in both renderings", () => {
  const asBytes = leased({});
  const asText = leased({ body: (asBytes.body as Buffer).toString("utf8") });
  assert.equal(leasedJson(asText), leasedJson(asBytes));
  assert.deepEqual(renderLeased(asText), renderLeased(asBytes));
  assert.deepEqual(JSON.parse(leasedJson(asText)).body, JSON.parse(asText.body as string));
});

test("leasedListJson writes a list between its ends, sized in bytes for bodies beyond ASCII", () => {
  const messages = [
    leased({}),
    leased({ body: JSON.stringify({ text: "é ✓ 𝄞" }), key: "k" }),
    leased({ body: Buffer.from("bytes \u00ff"), contentType: "application/octet-stream" }),
  ];
  const written = leasedListJson('{"op":"deliver","sub":"7","messages":[', messages, "]}");
  const frame = JSON.parse(written.toString("utf8"));
  assert.equal(frame.sub, "7");
  assert.deepEqual(
    frame.messages,
    messages.map((message) => JSON.parse(JSON.stringify(renderLeased(message)))),
  );
  assert.equal(written.length, Buffer.byteLength(written.toString("utf8")), "no byte left unwritten");
  assert.equal(leasedListJson("[", [], "]").toString("utf8"), "[]");
});
