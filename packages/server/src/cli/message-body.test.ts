import assert from "node:assert/strict";
import { test } from "node:test";
import { bodyFromBytes, bodyFromText } from "./message-body.js";

const base64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

test("bodyFromText sends JSON as JSON and anything else as text/plain", () => {
  assert.deepEqual(bodyFromText('{"a":1}'), { body: { a: 1 } });
  assert.deepEqual(bodyFromText("42"), { body: 42 });
  assert.deepEqual(bodyFromText("hello"), { bodyBase64: base64("hello"), contentType: "text/plain" });
  assert.deepEqual(bodyFromText(""), { bodyBase64: "", contentType: "text/plain" });
});

test("bodyFromText with asText sends even valid JSON as text", () => {
  assert.deepEqual(bodyFromText("42", true), { bodyBase64: base64("42"), contentType: "text/plain" });
});

test("bodyFromBytes decodes UTF-8 and keeps other bytes as they are", () => {
  assert.deepEqual(bodyFromBytes(Buffer.from('["x"]\n')), { body: ["x"] });
  assert.deepEqual(bodyFromBytes(Buffer.from("héllo\n")), {
    bodyBase64: base64("héllo\n"),
    contentType: "text/plain",
  });
  const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80]);
  assert.deepEqual(bodyFromBytes(bytes), {
    bodyBase64: bytes.toString("base64"),
    contentType: "application/octet-stream",
  });
});
