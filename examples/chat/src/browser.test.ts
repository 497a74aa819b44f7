/**
 * The chat page in real Chromium (playwright-core driving /usr/bin/chromium), against the real
 * processes. Alice and Bob each have a browser context; Bob's page reaches the chat API and Hopper
 * through TCP relays that the test cuts for real, so his WebSockets drop as on a lost network. The
 * scenarios run in order on one conversation. Screenshots go to examples/chat/test-artifacts/.
 * Skipped, with the reason, without Chromium.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { ChatStack, eventually } from "./testing/stack.js";
import { TcpRelay } from "./testing/tcp-relay.js";

const chromiumPath = "/usr/bin/chromium";
const skip = existsSync(chromiumPath)
  ? false
  : `no Chromium at ${chromiumPath} (.ci/run installs it: apt-get install chromium)`;
if (skip) console.log(`# examples/chat browser.test: skipped: ${skip}`);

/** A page load, a delivery or a receipt takes well under a second; this is for a loaded machine. */
const pageWaitMs = 30_000;
const artifactsDir = fileURLToPath(new URL("../test-artifacts/", import.meta.url));

interface Frame {
  socket: number;
  payload: Record<string, unknown>;
}

/** Records every WebSocket frame the page receives, numbering its sockets in the order they opened. */
function recordFrames(page: Page): Frame[] {
  const frames: Frame[] = [];
  let sockets = 0;
  page.on("websocket", (socket) => {
    const number = sockets++;
    socket.on("framereceived", ({ payload }) => {
      if (typeof payload === "string") frames.push({ socket: number, payload: JSON.parse(payload) });
    });
  });
  return frames;
}

/** The page's errors, printed with the test's output so that a failure says what the page saw. */
function watchErrors(page: Page, name: string): void {
  page.on("pageerror", (error) => console.log(`# ${name} page error: ${error}`));
  page.on("console", (message) => {
    if (message.type() === "error") console.log(`# ${name} console: ${message.text().slice(0, 160)}`);
  });
}

async function signIn(page: Page, url: string, name: string): Promise<void> {
  await page.goto(url);
  await page.fill("#signin-name", name);
  await page.click("#signin-button");
  await page.waitForFunction(() => (window as { chatReady?: boolean }).chatReady === true, undefined, {
    timeout: pageWaitMs,
  });
}

async function openPage(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => (window as { chatReady?: boolean }).chatReady === true, undefined, {
    timeout: pageWaitMs,
  });
  return page;
}

/** The texts of the page's messages in the order shown. */
function shownTexts(page: Page): Promise<string[]> {
  return page.$$eval("#messages .message .text", (items) => items.map((item) => item.textContent ?? ""));
}

function tickOf(page: Page, text: string): Promise<string | null> {
  return page
    .locator("#messages .message", { hasText: text })
    .locator(".ticks")
    .getAttribute("data-state", { timeout: pageWaitMs });
}

async function waitForTick(page: Page, text: string, state: string): Promise<void> {
  await page.waitForSelector(`#messages .message:has-text("${text}") .ticks[data-state="${state}"]`, {
    timeout: pageWaitMs,
  });
}

/** The push vendor's accepted pushes, by idempotency key (`<message id>:<user>`). */
async function pushedKeys(stack: ChatStack): Promise<string[]> {
  const response = await fetch(`${stack.process("vendor").url}/deliveries`);
  return ((await response.json()) as { deliveries: { id: string }[] }).deliveries.map(
    (delivery) => delivery.id,
  );
}

