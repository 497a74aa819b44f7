/** The command line of `npm run bench -- queue …`, parsed and checked before anything starts. */
import { parseArgs } from "node:util";
import { bodyBytesMax, bodyBytesMin, latencySecondsMax, messagesMax, ratePerSecondMax } from "./limits.js";

export type Durability = "fsync" | "os";

export interface QueueBenchOptions {
  /** W1: how many messages go through the queue. */
  messages: number;
  /** The size of each message body as stored: the serialized JSON, in bytes. */
  bodyBytes: number;
  durability: Durability;
  /** W2: the fixed publish rate. */
  ratePerSecond: number;
  /** W2: how long the fixed-rate schedule runs. */
  latencySeconds: number;
  /** Where to write the figures as JSON, if anywhere. */
  jsonPath: string | undefined;
  /** Where the server writes a V8 CPU profile (`node --cpu-prof`), if anywhere. */
  profileDir: string | undefined;
}

export const usage = `usage: npm run bench -- queue [--messages 50000] [--body-bytes 1024] [--durability fsync|os]
                              [--rate 1000] [--latency-seconds 10] [--json out.json] [--profile-dir dir]`;

/** Parses `queue [flags]`; throws an Error whose message is fit to print with the usage. */
export function parseQueueBenchOptions(argv: string[]): QueueBenchOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      messages: { type: "string", default: "50000" },
      "body-bytes": { type: "string", default: "1024" },
      durability: { type: "string", default: "fsync" },
      rate: { type: "string", default: "1000" },
      "latency-seconds": { type: "string", default: "10" },
      json: { type: "string" },
      "profile-dir": { type: "string" },
    },
  });
  if (positionals.length !== 1 || positionals[0] !== "queue") {
    throw new Error(`expected the benchmark name "queue", got ${JSON.stringify(positionals)}`);
  }
  const durability = values.durability;
  if (durability !== "fsync" && durability !== "os") {
    throw new Error(`--durability is "fsync" or "os", not "${durability}"`);
  }
  return {
    messages: integerFlag("messages", values.messages, 1, messagesMax),
    bodyBytes: integerFlag("body-bytes", values["body-bytes"], bodyBytesMin, bodyBytesMax),
    durability,
    ratePerSecond: integerFlag("rate", values.rate, 1, ratePerSecondMax),
    latencySeconds: integerFlag("latency-seconds", values["latency-seconds"], 1, latencySecondsMax),
    jsonPath: values.json,
    profileDir: values["profile-dir"],
  };
}

function integerFlag(name: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`--${name} must be an integer from ${min} to ${max}, not "${text}"`);
  }
  return value;
}
