/**
 * The wake-up primitive on a fake clock: waits end when the head passes their position, on time, on
 * cancel or by a claim; no append is lost however it interleaves with a waiter's read, look and
 * registration; and every map and count stays within its bound.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FakeClock, settle } from "../clock.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import { queueTopic, type WakeBounds, type WakeEnd, Wakeups } from "./wake.js";

/** Follows a promise without awaiting it; the getter says what it resolved to so far. */
function track<T>(promise: Promise<T>): () => T | undefined {
  let value: T | undefined;
  void promise.then((resolved) => {
    value = resolved;
  });
  return () => value;
}

const roomy: WakeBounds = { waitersMax: 100, waitersPerTopicMax: 100, topicHeadsMax: 100 };

describe("wake-ups", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  test("a wait after a position the head has passed returns at once", async () => {
    const wake = new Wakeups(new FakeClock(), roomy);
    const position = wake.head("t");
    wake.advance("t");
    assert.ok(wake.head("t") > position);
    assert.equal(await wake.waitAfter("t", position, { timeoutMs: 1_000 }), "advanced");
    assert.equal(wake.waiting, 0, "nothing was registered");
  });

  test("a wait ends when its topic advances, not when another does, with no time passing", async () => {
    const clock = new FakeClock();
    const wake = new Wakeups(clock, roomy);
    const ended = track(wake.waitAfter("t", wake.head("t"), { timeoutMs: 20_000 }));
    wake.advance("other");
    await settle();
    assert.equal(ended(), undefined, "another topic's append wakes no one here");
    assert.equal(wake.waitingOn("t"), 1);
    wake.advance("t");
    await settle();
    assert.equal(ended(), "advanced");
    assert.equal(clock.pendingTimers(), 0, "its timer went with it");
    assert.equal(wake.waitingOn("t"), 0);
  });

  test("a wait times out on the injected clock, exactly at its timeout", async () => {
    const clock = new FakeClock();
    const wake = new Wakeups(clock, roomy);
    const ended = track(wake.waitAfter("t", wake.head("t"), { timeoutMs: 5_000 }));
    await clock.advance(4_999);
    assert.equal(ended(), undefined);
    await clock.advance(1);
    assert.equal(ended(), "timeout");
    assert.equal(wake.waiting, 0);
  });

  test("a wait is cancelled by its signal, at once if it has aborted already", async () => {
    const clock = new FakeClock();
    const wake = new Wakeups(clock, roomy);
    const aborted = new AbortController();
    aborted.abort();
    assert.equal(
      await wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000, signal: aborted.signal }),
      "cancelled",
    );
    const leaving = new AbortController();
    const ended = track(wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000, signal: leaving.signal }));
    await settle();
    assert.equal(ended(), undefined);
    leaving.abort();
    await settle();
    assert.equal(ended(), "cancelled");
    assert.equal(clock.pendingTimers(), 0);
    assert.equal(wake.waiting, 0);
  });

  test("claim takes the longest-waiting claimable waiter alone, and moves no head", async () => {
    const wake = new Wakeups<string>(new FakeClock(), roomy);
    const position = wake.head("t");
    const plain = track(wake.waitAfter("t", position, { timeoutMs: 1_000 }));
    const first = track(wake.waitAfter("t", position, { timeoutMs: 1_000, claimable: "first" }));
    const second = track(wake.waitAfter("t", position, { timeoutMs: 1_000, claimable: "second" }));
    assert.equal(wake.claim("t"), "first", "the plain waiter is not claimable");
    assert.equal(wake.head("t"), position, "a claim makes nothing available to the others");
    await settle();
    assert.deepEqual(first(), { claimed: "first" });
    assert.equal(plain(), undefined);
    assert.equal(second(), undefined);
    wake.advance("t");
    await settle();
    assert.deepEqual(first(), { claimed: "first" }, "a claimed wait ends once");
    assert.deepEqual([plain(), second()], ["advanced", "advanced"]);
    assert.equal(wake.claim("t"), undefined, "no one waits any more");
  });

  test("advanceAll wakes every waiter and moves every head, remembered or not", async () => {
    const wake = new Wakeups(new FakeClock(), roomy);
    wake.advance("a");
    const before = { a: wake.head("a"), never: wake.head("never") };
    const onA = track(wake.waitAfter("a", before.a, { timeoutMs: 1_000 }));
    const onB = track(wake.waitAfter("b", wake.head("b"), { timeoutMs: 1_000 }));
    wake.advanceAll();
    await settle();
    assert.deepEqual([onA(), onB()], ["advanced", "advanced"]);
    assert.ok(wake.head("a") > before.a);
    assert.ok(wake.head("never") > before.never, "a reader in the middle of a look looks again");
    assert.equal(wake.headsRemembered, 0);
  });
});

