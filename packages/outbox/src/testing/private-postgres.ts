/**
 * A private PostgreSQL cluster with `wal_level=logical`, for the WAL relay's tests and bench: the
 * machine's own server runs with `replica`, and a test may not change it. The cluster lives in a
 * temporary directory, listens on a spare loopback port and on a socket in that directory, trusts
 * local connections, and is stopped and deleted by `stop()`. As root (CI, this machine) the cluster
 * belongs to the `postgres` user, through runuser, since initdb refuses to run as root.
 */
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./hopper-process.js";

const run = promisify(execFile);

/** Where Debian's packages put PostgreSQL 15; HOPPER_TEST_PG_BIN may name another directory. */
const pgBinDefault = "/usr/lib/postgresql/15/bin";
/** pg_ctl -w waits this long for the cluster to accept connections. */
const startTimeoutSeconds = 60;
/** How much WAL a blocked slot may hold before PostgreSQL invalidates it: the setting docs/outbox.md
 * asks for, small here so that a test never fills the disk. */
export const privateMaxSlotWalKeepSize = "256MB";

export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`, trust authentication. */
  readonly url: string;
  stop(): Promise<void>;
}

const pgBin = process.env.HOPPER_TEST_PG_BIN ?? pgBinDefault;
const runuserPath = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find((path) =>
  existsSync(path),
);
const isRoot = process.getuid?.() === 0;

/** The uid and gid of `postgres`, from /etc/passwd. */
function postgresIds(): { uid: number; gid: number } | undefined {
  for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
    const [name, , uid, gid] = line.split(":");
    if (name === "postgres") return { uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/** Why a private cluster cannot be started here, or undefined when it can. */
export function privatePostgresSkipReason(): string | undefined {
  if (!existsSync(join(pgBin, "initdb")) || !existsSync(join(pgBin, "pg_ctl"))) {
    return `no initdb/pg_ctl in ${pgBin} (set HOPPER_TEST_PG_BIN): cannot start a wal_level=logical cluster`;
  }
  if (isRoot && runuserPath === undefined) return "running as root without runuser: initdb refuses root";
  if (isRoot && postgresIds() === undefined) return "running as root and there is no postgres user";
  return undefined;
}

/** Runs a PostgreSQL program as the cluster's owner. */
async function asOwner(program: string, args: string[]): Promise<void> {
  const path = join(pgBin, program);
  if (isRoot) await run(runuserPath as string, ["-u", "postgres", "--", path, ...args]);
  else await run(path, args);
}

/** `durable`: keep PostgreSQL's fsync and synchronous commit (a bench compares it with a real
 * server); tests go without them, since a machine crash is not what they are about. */
export async function startPrivatePostgres(options: { durable?: boolean } = {}): Promise<PrivatePostgres> {
  const reason = privatePostgresSkipReason();
  if (reason) throw new Error(reason);
  const dir = mkdtempSync(join(tmpdir(), "hopper-outbox-pg-"));
  const data = join(dir, "data");
  if (isRoot) {
    const ids = postgresIds() as { uid: number; gid: number };
    chownSync(dir, ids.uid, ids.gid);
  }
  const port = await freePort();
  const settings = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses=127.0.0.1",
    "-c wal_level=logical",
    `-c max_slot_wal_keep_size=${privateMaxSlotWalKeepSize}`,
    ...(options.durable ? [] : ["-c fsync=off", "-c synchronous_commit=off"]),
  ].join(" ");
  try {
    await asOwner("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
    await asOwner("pg_ctl", [
      "-D",
      data,
      "-l",
      join(dir, "server.log"),
      "-o",
      settings,
      "-w",
      "-t",
      String(startTimeoutSeconds),
      "start",
    ]);
  } catch (error) {
    const log = existsSync(join(dir, "server.log")) ? readFileSync(join(dir, "server.log"), "utf8") : "";
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`private PostgreSQL did not start: ${(error as Error).message}\n${log}`);
  }
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await asOwner("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop };
}
