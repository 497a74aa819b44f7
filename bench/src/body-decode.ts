/**
 * What the server spends decoding one message body as it arrives (broker/message-body.ts), in
 * nanoseconds per body, for a JSON body and a `bodyBase64` of random bytes:
 *
 *   node bench/dist/body-decode.js [sizes in bytes …]     (default: 1024 65536)
 *
 * For reference it also times the check a base64 body had before its decoded length replaced it, a
 * regular expression over the text, alone. It loads the compiled server (`npm run build` first).
 */
import { randomBytes } from "node:crypto";

const serverDist = new URL("../../packages/server/dist/", import.meta.url);
const { decodeMessageBody } = (await import(new URL("model/message-body.js", serverDist).href)) as {
  decodeMessageBody: (message: { body?: unknown; bodyBase64?: string }, where: string) => unknown;
};

const distinctBodies = 100;
const base64Pattern = /^[A-Za-z0-9+/]*={0,2}$/;

/** Nanoseconds per call of `run` over the inputs, after a warm-up, for about `budgetMs`. */
function nanosPerCall<T>(inputs: T[], run: (input: T) => unknown, budgetMs = 300): number {
  for (const input of inputs) run(input);
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(budgetMs) * 1_000_000n;
  let now = start;
  while (now < end) {
    for (const input of inputs) run(input);
    calls += inputs.length;
    now = process.hrtime.bigint();
  }
  return Number(now - start) / calls;
}

const sizes = process.argv.slice(2).map(Number);
for (const size of sizes.length > 0 ? sizes : [1024, 65_536]) {
  if (!Number.isInteger(size) || size < 1 || size > 1024 * 1024)
    throw new Error(`sizes are 1 to 1048576 bytes`);
  const base64 = Array.from({ length: distinctBodies }, () => ({
    bodyBase64: randomBytes(size).toString("base64"),
  }));
  const json = Array.from({ length: distinctBodies }, (_, i) => ({
    body: { i, pad: "x".repeat(size - 20) },
  }));
  const decodeBase64 = nanosPerCall(base64, (input) => decodeMessageBody(input, "messages[0]"));
  const patternAlone = nanosPerCall(base64, (input) => base64Pattern.test(input.bodyBase64));
  const decodeJson = nanosPerCall(json, (input) => decodeMessageBody(input, "messages[0]"));
  console.log(
    `${size} B: bodyBase64 ${decodeBase64.toFixed(0)} ns (the old pattern check alone: ${patternAlone.toFixed(0)} ns), ` +
      `JSON body ${decodeJson.toFixed(0)} ns`,
  );
}