/**
 * The no-lost-wake-up rule, interleaved deterministically. A reader reads the head, looks at a store
 * (an array here) and registers its wait; an appender appends to the store and then advances the head
 * (as a send does once it has committed). Every order of those five steps that keeps each side's own
 * order is run; in each, the reader must have seen the append in its look or be woken by it.
 */
describe("no lost wake-up", () => {
  // Over 80 lines as a suite only: it groups short tests around one setup, each its own function.
  type Step = "readHead" | "look" | "register" | "append" | "advance";
  const readerSteps: Step[] = ["readHead", "look", "register"];
  const appenderSteps: Step[] = ["append", "advance"];

  /** Every merge of the two sequences that keeps the order within each. */
  function interleavings(a: Step[], b: Step[]): Step[][] {
    if (a.length === 0) return [b];
    if (b.length === 0) return [a];
    const [a0, ...aRest] = a as [Step, ...Step[]];
    const [b0, ...bRest] = b as [Step, ...Step[]];
    return [
      ...interleavings(aRest, b).map((rest) => [a0, ...rest]),
      ...interleavings(a, bRest).map((rest) => [b0, ...rest]),
    ];
  }

  /**
   * Runs one order on a fake clock and answers whether the reader missed the append: its look found
   * nothing and its wait was still asleep (it would sleep to its timeout) once every step had run.
   */
  async function missed(order: Step[]): Promise<boolean> {
    const clock = new FakeClock();
    const wake = new Wakeups(clock, roomy);
    const topic = queueTopic("q");
    const store: string[] = [];
    let position = -1;
    let seen = 0;
    let ended: () => WakeEnd<never> | undefined = () => undefined;
    let registered = false;
    for (const step of order) {
      if (step === "readHead") position = wake.head(topic);
      if (step === "look") seen = store.length;
      if (step === "register") {
        // A reader that saw the append has no reason to wait.
        if (seen > 0) continue;
        registered = true;
        ended = track(wake.waitAfter(topic, position, { timeoutMs: 20_000 }));
      }
      if (step === "append") store.push("m");
      if (step === "advance") wake.advance(topic);
      await settle();
    }
    return seen === 0 && registered && ended() === undefined;
  }

  const orders = interleavings(readerSteps, appenderSteps);

  test("an append that lands between the head read and the registration wakes the waiter", async () => {
    assert.equal(orders.length, 10, "every interleaving of 3 and 2 steps");
    // The race itself: read, look (finds nothing), then the append and its advance, then register.
    const race: Step[] = ["readHead", "look", "append", "advance", "register"];
    assert.ok(orders.some((order) => order.join() === race.join()));
    for (const order of orders) {
      assert.equal(await missed(order), false, `lost in ${order.join(" → ")}`);
    }
  });

  test("the rule needs the head read before the look: read after it, an append is lost", async () => {
    // The same runs with the reader's first two steps swapped must find a lost wake-up, or the test
    // above could not fail.
    const lateRead: Step[] = ["look", "readHead", "register"];
    const lost: string[] = [];
    for (const order of interleavings(lateRead, appenderSteps)) {
      if (await missed(order)) lost.push(order.join(" → "));
    }
    assert.deepEqual(lost, ["look → append → advance → readHead → register"]);
  });

  test("an append to a topic whose head was forgotten still wakes a waiter after it", async () => {
    const wake = new Wakeups(new FakeClock(), { ...roomy, topicHeadsMax: 2 });
    const position = wake.head("a");
    wake.advance("a");
    const afterAppend = wake.head("a");
    // Two other topics advance: the head of "a" is forgotten, and reads as the floor.
    wake.advance("b");
    wake.advance("c");
    assert.equal(wake.headsRemembered, 2);
    assert.ok(wake.head("a") >= afterAppend, "a head never goes back");
    assert.equal(await wake.waitAfter("a", position, { timeoutMs: 1_000 }), "advanced");
    // A waiter registered after the forgetting, on the forgotten head, still wakes on the next append.
    const ended = track(wake.waitAfter("a", wake.head("a"), { timeoutMs: 1_000 }));
    wake.advance("a");
    await settle();
    assert.equal(ended(), "advanced");
  });
});

