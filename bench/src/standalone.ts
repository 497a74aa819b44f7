/**
 * `npm run bench -- standalone [--peer rabbitmq-classic,rabbitmq-quorum,nats,redis-streams]` runs the
 * minimal per-peer scripts of bench/peers/standalone/ (each its peer's own client library and nothing
 * of this harness), each in a process of its own, and passes their lines through: the check that
 * `compare` drives the peers no worse than their own clients do.
 */
import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { natsUrlDefault, rabbitmqUrlDefault, redisServerPathDefault } from "./limits.js";

const scriptsDir = join(dirname(fileURLToPath(import.meta.url)), "peers", "standalone");

export function runStandalone(argv: string[]): number {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      peer: { type: "string", default: "rabbitmq-classic,rabbitmq-quorum,nats,redis-streams" },
      "rabbitmq-url": { type: "string", default: rabbitmqUrlDefault },
      "nats-url": { type: "string", default: natsUrlDefault },
      "redis-server": { type: "string", default: redisServerPathDefault },
    },
  });
  const commands: Record<string, string[]> = {
    "rabbitmq-classic": ["rabbitmq.js", "classic", values["rabbitmq-url"]],
    "rabbitmq-quorum": ["rabbitmq.js", "quorum", values["rabbitmq-url"]],
    nats: ["nats.js", values["nats-url"]],
    "redis-streams": ["redis-streams.js", values["redis-server"]],
  };
  for (const peer of values.peer.split(",")) {
    const command = commands[peer.trim()];
    if (command === undefined) {
      console.error(`--peer takes a list of ${Object.keys(commands).join(", ")}; not "${peer}"`);
      return 2;
    }
    const [script, ...args] = command as [string, ...string[]];
    console.log(`${peer}: load average ${(loadavg()[0] ?? Number.NaN).toFixed(2)}`);
    const run = spawnSync(process.execPath, [join(scriptsDir, script), ...args], { stdio: "inherit" });
    if (run.status !== 0) return 1;
  }
  return 0;
}
