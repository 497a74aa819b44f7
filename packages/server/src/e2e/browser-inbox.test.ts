/**
 * The client in a real browser: headless Chromium loads the compiled @hopper/client and @hopper/wire
 * modules as they are (no bundle), with an import map that does what a bundler does with the client's
 * `browser` field (platform.js → platform-browser.js), so the page runs with the browser's own
 * WebSocket and fetch and would fail to load `ws` or `node:*`. In the page a HopperClient with a device
 * token subscribes to its inbox with its cursor in localStorage, receives a replay and a live entry,
 * and after a reload resumes after the stored cursor. Skipped, with the reason, without Chromium.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, extname, join, normalize, sep } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Page } from "playwright-core";
import { httpJson, deviceToken as tokenFor } from "../testing/inbox-e2e.js";
import { createTempDir, type ServerProcess, startServerProcess } from "../testing/server-process.js";

const chromiumPath = "/usr/bin/chromium";
const skip = existsSync(chromiumPath)
  ? false
  : `no Chromium at ${chromiumPath} (.ci/run installs it: apt-get install chromium)`;
if (skip) console.log(`# browser-inbox.test: skipped: ${skip}`);

const secret = "browser-secret-of-at-least-thirty-two-bytes";
const cursorKey = "hopper.chat.cursor";
/** A page, a subscribe or a delivery takes well under a second; this is for a loaded CI machine. */
const pageWaitMs = 30_000;

/** The compiled client (dist/index.js's directory) and the wire package's dist, as Node resolves them. */
const clientDist = dirname(fileURLToPath(import.meta.resolve("@hopper/client")));
const wireDist = dirname(fileURLToPath(import.meta.resolve("@hopper/wire/limits")));

/**
 * The import map of the page: the client's one bare import, and the `browser` field's file
 * substitutions (`./dist/x.js` → `/client/x.js`), as a bundler applies them.
 */
