/**
 * The push and integrations workers against stand-ins that fail on purpose, through real processes.
 *
 * - Push, with a vendor that fails 30 % of requests and has revoked carol's token: every push to a
 *   member with no connected device is delivered exactly once (the vendor sees one accepted request per
 *   idempotency key), or, for the revoked token, its event is dead-lettered at once with the reason;
 *   none is lost, and nothing stays in the queue.
 * - Integrations, with a webhook receiver that fails half its requests: every message is indexed for
 *   search once and reaches the webhook once, although the events are delivered several times.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ChatStack, eventually } from "./testing/stack.js";

const messagesPerConversation = 12;

interface Delivery {
  id: string;
  attempts: number;
  /** What the stand-in received: for the webhook, the MessageCreated event. */
  payload?: { messageId?: string };
}

async function deliveries(url: string): Promise<Delivery[]> {
  const response = await fetch(`${url}/deliveries`);
  return ((await response.json()) as { deliveries: Delivery[] }).deliveries;
}

describe("the push and integrations workers against failing stand-ins", () => {
  // Over 80 lines: the scenarios share one stack of processes (and a browser), started once.
  let stack: ChatStack;
  let alice: string;
  let group: string;
  let withCarol: string;
  const sent: { group: string[]; withCarol: string[] } = { group: [], withCarol: [] };

  before(async () => {
    stack = await ChatStack.start({
      roles: ["api", "relay", "push", "integrations"],
      vendor: {
        STANDIN_FAIL_RATE: "0.3",
        STANDIN_DELAY_MS_MAX: "40",
        STANDIN_REVOKED: "push-carol",
        STANDIN_SEED: "3",
      },
      webhook: { STANDIN_FAIL_RATE: "0.5", STANDIN_DELAY_MS_MAX: "20", STANDIN_SEED: "4" },
    });
    alice = await stack.signIn("alice");
    group = await stack.conversation(alice, ["bob", "dave"]);
    withCarol = await stack.conversation(alice, ["carol"]);
    for (let index = 0; index < messagesPerConversation; index += 1) {
      for (const [list, conversation, text] of [
        [sent.group, group, `group message ${index}`],
        [sent.withCarol, withCarol, `hello carol ${index}`],
      ] as const) {
        const answer = await stack.send(alice, conversation, text);
        assert.equal(answer.status, 201, JSON.stringify(answer.body));
        list.push(answer.body.message.id);
      }
    }
  });
  after(async () => {
    await stack?.stop();
  });

  test("every push is delivered once, or dead-lettered with its reason; none is lost", async () => {
    const vendorUrl = stack.process("vendor").url;
    const expected = sent.group.flatMap((id) => [`${id}:bob`, `${id}:dave`]);
    const delivered = await eventually(
      "every group push to reach the vendor",
      async () => {
        const got = await deliveries(vendorUrl);
        return expected.every((id) => got.some((delivery) => delivery.id === id)) ? got : undefined;
      },
      60_000,
    );
    for (const delivery of delivered) assert.equal(delivery.attempts, 1, `${delivery.id} was accepted once`);
    assert.equal(delivered.length, expected.length, "no push to anyone else (carol's token is revoked)");

    await eventually("the outbox to be published", () => {
      const rows = stack.query<{ n: number }>(
        "SELECT count(*) AS n FROM hopper_outbox WHERE state = 'pending'",
      );
      return rows[0]?.n === 0 ? true : undefined;
    });
    await eventually("the push queue to drain", async () => {
      const { stats } = await stack.hopperClient.getQueue("push");
      return stats.available + stats.delayed + stats.inFlight === 0 ? stats : undefined;
    });
    // carol: the first pushes to her revoked token dead-letter their event with the reason; once the
    // token is deleted, later messages have nothing to push to.
    const outcomes = stack.query<{ messageId: string; outcome: string }>(
      "SELECT message_id AS messageId, outcome FROM push_outcomes WHERE user_id = 'carol'",
    );
    assert.equal(outcomes.length, sent.withCarol.length, "an outcome for every message to carol");
    const revoked = outcomes.filter((row) => row.outcome === "revoked").map((row) => row.messageId);
    assert.ok(revoked.length >= 1, "the vendor refused carol's token");
    for (const row of outcomes) assert.ok(["revoked", "no_token"].includes(row.outcome), row.outcome);
    const deadLetters = await stack.hopperClient.peek("push.dlq", { limit: 100 });
    assert.deepEqual(
      deadLetters.map((message) => (message.body as { messageId: string }).messageId).sort(),
      [...revoked].sort(),
      "each event with a revoked token is in push.dlq",
    );
    for (const message of deadLetters) {
      assert.equal(message.headers["x-dead-letter-reason"], "push_token_revoked:carol");
      assert.equal(message.headers["x-delivery-count"], "1", "dead-lettered at once, not retried");
    }
    const { stats } = await stack.hopperClient.getQueue("push");
    assert.ok(stats.redelivered > 0, "the vendor's failures were retried");
  });

  test("the search index and the webhook each take every message once, failing independently", async () => {
    const all = [...sent.group, ...sent.withCarol];
    const webhookUrl = stack.process("webhook").url;
    let got: Delivery[] = [];
    const received = await eventually(
      "every event at the webhook",
      async () => {
        got = await deliveries(webhookUrl);
        return got.length >= all.length ? got : undefined;
      },
      60_000,
    ).catch((error) => {
      throw new Error(`${error}: ${got.length} of ${all.length}\n${stack.process("integrations").output()}`);
    });
    assert.equal(received.length, all.length);
    for (const delivery of received)
      assert.equal(delivery.attempts, 1, `${delivery.id} reached the webhook once`);
    const indexed = stack.query<{ messageId: string; n: number }>(
      "SELECT message_id AS messageId, count(*) AS n FROM message_search GROUP BY message_id",
    );
    assert.deepEqual(indexed.map((row) => row.messageId).sort(), [...all].sort(), "every message indexed");
    for (const row of indexed) assert.equal(row.n, 1, `${row.messageId} indexed once`);
    const { stats } = await stack.hopperClient.getQueue("integrations");
    assert.ok(stats.redelivered > 0, "the webhook's failures brought events back");
    const search = await stack.api<{ results: unknown[] }>("GET", "/api/search?q=carol", alice);
    assert.equal(search.body.results.length, sent.withCarol.length, "search finds them");
  });

  test("while the search index fails, the webhook still takes each new message; then the index catches up", async () => {
    // A real fault: the index's table is renamed away, so every index write fails until it is back.
    stack.exec("ALTER TABLE message_search RENAME TO message_search_away");
    const webhookUrl = stack.process("webhook").url;
    const before = (await deliveries(webhookUrl)).length;
    const fresh: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const answer = await stack.send(alice, withCarol, `sent while the index is down ${index}`);
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      fresh.push(answer.body.message.id);
    }
    const reached = await eventually(
      "the new messages at the webhook while the index fails",
      async () => {
        const got = await deliveries(webhookUrl);
        return got.length >= before + fresh.length ? got : undefined;
      },
      60_000,
    );
    for (const id of fresh)
      assert.ok(
        reached.some((delivery) => delivery.payload?.messageId === id),
        `${id} at the webhook`,
      );
    const indexedWhileDown = stack.query<{ n: number }>(
      `SELECT count(*) AS n FROM message_search_away WHERE message_id IN (${fresh.map(() => "?").join(",")})`,
      ...fresh,
    );
    assert.equal(indexedWhileDown[0]?.n, 0, "nothing was indexed while the index failed");
    stack.exec("ALTER TABLE message_search_away RENAME TO message_search");
    await eventually(
      "the new messages indexed once the index is back",
      async () => {
        const rows = stack.query<{ messageId: string; n: number }>(
          `SELECT message_id AS messageId, count(*) AS n FROM message_search
           WHERE message_id IN (${fresh.map(() => "?").join(",")}) GROUP BY message_id`,
          ...fresh,
        );
        return rows.length === fresh.length && rows.every((row) => row.n === 1) ? rows : undefined;
      },
      60_000,
    );
  });
});