describe("wake-up bounds", () => {
  const refused = (e: unknown) => e instanceof HopperError && e.code === "too_many_waiters";

  test("by default the bounds are the server's limits", async () => {
    const wake = new Wakeups(new FakeClock());
    for (let i = 0; i < limits.waitersPerTopicMax; i++)
      void wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000 });
    await assert.rejects(wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000 }), refused);
    assert.equal(wake.waitingOn("t"), limits.waitersPerTopicMax);
    wake.advanceAll();
  });

  test("waits beyond the per-topic bound are refused; another topic still has room", async () => {
    const wake = new Wakeups(new FakeClock(), { waitersMax: 10, waitersPerTopicMax: 2, topicHeadsMax: 10 });
    const leaving = new AbortController();
    void wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000, signal: leaving.signal });
    void wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000 });
    await assert.rejects(wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000 }), (e: unknown) => {
      assert.ok(refused(e));
      assert.match((e as HopperError).message, /"t" has the most waits/);
      return true;
    });
    assert.equal(
      await wake.waitAfter("t", wake.head("t") - 1, { timeoutMs: 1_000 }),
      "advanced",
      "no room is needed to return at once",
    );
    void wake.waitAfter("u", wake.head("u"), { timeoutMs: 1_000 });
    assert.equal(wake.waitingOn("u"), 1);
    leaving.abort();
    void wake.waitAfter("t", wake.head("t"), { timeoutMs: 1_000 });
    assert.equal(wake.waitingOn("t"), 2, "a wait that ended made room");
  });

  test("waits beyond the server's bound are refused", async () => {
    const wake = new Wakeups(new FakeClock(), { waitersMax: 3, waitersPerTopicMax: 3, topicHeadsMax: 10 });
    for (const topic of ["a", "b", "c"]) void wake.waitAfter(topic, wake.head(topic), { timeoutMs: 1_000 });
    await assert.rejects(wake.waitAfter("d", wake.head("d"), { timeoutMs: 1_000 }), refused);
    assert.equal(wake.waiting, 3);
  });

  test("nothing is kept of topics nobody waits on, beyond the remembered heads", async () => {
    const clock = new FakeClock();
    const wake = new Wakeups(clock, { waitersMax: 100, waitersPerTopicMax: 100, topicHeadsMax: 50 });
    for (let i = 0; i < 1_000; i++) {
      const topic = `inbox:chat:${i}`;
      const ended = wake.waitAfter(topic, wake.head(topic), { timeoutMs: 10 });
      wake.advance(topic);
      assert.equal(await ended, "advanced");
    }
    assert.equal(wake.waiting, 0);
    assert.equal(wake.headsRemembered, 50, "the heads of the topics advanced last, no more");
    assert.equal(clock.pendingTimers(), 0);
  });
});
