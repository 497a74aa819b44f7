/** The installed version of a package, for the report's versions line. */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);

/**
 * Reads `version` from the package's own package.json, found the way Node would find the package (its
 * `exports` may hide package.json from `require.resolve`, so the folders are searched directly).
 */
export function packageVersion(name: string): string {
  for (const folder of require.resolve.paths(name) ?? []) {
    try {
      const { version } = JSON.parse(readFileSync(join(folder, name, "package.json"), "utf8")) as {
        version?: unknown;
      };
      if (typeof version === "string") return version;
    } catch {
      // Not in this folder; try the next one up.
    }
  }
  return "unknown";
}
