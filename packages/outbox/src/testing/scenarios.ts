/**
 * The kill -9 scenarios that both relay modes must pass, written once: the test files give what
 * differs (how the relay is started, what the database shows after the kill, how an effect is
 * applied with processOnce).
 */
import assert from "node:assert/strict";
import type { HopperClient, ReceivedMessage } from "@hopper/client";
import { outboxIdHeader } from "../event.js";
import type { Relay } from "../relay.js";
import { receiveAll, spawnOutboxChild } from "./helpers.js";

export interface CrashScenario {
  hopper: HopperClient;
  hopperUrl: string;
  /** The environment of an outbox child (testing/outbox-child.ts) on this test's database. */
  childEnv(extra: Record<string, string>): Record<string, string>;
  startRelay(): Relay;
  /** What the database must show once the children are dead. */
  checkAfterKill?(): Promise<void>;
}

/**
 * The application is killed right after its commit, and the relay, holding the event before its
 * publish, is killed too: the restarted relay publishes it.
 */
export async function appKilledAfterCommit(scenario: CrashScenario, queue: string): Promise<void> {
  const relayChild = spawnOutboxChild(
    scenario.childEnv({ OUTBOX_TEST_ROLE: "relay", OUTBOX_TEST_PAUSE_AT: "before-publish" }),
  );
  const appChild = spawnOutboxChild(
    scenario.childEnv({
      OUTBOX_TEST_ROLE: "app",
      OUTBOX_TEST_PAUSE_AT: "after-commit",
      OUTBOX_TEST_EVENTS: JSON.stringify([{ destination: { queue }, body: { order: 1 } }]),
    }),
  );
  const committed = await appChild.paused;
  await appChild.kill9();
  const taken = await relayChild.paused;
  assert.deepEqual(taken.ids, committed.ids, "the relay holds the committed event");
  await relayChild.kill9();
  assert.deepEqual(await scenario.hopper.peek(queue), [], "nothing was published before the kill");
  await scenario.checkAfterKill?.();

  const relay = scenario.startRelay();
  try {
    const [message] = await receiveAll(scenario.hopperUrl, queue, 1);
    assert.equal(message?.headers[outboxIdHeader], committed.ids[0]);
    assert.deepEqual(message?.body, { order: 1 });
  } finally {
    await relay.stop();
  }
}

/**
 * The relay is killed after Hopper confirmed event `id` and before it marked it sent (or acknowledged
 * the slot): the restarted relay publishes it again, and a processOnce consumer (`apply`, answering
 * whether the effect ran) applies it once.
 */
export async function relayKilledAfterConfirm(
  scenario: CrashScenario,
  queue: string,
  id: string,
  consumer: { apply(message: ReceivedMessage): Promise<boolean>; countEffects(): Promise<number> },
): Promise<void> {
  const effectsBefore = await consumer.countEffects();
  const relayChild = spawnOutboxChild(
    scenario.childEnv({ OUTBOX_TEST_ROLE: "relay", OUTBOX_TEST_PAUSE_AT: "after-confirm" }),
  );
  assert.deepEqual((await relayChild.paused).ids, [id]);
  await relayChild.kill9();
  await scenario.checkAfterKill?.();

  const relay = scenario.startRelay();
  try {
    const messages = await receiveAll(scenario.hopperUrl, queue, 2);
    assert.deepEqual(
      messages.map((message) => message.headers[outboxIdHeader]),
      [id, id],
    );
    assert.notEqual(messages[0]?.id, messages[1]?.id, "two messages in the broker");
    const applied: boolean[] = [];
    for (const message of messages) applied.push(await consumer.apply(message));
    assert.deepEqual(applied, [true, false]);
    assert.equal((await consumer.countEffects()) - effectsBefore, 1);
  } finally {
    await relay.stop();
  }
}
