/**
 * The web page's files: the app's own (public/), and the compiled @hopper/client and @hopper/wire
 * modules as they are, loaded by the browser as ES modules with no bundler. The HTML gets an import
 * map that does what a bundler does with the client's `browser` field (platform.js →
 * platform-browser.js), so the page runs on the browser's own WebSocket and fetch. Only files under the
 * three roots are served; a path that leaves its root is a 404.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, extname, join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";

const publicDir = fileURLToPath(new URL("../../public/", import.meta.url));
const clientDist = dirname(fileURLToPath(import.meta.resolve("@hopper/client")));
const wireDist = dirname(fileURLToPath(import.meta.resolve("@hopper/wire/limits")));

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".json": "application/json",
};

/** The import map: the client's one bare import, and its `browser` field's file substitutions. */
function importMap(): string {
  const manifest = JSON.parse(readFileSync(join(clientDist, "..", "package.json"), "utf8")) as {
    browser: Record<string, string>;
  };
  const imports: Record<string, string> = {
    "@hopper/client": "/hopper/client/index.js",
    "@hopper/wire/limits": "/hopper/wire/limits.js",
  };
  for (const [from, to] of Object.entries(manifest.browser)) {
    imports[from.replace(/^\.\/dist\//, "/hopper/client/")] = to.replace(/^\.\/dist\//, "/hopper/client/");
  }
  return JSON.stringify({ imports });
}

function page(name: string): string {
  const html = readFileSync(join(publicDir, name), "utf8");
  return html.replace("<!--importmap-->", `<script type="importmap">${importMap()}</script>`);
}

/** The file under `root` that `rest` names, or undefined when there is none or it leaves `root`. */
function fileUnder(root: string, rest: string): string | undefined {
  const file = normalize(join(root, rest));
  return file.startsWith(root.endsWith(sep) ? root : root + sep) && existsSync(file) ? file : undefined;
}

export function staticRoutes(app: FastifyInstance): void {
  app.get("/", async (_request, reply) =>
    reply.type(contentTypes[".html"] as string).send(page("index.html")),
  );
  app.get("/ops", async (_request, reply) =>
    reply.type(contentTypes[".html"] as string).send(page("ops.html")),
  );
  const roots: [string, string][] = [
    ["/app/", publicDir],
    ["/hopper/client/", clientDist],
    ["/hopper/wire/", wireDist],
  ];
  for (const [prefix, root] of roots) {
    app.get<{ Params: { "*": string } }>(`${prefix}*`, async (request, reply) => {
      const file = fileUnder(root, request.params["*"]);
      const type = file === undefined ? undefined : contentTypes[extname(file)];
      if (file === undefined || type === undefined) {
        return reply.code(404).send({ error: { code: "not_found", message: "No such file." } });
      }
      return reply.type(type).header("cache-control", "no-cache").send(readFileSync(file));
    });
  }
}
