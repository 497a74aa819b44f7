/** The signal hub: live subscribers only, nothing kept, and its bounds. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { type Signal, SignalHub } from "./signals.js";

function isCode(code: string) {
  return (error: unknown) => error instanceof HopperError && error.code === code;
}

test("a publish reaches the listeners subscribed at that moment, and no one later", () => {
  const hub = new SignalHub();
  const first: Signal[] = [];
  const second: Signal[] = [];
  hub.subscribe("room.1", (signal) => first.push(signal) > 0);
  hub.subscribe("room.1", (signal) => second.push(signal) > 0);
  hub.subscribe("room.2", () => assert.fail("another channel"));
  assert.equal(hub.publish("room.1", { typing: "ann" }), 2);
  assert.deepEqual(
    first.map((s) => [s.channel, s.data, s.dataJson]),
    [["room.1", { typing: "ann" }, '{"typing":"ann"}']],
  );
  assert.equal(second.length, 1);

  const late: Signal[] = [];
  hub.subscribe("room.1", (signal) => late.push(signal) > 0);
  assert.equal(late.length, 0, "nothing from before the subscription");
  assert.equal(hub.publish("room.1", "next"), 3);
  assert.equal(late.length, 1);
});

test("unsubscribe stops delivery, is idempotent, and an empty channel is forgotten", () => {
  const hub = new SignalHub();
  let count = 0;
  const unsubscribe = hub.subscribe("c", () => {
    count++;
    return true;
  });
  assert.equal(hub.publish("c", 1), 1);
  unsubscribe();
  unsubscribe();
  assert.equal(hub.publish("c", 2), 0);
  assert.equal(count, 1);
  assert.equal(hub.subscriptions(), 0);
  assert.equal(hub.subscriptions("c"), 0);
});

test("a listener that drops the signal is not counted as reached", () => {
  const hub = new SignalHub();
  hub.subscribe("c", () => false);
  hub.subscribe("c", () => true);
  assert.equal(hub.publish("c", null), 1);
});

test("publishing to a channel nobody watches reaches no one and keeps nothing", () => {
  const hub = new SignalHub();
  assert.equal(hub.publish("empty", { x: 1 }), 0);
  const seen: Signal[] = [];
  hub.subscribe("empty", (signal) => seen.push(signal) > 0);
  assert.equal(seen.length, 0);
});

test("channel names follow the name rules; data is bounded", () => {
  const hub = new SignalHub();
  assert.throws(() => hub.subscribe("has space", () => true), isCode("invalid_name"));
  assert.throws(() => hub.publish("..", 1), isCode("invalid_name"));
  assert.throws(() => hub.publish("c", "x".repeat(limits.signalDataBytesMax)), isCode("signal_too_large"));
  assert.equal(hub.publish("c", "x".repeat(limits.signalDataBytesMax - 2)), 0);
});
