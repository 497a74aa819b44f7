/**
 * The packages as another project gets them: `npm pack` of @hopper/wire, @hopper/client and
 * @hopper/server, the three tarballs installed together, in one command, into an empty project, where
 * a TypeScript file that uses HopperClient type-checks with this repository's tsc and the installed
 * `hopper --help` runs. Every @hopper package must come from the tarballs, none from the registry. The
 * other dependencies come from npm's cache (--prefer-offline), which this repository's npm install
 * filled; install scripts are not run, since neither the type-check nor --help loads a native module.
 */
import assert from "node:assert/strict";
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type TestContext, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createTempDir } from "../testing/server-process.js";

/** From packages/server/dist/e2e: the repository's root. */
const rootPath = fileURLToPath(new URL("../../../../", import.meta.url));
const tscPath = join(rootPath, "node_modules", ".bin", "tsc");
const version = "0.1.0";

/** Packing takes about 2 s and the type-check under 20 s. */
const commandTimeoutMs = 60_000;
/** About 10 s from a warm cache; minutes when npm must fetch the server's dependencies again. */
const installTimeoutMs = 300_000;

/** npm's words for a registry it cannot reach. */
const offlinePattern = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network/i;

function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = commandTimeoutMs,
): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, encoding: "utf8", timeout: timeoutMs });
}

function output(result: SpawnSyncReturns<string>): string {
  return `${result.stdout}\n${result.stderr}`;
}

const consumerSource = `import { HopperClient, type QueueInfo, type ReceivedMessage } from "@hopper/client";

const client = new HopperClient({ url: "http://127.0.0.1:7171" });
const { queue }: { queue: QueueInfo } = await client.putQueue("orders", { visibilityTimeoutMs: 30_000 });
const messages: ReceivedMessage[] = await client.receive("orders", { max: 10 });
const waiting: number = queue.stats.available + messages.length;
// @ts-expect-error: a queue's kind is "standard" or "fifo", as the wire's schema says.
const kind: QueueInfo["kind"] = "other";
console.log(waiting, kind);
`;

/** Installs the tarballs in one command; skips the test when npm cannot reach a registry it needs. */
function install(t: TestContext, appPath: string, tarballs: string[]): boolean {
  const args = ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", ...tarballs];
  const result = run("npm", args, appPath, installTimeoutMs);
  if (result.status !== 0 && offlinePattern.test(output(result))) {
    const reason = `npm install --prefer-offline could not reach the registry: ${output(result).trim().slice(-300)}`;
    console.log(`skipped: ${reason}`);
    t.skip(reason);
    return false;
  }
  assert.equal(result.status, 0, output(result));
  return true;
}

/** Every @hopper package in the project's lockfile was resolved from a tarball beside it. */
function assertLocal(appPath: string, names: string[]): void {
  const lock = JSON.parse(readFileSync(join(appPath, "package-lock.json"), "utf8")) as {
    packages: Record<string, { resolved?: string; version?: string }>;
  };
  const hopper = Object.entries(lock.packages).filter(([path]) => path.includes("node_modules/@hopper/"));
  assert.deepEqual(
    hopper.map(([path]) => path.replace(/^.*node_modules\/@hopper\//, "")).sort(),
    names.sort(),
  );
  for (const [path, entry] of hopper) {
    assert.match(entry.resolved ?? "", /^file:\.\.\/hopper-[a-z]+-0\.1\.0\.tgz$/, `${path} resolved`);
    assert.equal(entry.version, version, `${path} version`);
  }
}

test("npm pack of wire, client and server installs in an empty project and type-checks", {
  timeout: installTimeoutMs + 4 * commandTimeoutMs,
}, async (t) => {
  const dir = createTempDir("hopper-pack-");
  try {
    const packArgs = ["pack", "--silent", "--pack-destination", dir.path];
    for (const name of ["wire", "client", "server"]) packArgs.push("-w", `packages/${name}`);
    const packed = run("npm", packArgs, rootPath);
    assert.equal(packed.status, 0, output(packed));
    const tarballs = ["wire", "client", "server"].map((name) => `../hopper-${name}-${version}.tgz`);

    const serverFiles = run("tar", ["tzf", dir.file(`hopper-server-${version}.tgz`)], dir.path);
    assert.equal(serverFiles.status, 0, output(serverFiles));
    for (const file of ["package/bin/hopper.js", "package/dist/cli/main.js", "package/dist/index.d.ts"]) {
      assert.ok(serverFiles.stdout.split("\n").includes(file), `the server's tarball holds ${file}`);
    }
    assert.doesNotMatch(serverFiles.stdout, /\.test\.js\n/, "no tests in the tarball");
    const serverPackage = JSON.parse(readFileSync(join(rootPath, "packages/server/package.json"), "utf8"));
    assert.equal(serverPackage.dependencies["@hopper/client"], version);
    assert.equal(serverPackage.dependencies["@hopper/wire"], version);

    const appPath = dir.file("app");
    run("mkdir", [appPath], dir.path);
    writeFileSync(
      join(appPath, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    if (!install(t, appPath, tarballs)) return;
    assertLocal(appPath, ["wire", "client", "server"]);

    writeFileSync(join(appPath, "main.ts"), consumerSource);
    const tsconfig = {
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        // A project of its own would install @types/node; this one borrows the repository's.
        typeRoots: [join(rootPath, "node_modules", "@types")],
        types: ["node"],
      },
      files: ["main.ts"],
    };
    writeFileSync(join(appPath, "tsconfig.json"), JSON.stringify(tsconfig));
    const checked = run(tscPath, ["-p", "."], appPath);
    assert.equal(checked.status, 0, output(checked));

    const help = run(join(appPath, "node_modules", ".bin", "hopper"), ["--help"], appPath);
    assert.equal(help.status, 0, output(help));
    assert.match(help.stdout, /^Usage: hopper/m);
  } finally {
    dir.remove();
  }
});
