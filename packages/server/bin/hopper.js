#!/usr/bin/env node
// The `hopper` command's entry: plain JavaScript that is committed, so that npm links
// node_modules/.bin/hopper at install time, before anything is built. It runs the compiled CLI, or
// says how to build it.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const mainUrl = new URL("../dist/cli/main.js", import.meta.url);

if (!existsSync(fileURLToPath(mainUrl))) {
  process.stderr.write(
    `hopper: ${fileURLToPath(mainUrl)} is missing; run npm run build first (in the repository's root).\n`,
  );
  process.exit(1);
}
await import(mainUrl.href);
