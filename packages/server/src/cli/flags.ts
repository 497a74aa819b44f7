/**
 * What the client commands share: the connection options, parsers for flag values, and the mapping
 * of failures to exit codes. A bad flag exits 2 and a failed request exits 1, so a script can tell
 * "I called it wrong" from "the broker said no". Flags are checked for form here (a duration, a whole
 * number); the server is the authority on ranges, so each limit is stated in one place.
 */
import { HopperClient, HopperError } from "@hopper/client";
import { type Command, CommanderError, InvalidArgumentError } from "commander";
import { parseDuration } from "./duration.js";

/** `interrupted` is 128 + SIGINT, what a shell reports for a command ended by Ctrl-C. */
export const exitCodes = { ok: 0, failure: 1, usage: 2, interrupted: 130 } as const;

const urlDefault = "http://127.0.0.1:7171";

/** A mistake in how the command was called, found after commander parsed the flags. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The connection options every client command takes, on the program and on the command itself. */
export interface ConnectionFlags {
  url?: string;
  apiKey?: string;
  json?: boolean;
}

export interface Connection {
  client: HopperClient;
  url: string;
  /** The API key the client sends, for calls the client does not have yet (inbox-commands.ts). */
  apiKey: string | undefined;
  /** Print each server answer as one line of JSON instead of text for people. */
  json: boolean;
}

/**
 * Adds --url, --api-key and --json. They carry no commander default: the value given nearest the
 * command wins, then the environment, so a default on the command cannot hide a flag given before it.
 */
export function addConnectionOptions(command: Command): Command {
  return command
    .option("--url <url>", `the broker's URL (default: $HOPPER_URL or ${urlDefault})`)
    .option("--api-key <key>", "the API key to send (default: $HOPPER_API_KEY)")
    .option("--json", "print the server's JSON answers instead of text for people");
}

/**
 * Wraps a client command's action: resolves its connection, runs it, and turns a failure into a
 * message on stderr and an exit code, which needs the URL to say where the broker was looked for.
 * Commander calls an action with the operands, then the options, then the command.
 */
export function clientAction<Options>(
  run: (connection: Connection, operands: (string | undefined)[], options: Options) => Promise<void>,
): (...args: unknown[]) => Promise<void> {
  return async (...args) => {
    const command = args.at(-1) as Command;
    const options = args.at(-2) as Options;
    let url: string | undefined;
    try {
      const connection = connect(command);
      url = connection.url;
      await run(connection, args.slice(0, -2) as (string | undefined)[], options);
    } catch (error) {
      process.exitCode = reportFailure(error, url);
    }
  };
}

/** Resolves the connection options of a command and its ancestors into a client. */
export function connect(command: Command): Connection {
  const levels = [command, ...ancestors(command)].map((level) => level.opts<ConnectionFlags>());
  const pick = <K extends keyof ConnectionFlags>(key: K) =>
    levels.find((flags) => flags[key] !== undefined)?.[key];
  const url = pick("url") ?? process.env.HOPPER_URL ?? urlDefault;
  checkUrl(url);
  const apiKey = pick("apiKey") ?? (process.env.HOPPER_API_KEY || undefined);
  return { client: new HopperClient({ url, apiKey }), url, apiKey, json: pick("json") === true };
}

function ancestors(command: Command): Command[] {
  const found: Command[] = [];
  for (let level = command.parent; level; level = level.parent) found.push(level);
  return found;
}

function checkUrl(url: string): void {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new UsageError(`--url "${url}" is not a URL; use e.g. ${urlDefault}.`);
  }
  if (protocol !== "http:" && protocol !== "https:") {
    throw new UsageError(`--url "${url}" must start with http:// or https://.`);
  }
}

/** A commander parser for a duration flag such as "30s"; its message names the accepted forms. */
export function durationFlag(text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** A commander parser for a whole-number flag of at least `min`; the server checks the upper bound. */
export function integerFlag(min: number): (text: string) => number {
  return (text) => {
    const value = Number(text);
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
      throw new InvalidArgumentError(`"${text}" is not a whole number of at least ${min}.`);
    }
    return value;
  };
}

/** A commander parser for a number above 0, fractions allowed (a rate); the server checks the upper bound. */
export function positiveNumberFlag(text: string): number {
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text.trim()) || !(value > 0) || !Number.isFinite(value)) {
    throw new InvalidArgumentError(`"${text}" is not a number above 0.`);
  }
  return value;
}

/**
 * A commander parser for a bound that can be lifted: a whole number of at least 1, or "none". It
 * answers "none" rather than null because commander replaces a parser's null with "".
 */
export function boundFlag(text: string): number | "none" {
  if (text.trim() === "none") return "none";
  try {
    return integerFlag(1)(text);
  } catch {
    throw new InvalidArgumentError(`"${text}" is neither a whole number of at least 1 nor "none".`);
  }
}

/** A commander parser that collects repeated `--header name=value` flags into one record. */
export function headerFlag(text: string, previous: Record<string, string> = {}): Record<string, string> {
  const equals = text.indexOf("=");
  if (equals <= 0) throw new InvalidArgumentError(`"${text}" is not name=value.`);
  return { ...previous, [text.slice(0, equals)]: text.slice(equals + 1) };
}

/**
 * Reports a failure on stderr and answers the exit code. Commander has already printed its own
 * usage errors by the time they arrive here, so only the code is chosen for them.
 */
export function reportFailure(error: unknown, url?: string): number {
  if (error instanceof CommanderError) {
    return error.exitCode === exitCodes.ok ? exitCodes.ok : exitCodes.usage;
  }
  if (error instanceof UsageError) {
    console.error(`error: ${error.message}`);
    return exitCodes.usage;
  }
  if (error instanceof HopperError) {
    console.error(`error ${error.code}: ${error.message}${networkHint(error, url)}`);
    return exitCodes.failure;
  }
  console.error(error instanceof Error ? error.message : error);
  return exitCodes.failure;
}

/** "fetch failed" alone does not say what to check, so a request with no answer names the URL. */
function networkHint(error: HopperError, url: string | undefined): string {
  if (error.code !== "network_error") return "";
  // fetch reports "fetch failed"; what failed (ECONNREFUSED, "bad port") is in the cause of its cause.
  const inner = (error.cause as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  const reason = inner?.code ?? inner?.message;
  return ` (${reason ? `${reason}; ` : ""}is hopper serve running at ${url ?? "the --url"}?)`;
}
