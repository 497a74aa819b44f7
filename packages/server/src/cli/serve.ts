/** `hopper serve`: runs the broker until SIGINT or SIGTERM, then drains and closes the store. */
import { resolve } from "node:path";
import { startServer } from "../server.js";
import { recoveryReport } from "../store/log/log-salvage.js";
import { LogStore } from "../store/log/log-store.js";
import type { Durability } from "../store/store.js";

/** `--store log:<directory>`: the log store (docs/log-store.md). */
const logScheme = "log:";

export interface ServeFlags {
  host: string;
  port: string;
  data: string;
  durability: string;
  store?: string;
  pgSchema: string;
  apiKey: string[];
  jwtSecret?: string;
  jwtJwks?: string;
  logLevel: string;
  /** SQLite: start without PRAGMA quick_check (docs/reliability.md). */
  skipIntegrityCheck?: boolean;
}

export async function serve(flags: ServeFlags): Promise<void> {
  // Over 80 lines: the serve command's steps in order: flags, store, server, the banner, shutdown.
  if (flags.durability !== "fsync" && flags.durability !== "os") {
    throw new Error(`--durability is "fsync" or "os", not "${flags.durability}".`);
  }
  const port = Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port "${flags.port}" is not a port.`);
  const apiKeys = [
    ...flags.apiKey,
    ...(process.env.HOPPER_API_KEYS ?? "")
      .split(",")
      .map((key) => key.trim())
      .filter(Boolean),
  ];
  const logDir = flags.store?.startsWith(logScheme)
    ? resolve(flags.store.slice(logScheme.length))
    : undefined;
  const postgresUrl = logDir === undefined ? flags.store : undefined;
  if (postgresUrl !== undefined && !/^postgres(ql)?:\/\//.test(postgresUrl)) {
    throw new Error(
      `--store takes a postgres:// URL or log:<directory>, not "${flags.store}"; for SQLite use --data.`,
    );
  }
  if (logDir !== undefined && logDir === resolve("")) {
    throw new Error("--store log: needs a directory, as in log:./hopper-log");
  }
  const dataPath = flags.data === ":memory:" ? flags.data : resolve(flags.data);
  const server = await startServer({
    host: flags.host,
    port,
    dataPath,
    durability: flags.durability as Durability,
    integrityCheck: flags.skipIntegrityCheck !== true,
    ...(postgresUrl && { postgresUrl, postgresSchema: flags.pgSchema }),
    ...(logDir && { logDir }),
    apiKeys,
    ...deviceTokenOptions(flags),
    logLevel: flags.logLevel,
  });
  // Never silent: what recovery cut or set aside was never confirmed, but an operator should know.
  if (server.store instanceof LogStore && server.store.recovery !== undefined)
    for (const line of recoveryReport(server.store.recovery)) console.error(`log store: ${line}`);
  const store = postgresUrl
    ? `PostgreSQL ${redactPassword(postgresUrl)} (schema ${flags.pgSchema})`
    : logDir
      ? `log ${logDir} (durability ${flags.durability})`
      : `SQLite ${dataPath} (durability ${flags.durability})`;
  const auth = server.apiKeys.configured
    ? `${apiKeys.length} API key(s) configured; send Authorization: Bearer <key>`
    : "no API keys configured: serving loopback clients only (set --api-key or HOPPER_API_KEYS)";
  const devices = flags.jwtJwks
    ? `device tokens (JWT, RS256/ES256) by a key of ${resolve(flags.jwtJwks)}, at /v1/ws?token=`
    : deviceTokenOptions(flags).jwtSecret !== undefined
      ? "device tokens (JWT, HS256) with the configured secret, at /v1/ws?token="
      : "none (set --jwt-secret, HOPPER_JWT_SECRET or --jwt-jwks)";
  const curlAuth = server.apiKeys.configured ? ' -H "Authorization: Bearer $KEY"' : "";
  console.log(
    [
      `Hopper listening on ${server.url}`,
      `  store:      ${store}`,
      `  auth:       ${auth}`,
      `  devices:    ${devices}`,
      "  first message:",
      `    curl -X PUT ${server.url}/v1/queues/hello${curlAuth}`,
      `    curl ${server.url}/v1/queues/hello/messages${curlAuth} -H 'content-type: application/json' -d '{"messages":[{"body":{"hi":1}}]}'`,
      `    curl ${server.url}/v1/queues/hello/receive${curlAuth} -H 'content-type: application/json' -d '{"waitMs":1000}'`,
    ].join("\n"),
  );
  const shutdown = (signal: string) => {
    console.log(`${signal}: closing`);
    server.close().then(
      () => process.exit(0),
      (error) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", () => shutdown("SIGINT"));
  process.once("SIGTERM", () => shutdown("SIGTERM"));
}

/** `--jwt-secret` (or HOPPER_JWT_SECRET when the flag is not given) or `--jwt-jwks`, as server options. */
function deviceTokenOptions(flags: ServeFlags): { jwtSecret?: string; jwtJwksPath?: string } {
  const jwtSecret = flags.jwtSecret ?? (process.env.HOPPER_JWT_SECRET || undefined);
  if (flags.jwtJwks !== undefined) {
    if (flags.jwtSecret !== undefined) throw new Error("Give --jwt-secret or --jwt-jwks, not both.");
    return { jwtJwksPath: resolve(flags.jwtJwks) };
  }
  return jwtSecret === undefined ? {} : { jwtSecret };
}

/** A connection string as it may be printed: without its password. */
function redactPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparsable URL)";
  }
}
