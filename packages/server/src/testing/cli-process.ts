/**
 * Runs the compiled `hopper` CLI as a child process for the client commands' end-to-end tests
 * (cli/*.test.ts), with an environment that points it at no other broker. Test code.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The compiled CLI beside this compiled test, whatever the working directory. */
const mainPath = fileURLToPath(new URL("../cli/main.js", import.meta.url));

/** A CLI run talks to a local server; one that takes longer than this is hung, not slow. */
const runTimeoutMs = 15_000;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  stdin?: string;
  env?: Record<string, string>;
}

export interface RunningCli {
  child: ChildProcess;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** Resolves with its exit code and output once it exits. */
  result: Promise<RunResult>;
}

/** Starts `hopper <args>`; the caller can signal it while it runs. */
export function startCli(args: string[], options: RunOptions = {}): RunningCli {
  // The caller's environment must not point the CLI at another broker or send a stray key.
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.HOPPER_URL) delete env.HOPPER_URL;
  if (!options.env?.HOPPER_API_KEY) delete env.HOPPER_API_KEY;
  const child = spawn(process.execPath, [mainPath, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.end(options.stdin ?? "");
  const result = new Promise<RunResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`hopper ${args.join(" ")} did not exit within ${runTimeoutMs} ms\n${stderr}`));
    }, runTimeoutMs);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  return { child, stderr: () => stderr, result };
}

/** Runs `hopper <args>` and resolves with its exit code and output once it exits. */
export function runCli(args: string[], options: RunOptions = {}): Promise<RunResult> {
  return startCli(args, options).result;
}