function messageIdOf(stack: ChatStack, text: string): string {
  const [row] = stack.query<{ id: string }>("SELECT id FROM messages WHERE text = ?", text);
  if (row === undefined) throw new Error(`no message "${text}"`);
  return row.id;
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${artifactsDir}${name}.png` });
}

describe("the chat page in Chromium", { skip }, () => {
  // Over 80 lines: the scenarios share one stack of processes (and a browser), started once.
  let stack: ChatStack;
  let browser: Browser;
  let alice: BrowserContext;
  let bob: BrowserContext;
  let alicePage: Page;
  let bobPage: Page;
  let bobFrames: Frame[];
  let apiRelay: TcpRelay;
  let hopperRelay: TcpRelay;

  before(async () => {
    mkdirSync(artifactsDir, { recursive: true });
    stack = await ChatStack.start();
    // Bob's own chat API process (the same database) tells his page to reach Hopper through the relay.
    hopperRelay = await TcpRelay.start(Number(new URL(stack.hopper.url).port));
    const bobApi = await stack.start("api", { CHAT_HOPPER_PUBLIC_URL: hopperRelay.url }, "api-bob");
    apiRelay = await TcpRelay.start(Number(new URL(bobApi.url).port));
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
    alice = await browser.newContext();
    bob = await browser.newContext();
  });
  after(async () => {
    await browser?.close();
    await apiRelay?.close();
    await hopperRelay?.close();
    await stack?.stop();
  });

  test("sign in, and a conversation between Alice and Bob", async () => {
    alicePage = await alice.newPage();
    watchErrors(alicePage, "alice");
    await signIn(alicePage, `${stack.apiUrl}/`, "alice");
    await alicePage.fill("#new-members", "bob");
    await alicePage.click("#new-conversation button");
    await alicePage.waitForSelector("#composer:not([hidden])", { timeout: pageWaitMs });
    bobPage = await bob.newPage();
    bobFrames = recordFrames(bobPage);
    watchErrors(bobPage, "bob");
    await signIn(bobPage, `${apiRelay.url}/`, "bob");
    await bobPage.waitForSelector(".conversation", { timeout: pageWaitMs });
    await screenshot(alicePage, "1-alice-signed-in");
  });

  test("Bob offline: Alice sends three; Bob reconnects and gets them once each, in order, before live", async () => {
    apiRelay.cut();
    hopperRelay.cut();
    const texts = ["one while you were away", "two while you were away", "three while you were away"];
    for (const text of texts) {
      await alicePage.fill("#composer-text", text);
      await alicePage.click("#send");
    }
    for (const text of texts) await waitForTick(alicePage, text, "sent");
    assert.equal(await tickOf(alicePage, texts[2] as string), "sent", "not delivered while Bob is cut off");
    const socketsBefore = new Set(bobFrames.map((frame) => frame.socket)).size;
    apiRelay.restore();
    hopperRelay.restore();

    // Bob's page posts delivered receipts once it has them; Alice's ticks say so.
    for (const text of texts) await waitForTick(alicePage, text, "delivered");
    const replayed = bobFrames.filter((frame) => frame.socket >= socketsBefore);
    const entryIds: string[] = [];
    let liveAt = -1;
    replayed.forEach((frame, index) => {
      if (frame.payload.op === "inbox.entry") {
        for (const entry of frame.payload.entries as { id: string; body: { message?: { text: string } } }[]) {
          if (entry.body.message && liveAt === -1) entryIds.push(entry.body.message.text);
        }
      }
      if (frame.payload.op === "inbox.live" && liveAt === -1) liveAt = index;
    });
    assert.notEqual(liveAt, -1, "the reconnected subscription went live");
    assert.deepEqual(entryIds, texts, "the three, in order, replayed before inbox.live");

    // Bob had no device connected when they were committed: the push worker notified him of each.
    const keys = texts.map((text) => `${messageIdOf(stack, text)}:bob`);
    await eventually("a push to Bob for each", async () => {
      const pushed = await pushedKeys(stack);
      return keys.every((key) => pushed.includes(key)) ? true : undefined;
    });

    // Opening the conversation shows each once, in order, and reads them.
    await bobPage.click(".conversation");
    await bobPage.waitForSelector(`#messages .message:has-text("${texts[2]}")`, { timeout: pageWaitMs });
    assert.deepEqual(await shownTexts(bobPage), texts);
    for (const text of texts) await waitForTick(alicePage, text, "read");
    await screenshot(bobPage, "2-bob-after-reconnect");
    await screenshot(alicePage, "2-alice-read-ticks");
  });

  test("typing: the indicator appears on Bob's page and goes", async () => {
    await alicePage.type("#composer-text", "I am typ");
    await bobPage.waitForSelector("#typing:not([hidden])", { timeout: pageWaitMs });
    assert.match((await bobPage.textContent("#typing")) ?? "", /alice is typing/);
    await screenshot(bobPage, "3-bob-sees-typing");
    // Alice stops: after her idle time her page says so, and Bob's indicator goes.
    await bobPage.waitForSelector("#typing[hidden]", { state: "attached", timeout: pageWaitMs });
    // Cleared without an input event, which would say "typing" again.
    await alicePage.$eval("#composer-text", (input) => {
      (input as HTMLInputElement).value = "";
    });
  });

  test("a send whose answer is lost is sent again with its id and shows once", async () => {
    const statuses: number[] = [];
    await alicePage.route("**/api/conversations/*/messages", async (route) => {
      if (route.request().method() !== "POST") return route.continue();
      const response = await route.fetch();
      statuses.push(response.status());
      // The API stored the first attempt; its answer never reaches the page.
      if (statuses.length === 1) return route.abort("connectionreset");
      return route.fulfill({ response });
    });
    const text = "my answer was lost";
    await alicePage.fill("#composer-text", text);
    await alicePage.click("#send");
    await eventually("the page to send again", () => (statuses.length >= 2 ? true : undefined));
    await alicePage.unroute("**/api/conversations/*/messages");
    assert.deepEqual(statuses.slice(0, 2), [201, 200], "stored, then answered as the stored message");
    await waitForTick(alicePage, text, "read");
    const count = (texts: string[]) => texts.filter((shown) => shown === text).length;
    assert.equal(count(await shownTexts(alicePage)), 1, "once on Alice's page");
    await bobPage.waitForSelector(`#messages .message:has-text("${text}")`, { timeout: pageWaitMs });
    assert.equal(count(await shownTexts(bobPage)), 1, "once on Bob's page");
    const stored = stack.query<{ n: number }>("SELECT count(*) AS n FROM messages WHERE text = ?", text);
    assert.equal(stored[0]?.n, 1, "one row in the chat database");
    // Bob was connected: once the push worker has settled every event, none of them pushed this to him.
    const [committed] = stack.query<{ n: number }>("SELECT count(*) AS n FROM messages");
    await eventually("the push worker to settle every event", async () => {
      const { stats } = await stack.hopperClient.getQueue("push");
      const open = stats.available + stats.delayed + stats.inFlight;
      return open === 0 && stats.acked + stats.deadLettered === committed?.n ? true : undefined;
    });
    assert.ok(
      !(await pushedKeys(stack)).includes(`${messageIdOf(stack, text)}:bob`),
      "no push to a connected device",
    );
    await screenshot(alicePage, "4-alice-lost-answer");
  });

  test("a message written offline is sent when the page is opened again online", async () => {
    await alice.setOffline(true);
    const text = "written on the train";
    await alicePage.fill("#composer-text", text);
    await alicePage.click("#send");
    await waitForTick(alicePage, text, "pending");
    await screenshot(alicePage, "5-alice-offline-pending");
    await alicePage.close();
    await alice.setOffline(false);
    alicePage = await openPage(alice, `${stack.apiUrl}/`);
    watchErrors(alicePage, "alice (reopened)");
    await bobPage.waitForSelector(`#messages .message:has-text("${text}")`, { timeout: pageWaitMs });
    await alicePage.click(".conversation");
    await waitForTick(alicePage, text, "read");
    const shown = (await shownTexts(alicePage)).filter((item) => item === text);
    assert.equal(shown.length, 1);
    await screenshot(alicePage, "5-alice-sent-after-reopen");
    await screenshot(bobPage, "5-bob-got-it");
    await eventually("the waiting count to clear", async () =>
      (await alicePage.textContent("#status"))?.includes("waiting") ? undefined : true,
    );
  });
  test("one user with two tabs gets every message in both", async () => {
    // A second tab of Bob's: the same session (localStorage), a device of its own (sessionStorage).
    const secondTab = await openPage(bob, `${apiRelay.url}/`);
    watchErrors(secondTab, "bob (second tab)");
    await secondTab.click(".conversation");
    const text = "for both of Bob's tabs";
    await alicePage.fill("#composer-text", text);
    await alicePage.click("#send");
    for (const page of [bobPage, secondTab]) {
      await page.waitForSelector(`#messages .message:has-text("${text}")`, { timeout: pageWaitMs });
      assert.equal((await shownTexts(page)).filter((shown) => shown === text).length, 1);
    }
    const devices = await stack.inboxes.recipient("bob");
    assert.ok(devices.devices.length >= 2, "each tab reads with its own cursor");
    await screenshot(secondTab, "6-bob-second-tab");
    await secondTab.close();
  });

  test("a gap (Bob's entries trimmed while he was away) reloads history, once each, in order", async () => {
    // Two entries per recipient at most, so four messages overflow Bob's log while he is cut off.
    await stack.inboxes.put({ maxDepth: 2 });
    apiRelay.cut();
    hopperRelay.cut();
    const socketsBefore = new Set(bobFrames.map((frame) => frame.socket)).size;
    const texts = ["gap one", "gap two", "gap three", "gap four"];
    for (const text of texts) {
      await alicePage.fill("#composer-text", text);
      await alicePage.click("#send");
    }
    for (const text of texts) await waitForTick(alicePage, text, "sent");
    apiRelay.restore();
    hopperRelay.restore();
    await bobPage.waitForSelector(`#messages .message:has-text("${texts[3]}")`, { timeout: pageWaitMs });
    await eventually("the first of them from history", async () =>
      (await shownTexts(bobPage)).includes(texts[0] as string) ? true : undefined,
    );
    const gaps = bobFrames.filter(
      (frame) => frame.socket >= socketsBefore && frame.payload.op === "inbox.gap",
    );
    assert.ok(gaps.length >= 1, "the reconnected subscription said inbox.gap");
    const shown = (await shownTexts(bobPage)).filter((text) => texts.includes(text));
    assert.deepEqual(shown, texts, "each once, in order");
    await stack.inboxes.put({ maxDepth: 10_000 });
    await screenshot(bobPage, "7-bob-after-gap");
  });

  test("the ops strip shows the figures, refreshed, without Hopper's API key", async () => {
    const ops = await alice.newPage();
    watchErrors(ops, "ops");
    await ops.goto(`${stack.apiUrl}/ops`);
    await ops.waitForSelector("body[data-loaded='true']", { timeout: pageWaitMs });
    const first = await ops.textContent("#updated");
    await ops.waitForFunction((before) => document.getElementById("updated")?.textContent !== before, first, {
      timeout: pageWaitMs,
    });
    const users = (await ops.textContent("#users")) ?? "";
    assert.match(users, /alice/);
    assert.match(users, /bob/);
    for (const queue of [
      "realtime",
      "push",
      "integrations",
      "realtime.dlq",
      "push.dlq",
      "integrations.dlq",
    ]) {
      assert.ok(((await ops.textContent("#queues")) ?? "").includes(queue), queue);
    }
    assert.ok(!(await ops.content()).includes(stack.env.HOPPER_API_KEY as string), "no API key in the page");
    await screenshot(ops, "8-ops-strip");
    await ops.close();
  });
});
