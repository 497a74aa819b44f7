import assert from "node:assert/strict";
import { test } from "node:test";
import { seededRandom } from "../random.js";
import { decodedWhole, decodeMessageBody } from "./message-body.js";

/** What the API has always accepted as bodyBase64 (the pattern decodedWhole stands in for). */
const base64Pattern = /^[A-Za-z0-9+/]*={0,2}$/;
const accepts = (text: string) => decodedWhole(text, Buffer.from(text, "base64"));

test("bodyBase64: decodedWhole accepts exactly what the base64 pattern accepts", () => {
  const cases = [
    "",
    "YQ",
    "YQ=",
    "YQ==",
    "YQ===",
    "Y",
    "YWJj",
    "YWJjZA==",
    "YQ=a",
    "YQ==YQ==",
    "=",
    "==",
    "a-b_",
    "YQ!!",
    "Y Q==",
    "YQ\n==",
    "é€YQ",
    "YW Jj",
    "+/+/",
    "+/+/=",
  ];
  for (const text of cases) assert.equal(accepts(text), base64Pattern.test(text), JSON.stringify(text));
  // Random texts over the alphabet and its neighbours: '=', base64url's '-' and '_', a space, a
  // newline, '!', a non-ASCII letter and one beyond Latin-1.
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const others = ["=", "=", "-", "_", " ", "\n", "!", "é", "€"];
  const random = seededRandom(11);
  for (let i = 0; i < 20_000; i++) {
    const length = Math.floor(random.float() * 24);
    let text = "";
    for (let j = 0; j < length; j++) {
      const roll = random.float();
      text +=
        roll < 0.85
          ? alphabet[Math.floor(random.float() * alphabet.length)]
          : others[Math.floor(random.float() * others.length)];
    }
    // Valid texts are rare among random ones: make every third one valid, then spoil some of those.
    if (i % 3 === 0) text = Buffer.from(text).toString("base64");
    assert.equal(accepts(text), base64Pattern.test(text), JSON.stringify(text));
  }
});

test("bodyBase64: an invalid text is refused with the item's place, a valid one decoded", () => {
  assert.throws(
    () => decodeMessageBody({ bodyBase64: "YQ!!" }, "messages[2]"),
    (error: unknown) =>
      error instanceof Error && /messages\[2\]: bodyBase64 is not base64/.test(error.message),
  );
  assert.deepEqual(decodeMessageBody({ bodyBase64: "YWJj" }, "messages[0]"), {
    body: Buffer.from("abc"),
    contentType: "application/octet-stream",
  });
});

test("bodyBase64 as JSON must be JSON in UTF-8: bytes that parse only once replaced are refused", () => {
  // "a\xff" in quotes: decoded with a replacement character it would parse.
  const notUtf8 = Buffer.concat([Buffer.from('"a'), Buffer.from([0xff]), Buffer.from('"')]).toString(
    "base64",
  );
  assert.throws(
    () => decodeMessageBody({ bodyBase64: notUtf8, contentType: "application/json" }, "messages[1]"),
    (error: unknown) => error instanceof Error && /messages\[1\]: .*valid JSON in UTF-8/.test(error.message),
  );
  const json = Buffer.from('{"é":1}').toString("base64");
  assert.deepEqual(decodeMessageBody({ bodyBase64: json, contentType: "application/json" }, "messages[0]"), {
    body: Buffer.from('{"é":1}'),
    contentType: "application/json",
  });
});