function importMap(): string {
  const manifest = JSON.parse(readFileSync(join(clientDist, "..", "package.json"), "utf8")) as {
    browser: Record<string, string>;
  };
  const imports: Record<string, string> = { "@hopper/wire/limits": "/wire/limits.js" };
  for (const [from, to] of Object.entries(manifest.browser)) {
    imports[from.replace(/^\.\/dist\//, "/client/")] = to.replace(/^\.\/dist\//, "/client/");
  }
  return JSON.stringify({ imports });
}

/** The page: it loads the client and leaves `startInbox` for the test to call. */
function pageHtml(): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>hopper inbox</title>
<script type="importmap">${importMap()}</script>
<script type="module">
import { HopperClient, localStorageCursor } from "/client/index.js";
window.received = [];
window.errors = [];
window.startInbox = async (url, token) => {
  const client = new HopperClient({ url, token });
  const subscription = await client.inboxes.subscribe({
    ns: "chat",
    device: "browser",
    cursorStore: localStorageCursor(${JSON.stringify(cursorKey)}),
    onEntry: (entry) => { window.received.push({ seq: entry.seq, id: entry.id, body: entry.body }); },
    onError: (error) => { window.errors.push(String(error)); },
  });
  await subscription.ready;
  return subscription.cursor;
};
window.pageReady = true;
</script></head><body>hopper inbox</body></html>`;
}

/** Serves the page at `/`, the client's dist under `/client/` and the wire's under `/wire/`. */
function startPageServer(): Promise<Server> {
  const roots: Record<string, string> = { client: clientDist, wire: wireDist };
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://localhost").pathname;
    if (path === "/") {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      response.end(pageHtml());
      return;
    }
    const [, root, ...rest] = path.split("/");
    const dir = root === undefined ? undefined : roots[root];
    const file = dir === undefined ? undefined : normalize(join(dir, ...rest));
    if (file === undefined || !file.startsWith(dir + sep) || !existsSync(file)) {
      response.writeHead(404).end();
      return;
    }
    const type = extname(file) === ".js" ? "text/javascript; charset=utf-8" : "application/json";
    response.writeHead(200, { "content-type": type });
    response.end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const deviceToken = (sub: string) => tokenFor(secret, sub);

const http = httpJson;

function append(server: ServerProcess, id: string): Promise<unknown> {
  return http(server, "POST", "/v1/inboxes/chat/append", {
    recipients: ["ann"],
    message: { id, body: { text: id } },
  });
}

type Received = { seq: number; id: string; body: unknown };

/** The entries the page received, once there are `count` of them. */
async function receivedWhen(page: Page, count: number): Promise<Received[]> {
  await page.waitForFunction(
    (n) => (window as unknown as { received: unknown[] }).received.length >= n,
    count,
    {
      timeout: pageWaitMs,
    },
  );
  return page.evaluate(() => (window as unknown as { received: Received[] }).received);
}

describe("the client in headless Chromium", { skip }, () => {
  const dir = createTempDir();
  let hopper: ServerProcess;
  let pages: Server;
  let browser: Browser;

  before(async () => {
    hopper = await startServerProcess({ dataFile: dir.file("hopper.db"), jwtSecret: secret });
    pages = await startPageServer();
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    pages?.close();
    await hopper?.stop();
    dir.remove();
  });

  test("subscribes with a device token, keeps its cursor in localStorage, and resumes after a reload", async () => {
    const { epoch } = (await http(hopper, "PUT", "/v1/inboxes/chat", {})) as { epoch: string };
    const token = await deviceToken("ann");
    const page = await browser.newPage();
    const requested: string[] = [];
    const pageErrors: string[] = [];
    page.on("request", (request) => requested.push(new URL(request.url()).pathname));
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    const { port } = pages.address() as AddressInfo;
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction(() => "pageReady" in window, undefined, { timeout: pageWaitMs });
    const start = () =>
      page.evaluate(
        ([url, jwt]) =>
          (window as unknown as { startInbox(u: string, t: string): Promise<unknown> }).startInbox(
            url as string,
            jwt as string,
          ),
        [hopper.url, token],
      );

    // Two entries wait before the page subscribes (the replay), a third comes live.
    await append(hopper, "m1");
    await append(hopper, "m2");
    await start();
    await append(hopper, "m3");
    const first = await receivedWhen(page, 3);
    assert.deepEqual(
      first.map((entry) => [entry.seq, entry.id]),
      [
        [1, "m1"],
        [2, "m2"],
        [3, "m3"],
      ],
    );
    assert.deepEqual(first[2]?.body, { text: "m3" });
    const stored = await page.evaluate((key) => localStorage.getItem(key), cursorKey);
    assert.deepEqual(JSON.parse(stored ?? "null"), { seq: 3, epoch }, "the cursor in localStorage");

    // The reload closes the socket; what is appended meanwhile comes after the stored cursor.
    await page.reload();
    await page.waitForFunction(() => "pageReady" in window, undefined, { timeout: pageWaitMs });
    await append(hopper, "m4");
    await append(hopper, "m5");
    const cursor = await start();
    assert.deepEqual(cursor, { seq: 3, epoch }, "the subscription starts from the stored cursor");
    await append(hopper, "m6");
    const second = await receivedWhen(page, 3);
    assert.deepEqual(
      second.map((entry) => entry.seq),
      [4, 5, 6],
    );
    assert.deepEqual(await page.evaluate(() => (window as unknown as { errors: string[] }).errors), []);
    assert.deepEqual(pageErrors, []);
    // The browser loaded the browser platform, never the Node one (which imports ws and node:http).
    assert.ok(requested.includes("/client/platform-browser.js"), requested.join(" "));
    for (const nodeOnly of ["/client/platform.js", "/client/http-transport.js"]) {
      assert.ok(!requested.includes(nodeOnly), `the page requested ${nodeOnly}`);
    }
    await page.close();
  });
});
