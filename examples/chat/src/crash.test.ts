/**
 * Crashes through real processes: each scenario kill -9s one process of the application at an exact
 * point (CHAT_PAUSE_AT makes it stop there and say so) and starts it again; every message must reach
 * every member's inbox exactly once, and the conversation's sequence must go on without a hole.
 *
 * - the API, between its commit and the relay's publish: the outbox row is committed, the relay
 *   publishes it later, and the page's resend of the same UUID finds the stored message;
 * - the relay, between Hopper's confirm and its mark: it publishes the row again with the same
 *   dedupId, and the queues answer `duplicate`;
 * - the realtime worker, between its inbox append and its ack: the event is delivered again, and the
 *   append is answered `duplicate`.
 *
 * Bob's page is open in Chromium throughout (when there is one), and at the end shows every message
 * once, in order.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { entryIds } from "./config.js";
import { ChatStack, eventually } from "./testing/stack.js";

const members = ["alice", "bob", "carol"];
const chromiumPath = "/usr/bin/chromium";
const noBrowser = existsSync(chromiumPath) ? false : `no Chromium at ${chromiumPath}`;
if (noBrowser) console.log(`# examples/chat crash.test: the on-screen check is skipped: ${noBrowser}`);
/** A page load or a delivery takes well under a second; this is for a loaded machine. */
const pageWaitMs = 30_000;

describe("crashes of the application's processes", () => {
  // Over 80 lines: the scenarios share one stack of processes (and a browser), started once.
  let stack: ChatStack;
  let alice: string;
  let conversation: string;
  let browser: Browser | undefined;
  let bobPage: Page | undefined;
  const texts: string[] = [];

  before(async () => {
    stack = await ChatStack.start({ roles: ["api", "relay", "realtime"] });
    alice = await stack.signIn("alice");
    await stack.signIn("bob");
    conversation = await stack.conversation(alice, ["bob", "carol"]);
    if (noBrowser) return;
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
    bobPage = await browser.newPage();
    await bobPage.goto(`${stack.apiUrl}/`);
    await bobPage.fill("#signin-name", "bob");
    await bobPage.click("#signin-button");
    await bobPage.click(".conversation", { timeout: pageWaitMs });
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /** Sends through the API as the page would, and remembers the text for the on-screen check. */
  function send(text: string, id?: string) {
    if (!texts.includes(text)) texts.push(text);
    return stack.send(alice, conversation, text, id);
  }

  /**
   * Waits until every member's inbox holds each message, then checks that it holds it once. Bob's
   * page acks what it reads, which trims his log, so with a page he is checked on screen instead.
   */
  async function reachesEveryMemberOnce(messageIds: string[]): Promise<void> {
    for (const member of members.filter((name) => bobPage === undefined || name !== "bob")) {
      const ids = await eventually(`${member}'s inbox to hold ${messageIds.length} messages`, async () => {
        const held = await stack.inboxIds(member);
        return messageIds.every((id) => held.includes(entryIds.message(id))) ? held : undefined;
      });
      for (const id of messageIds) {
        assert.equal(
          ids.filter((held) => held === entryIds.message(id)).length,
          1,
          `${member} holds ${id} once`,
        );
      }
    }
  }

  async function queueStats(queue: string) {
    return (await stack.hopperClient.getQueue(queue)).stats;
  }

  test("kill -9 of the API between its commit and the relay", async () => {
    await stack.process("relay").stop();
    const api = await stack.start("api", { CHAT_PAUSE_AT: "api-after-commit" });
    const id = randomUUID();
    const attempt = send("committed, then the API died", id).then(
      () => "answered",
      () => "no answer",
    );
    await api.waitFor(/^paused api-after-commit/m);
    await api.kill9();
    assert.equal(await attempt, "no answer");
    const pending = stack.query<{ n: number }>(
      "SELECT count(*) AS n FROM hopper_outbox WHERE state = 'pending'",
    );
    assert.equal(pending[0]?.n, 1, "the message's outbox row is committed and waits");

    await stack.start("api");
    await stack.start("relay");
    const resent = await send("committed, then the API died", id);
    assert.equal(resent.status, 200);
    assert.equal(resent.body.duplicate, true, "the resend finds the stored message");
    const next = await send("after the API came back");
    assert.equal(next.body.message.seq, resent.body.message.seq + 1, "the sequence goes on");
    await reachesEveryMemberOnce([id, next.body.message.id]);
  });

  test("kill -9 of the relay between Hopper's confirm and its mark", async () => {
    const publishedBefore = (await queueStats("realtime")).published;
    const relay = await stack.start("relay", { CHAT_PAUSE_AT: "relay-after-confirm" });
    const sent = await send("confirmed, then the relay died");
    await relay.waitFor(/^paused relay-after-confirm/m);
    await relay.kill9();
    const unmarked = stack.query<{ n: number }>(
      "SELECT count(*) AS n FROM hopper_outbox WHERE state = 'pending'",
    );
    assert.equal(unmarked[0]?.n, 1, "the row is still pending: it will be published again");

    await stack.start("relay");
    await eventually("the row to be marked sent", () => {
      const rows = stack.query<{ n: number }>(
        "SELECT count(*) AS n FROM hopper_outbox WHERE state = 'pending'",
      );
      return rows[0]?.n === 0 ? true : undefined;
    });
    await reachesEveryMemberOnce([sent.body.message.id]);
    assert.equal(
      (await queueStats("realtime")).published,
      publishedBefore + 1,
      "the second publish was a duplicate",
    );
  });

  test("kill -9 of the realtime worker between its inbox append and its ack", async () => {
    const before = await stack.inboxes.get();
    const worker = await stack.start("realtime", { CHAT_PAUSE_AT: "realtime-after-append" });
    const sent = await send("appended, then the worker died");
    await worker.waitFor(/^paused realtime-after-append/m);
    await worker.kill9();
    // The entries are there before the ack that never came.
    await reachesEveryMemberOnce([sent.body.message.id]);

    await stack.start("realtime");
    await eventually("the event to be acked", async () => {
      const stats = await queueStats("realtime");
      return stats.available + stats.inFlight + stats.delayed === 0 && stats.redelivered > 0
        ? true
        : undefined;
    });
    const afterRestart = await stack.inboxes.get();
    assert.equal(
      (afterRestart.stats.duplicates ?? 0) - (before.stats.duplicates ?? 0),
      members.length,
      "the second append was a duplicate for every member",
    );
    await reachesEveryMemberOnce([sent.body.message.id]);
  });

  test("Bob's page, open throughout, shows every message once, in order", { skip: noBrowser }, async () => {
    const page = bobPage as Page;
    const last = texts.at(-1) as string;
    await page.waitForSelector(`#messages .message:has-text("${last}")`, { timeout: pageWaitMs });
    const shown = await page.$$eval("#messages .message .text", (items) =>
      items.map((item) => item.textContent),
    );
    assert.deepEqual(shown, texts);
  });
});
