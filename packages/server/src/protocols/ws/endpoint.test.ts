/**
 * `/v1/ws` against an in-process server on a fake clock: frame validation, acks and nacks, cancel,
 * backpressure, pings, the ack timeout, authentication and shutdown. The socket is real; only time
 * (leases, long polls, pings) is the test's to move.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import type { OutgoingMessage } from "../../broker/queues.js";
import { FakeClock } from "../../clock.js";
import { limits } from "../../limits.js";
import { type RunningServer, startServer } from "../../server.js";
import { createTempDir } from "../../testing/server-process.js";
import { receiptsOf, TestSocket } from "../../testing/ws-test-client.js";

function json(value: unknown): OutgoingMessage {
  return { body: Buffer.from(JSON.stringify(value)), contentType: "application/json" };
}

/** Polls `check` every 20 ms until it holds, for state that changes as frames cross the network. */
async function eventually(
  check: () => Promise<boolean> | boolean,
  what: string,
  waitMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`still not true after ${waitMs} ms: ${what}`);
    await delay(20);
  }
}

describe("websocket endpoint", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let clock: FakeClock;
  let server: RunningServer;
  const sockets: TestSocket[] = [];

  async function open(options: Parameters<typeof TestSocket.open>[1] = {}): Promise<TestSocket> {
    const socket = await TestSocket.open(server.url, options);
    sockets.push(socket);
    return socket;
  }

  beforeEach(async () => {
    clock = new FakeClock();
    server = await startServer({ dataPath: ":memory:", port: 0, clock, logLevel: false });
    await server.broker.putQueue("q", {});
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.close();
    await server.close();
  });

  test("bad frames are answered with the catalog's code, echo a valid ref, and change nothing", async () => {
    await server.broker.send("q", [json(1), json(2)]);
    const before = await server.broker.stats("q");
    const socket = await open();
    const cases: [string | Buffer, string, (string | number)?][] = [
      ["not json", "invalid_json"],
      ["[1,2]", "invalid_request"],
      ['{"op":"dance","ref":7}', "invalid_request", 7],
      ['{"ref":"no-op"}', "invalid_request", "no-op"],
      ['{"op":"consume","queue":"q","prefetch":1,"extra":true,"ref":"x"}', "invalid_request", "x"],
      ['{"op":"consume","queue":"no/slash","prefetch":1}', "invalid_name"],
      ['{"op":"consume","queue":"..","prefetch":1}', "invalid_name"],
      ['{"op":"consume","queue":"q","prefetch":0}', "invalid_request"],
      ['{"op":"consume","queue":"q","prefetch":1001}', "invalid_request"],
      ['{"op":"consume","queue":"q"}', "invalid_request"],
      ['{"op":"consume","queue":"missing","prefetch":1,"ref":"m"}', "queue_not_found", "m"],
      [
        JSON.stringify({ op: "ack", receipts: Array.from({ length: 101 }, (_, i) => `r${i}`) }),
        "batch_too_large",
      ],
      ['{"op":"ack","receipts":[]}', "invalid_request"],
      ['{"op":"nack","receipts":["r"],"delayMs":-1}', "invalid_request"],
      ['{"op":"nack","receipts":["r"],"deadLetter":true,"delayMs":0}', "invalid_request"],
      ['{"op":"nack","receipts":["r"],"reason":"no deadLetter"}', "invalid_request"],
      [
        JSON.stringify({ op: "nack", receipts: ["r"], deadLetter: true, reason: "r".repeat(129) }),
        "invalid_request",
      ],
      ['{"op":"cancel","sub":"99","ref":1.5}', "consumer_not_found", 1.5],
      ['{"op":"signal.subscribe","channel":"a b"}', "invalid_name"],
      ['{"op":"signal.publish","channel":"c"}', "invalid_request"],
      [
        JSON.stringify({ op: "signal.publish", channel: "c", data: "x".repeat(limits.signalDataBytesMax) }),
        "signal_too_large",
      ],
      [Buffer.from('{"op":"cancel","sub":"1"}'), "invalid_request"],
    ];
    for (const [frame, code, ref] of cases) {
      const seen = socket.frames.length;
      socket.socket.send(frame);
      const answer = await socket.waitFor((f) => socket.frames.indexOf(f) >= seen);
      const label = String(frame).slice(0, 80);
      assert.equal(answer.op, "error", label);
      assert.equal((answer.error as { code: string }).code, code, label);
      assert.equal(answer.ref, ref, label);
      assert.equal(typeof (answer.error as { message: string }).message, "string");
    }
    assert.deepEqual(await server.broker.stats("q"), before);
    assert.equal(socket.all("deliver").length, 0);
    // The connection stays usable after bad frames.
    const consuming = await socket.request({ op: "consume", queue: "q", prefetch: 2 });
    assert.equal(consuming.op, "consuming");
    await socket.waitForCount("deliver", 2);
  });

  test("deliveries render as HTTP receive does; ack and nack answer per receipt, in order", async () => {
    await server.broker.putQueue("other", {});
    await server.broker.send("q", [
      json({ n: 1 }),
      { body: Buffer.from([0, 1]), contentType: "application/x-bin" },
    ]);
    await server.broker.send("other", [json("o")]);
    const socket = await open();
    const a = await socket.request({ op: "consume", queue: "q", prefetch: 5 });
    const b = await socket.request({ op: "consume", queue: "other", prefetch: 5 });
    assert.notEqual(a.sub, b.sub);
    const delivered = await socket.waitForCount("deliver", 3);
    const fromQ = delivered.filter((f) => f.sub === a.sub).map((f) => f.message as Record<string, unknown>);
    assert.deepEqual(Object.keys(fromQ[0] as object).sort(), [
      "body",
      "contentType",
      "deliveryCount",
      "firstDeliveredAt",
      "headers",
      "id",
      "key",
      "publishedAt",
      "receipt",
    ]);
    assert.deepEqual(fromQ[0]?.body, { n: 1 });
    assert.equal(fromQ[1]?.bodyBase64, "AAE=");

    const [q1, q2] = receiptsOf(delivered.filter((f) => f.sub === a.sub));
    const [o1] = receiptsOf(delivered.filter((f) => f.sub === b.sub));
    const acked = await socket.request({ op: "ack", receipts: [o1, "unknown", q1] });
    assert.equal(acked.op, "acked");
    assert.deepEqual(
      (acked.results as { ok?: true; error?: { code: string } }[]).map((r) => r.ok ?? r.error?.code),
      [true, "stale_receipt", true],
    );
    const nacked = await socket.request({ op: "nack", receipts: [q2], delayMs: 60_000 });
    assert.deepEqual(nacked.results, [{ ok: true }]);
    const again = await socket.request({ op: "ack", receipts: [q1] });
    assert.equal((again.results as { error: { code: string } }[])[0]?.error.code, "stale_receipt");
    const stats = await server.broker.stats("q");
    assert.deepEqual([stats.acked, stats.nacked, stats.delayed, stats.inFlight], [1, 1, 1, 0]);
  });

  test("ack frames read in one turn settle in fewer broker calls, each frame answered with its own results", async () => {
    await server.broker.send("q", [json(1), json(2), json(3), json(4), json(5)]);
    const socket = await open();
    await socket.request({ op: "consume", queue: "q", prefetch: 5 });
    const receipts = receiptsOf(await socket.waitForCount("deliver", 5));
    const calls: number[] = [];
    const ack = server.broker.ack.bind(server.broker);
    server.broker.ack = (queue, held, applied) => {
      calls.push(held.length);
      return ack(queue, held, applied);
    };
    const frames = [[receipts[0]], [receipts[1], "unknown"], [receipts[2]], [receipts[3]], [receipts[4]]];
    // One write, so the server reads every frame in one turn.
    const tcp = (socket.socket as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
    tcp.cork();
    frames.forEach((frame, index) => {
      socket.send({ op: "ack", receipts: frame, ref: `a${index}` });
    });
    tcp.uncork();
    const answers = await Promise.all(
      frames.map((_frame, index) => socket.waitFor((f) => f.ref === `a${index}`)),
    );
    assert.deepEqual(
      answers.map((answer) => [
        answer.op,
        (answer.results as { ok?: true; error?: { code: string } }[]).map((r) => r.ok ?? r.error?.code),
      ]),
      [
        ["acked", [true]],
        ["acked", [true, "stale_receipt"]],
        ["acked", [true]],
        ["acked", [true]],
        ["acked", [true]],
      ],
    );
    assert.ok(calls.length < frames.length, `${calls.length} broker calls for ${frames.length} ack frames`);
    assert.equal(
      calls.reduce((sum, count) => sum + count, 0),
      5,
    );
    assert.equal((await server.broker.stats("q")).acked, 5);
  });

  test("a dead-lettering nack moves held messages now, with its reason; with no target the lease stays held", async () => {
    await server.broker.putQueue("dlq", {});
    await server.broker.putQueue("dl", { deadLetter: { queue: "dlq", maxDeliveries: 5 } });
    await server.broker.send("dl", [json("revoked")]);
    await server.broker.send("q", [json("kept")]);
    const socket = await open();
    const dl = await socket.request({ op: "consume", queue: "dl", prefetch: 1 });
    const plain = await socket.request({ op: "consume", queue: "q", prefetch: 1 });
    const delivered = await socket.waitForCount("deliver", 2);
    const [rejected] = receiptsOf(delivered.filter((f) => f.sub === dl.sub));
    const [kept] = receiptsOf(delivered.filter((f) => f.sub === plain.sub));
    const nacked = await socket.request({
      op: "nack",
      receipts: [rejected, kept, "unknown"],
      deadLetter: true,
      reason: "token_revoked",
    });
    assert.equal(nacked.op, "nacked");
    assert.deepEqual(
      (nacked.results as { ok?: true; error?: { code: string } }[]).map((r) => r.ok ?? r.error?.code),
      [true, "no_dead_letter_target", "stale_receipt"],
    );
    const [dead] = await server.broker.peek("dlq", "available", 10);
    assert.equal(dead?.body.toString(), '"revoked"');
    assert.equal(dead?.headers["x-dead-letter-reason"], "token_revoked");
    assert.equal(dead?.headers["x-original-queue"], "dl");
    const dlStats = await server.broker.stats("dl");
    assert.deepEqual([dlStats.deadLettered, dlStats.inFlight], [1, 0]);
    const qStats = await server.broker.stats("q");
    assert.deepEqual([qStats.deadLettered, qStats.nacked, qStats.inFlight], [0, 0, 1]);
    // The refused lease is still this consumer's: an ack settles it.
    assert.deepEqual((await socket.request({ op: "ack", receipts: [kept] })).results, [{ ok: true }]);
  });

  test("cancel hands the consumer's leases back at once and stops its deliveries", async () => {
    await server.broker.send("q", [json(1), json(2), json(3)]);
    const socket = await open();
    const { sub } = await socket.request({ op: "consume", queue: "q", prefetch: 2 });
    await socket.waitForCount("deliver", 2);
    assert.equal((await server.broker.stats("q")).inFlight, 2);
    const cancelled = await socket.request({ op: "cancel", sub });
    assert.deepEqual([cancelled.op, cancelled.sub], ["cancelled", sub]);
    const stats = await server.broker.stats("q");
    assert.deepEqual([stats.inFlight, stats.available], [0, 3]);
    await server.broker.send("q", [json(4)]);
    await delay(50);
    assert.equal(socket.all("deliver").length, 2);
    const late = await socket.request({ op: "ack", receipts: receiptsOf(socket.all("deliver")) });
    assert.deepEqual(
      (late.results as { error: { code: string } }[]).map((r) => r.error.code),
      ["stale_receipt", "stale_receipt"],
    );
  });

  test("drain stops a consumer's deliveries and keeps its leases: acks work, no new message is leased", async () => {
    await server.broker.send("q", [json(1), json(2), json(3), json(4)]);
    const socket = await open();
    const { sub } = await socket.request({ op: "consume", queue: "q", prefetch: 2 });
    await socket.waitForCount("deliver", 2);
    const draining = await socket.request({ op: "drain", sub });
    assert.deepEqual([draining.op, draining.sub], ["draining", sub]);
    assert.equal((await server.broker.stats("q")).inFlight, 2, "the leases are kept");
    const acked = await socket.request({ op: "ack", receipts: receiptsOf(socket.all("deliver")) });
    assert.deepEqual(acked.results, [{ ok: true }, { ok: true }]);
    // The credit the acks gave back, and a send meant for a waiting consumer, bring nothing.
    await server.broker.send("q", [json(5)]);
    await delay(50);
    assert.equal(socket.all("deliver").length, 2);
    const stats = await server.broker.stats("q");
    assert.deepEqual([stats.acked, stats.inFlight, stats.available, stats.delivered], [2, 0, 3, 2]);
    const again = await socket.request({ op: "drain", sub });
    assert.equal(again.op, "draining", "drain is idempotent");
    const missing = await socket.request({ op: "drain", sub: "99" });
    assert.equal((missing.error as { code: string }).code, "consumer_not_found");
  });

  test("a consumer whose queue is deleted is cancelled by the server with queue_not_found", async () => {
    const socket = await open();
    const { sub } = await socket.request({ op: "consume", queue: "q", prefetch: 1 });
    await server.broker.deleteQueue("q");
    const cancelled = await socket.waitFor((f) => f.op === "cancelled");
    assert.equal(cancelled.sub, sub);
    assert.equal((cancelled.error as { code: string }).code, "queue_not_found");
  });

  test("a delivery held past the consumer ack timeout is lost, and delivered again", async () => {
    await server.broker.send("q", [json("slow")]);
    const socket = await open();
    await socket.request({ op: "consume", queue: "q", prefetch: 1 });
    const [first] = await socket.waitForCount("deliver", 1);
    await clock.advance(limits.consumerAckTimeoutMs);
    const [, second] = await socket.waitForCount("deliver", 2);
    const firstMessage = first?.message as { id: string; receipt: string };
    const secondMessage = second?.message as { id: string; deliveryCount: number };
    assert.equal(secondMessage.id, firstMessage.id);
    assert.equal(secondMessage.deliveryCount, 2);
    const late = await socket.request({ op: "ack", receipts: [firstMessage.receipt] });
    assert.equal((late.results as { error: { code: string } }[])[0]?.error.code, "stale_receipt");
  });

  test("a client that stops reading is not pushed to; it gets everything once it reads again", async () => {
    const count = 200;
    const socket = await open();
    await socket.request({ op: "consume", queue: "q", prefetch: count });
    // The client reads nothing more: the kernel buffers fill, then the server's send buffer.
    socket.socket.pause();
    const body = "x".repeat(100 * 1024);
    for (let i = 0; i < count; i++) {
      await server.broker.send("q", [json({ i, body })]);
      // One message per long poll, so the consumer leases only as fast as it is allowed to push.
      await delay(1);
    }
    let inFlight = -1;
    let steadyFor = 0;
    await eventually(async () => {
      const now = (await server.broker.stats("q")).inFlight;
      steadyFor = now === inFlight ? steadyFor + 1 : 0;
      inFlight = now;
      return steadyFor >= 10;
    }, "leasing settles while the client does not read");
    const stats = await server.broker.stats("q");
    assert.ok(stats.inFlight < count, `the server stopped leasing at ${stats.inFlight} of ${count}`);
    assert.ok(stats.available > 0);
    socket.socket.resume();
    const delivered = await socket.waitForCount("deliver", count, 20_000);
    const numbers = new Set(delivered.map((f) => (f.message as { body: { i: number } }).body.i));
    assert.equal(numbers.size, count);
  });

  test("pings every interval; a peer that misses a pong is cut off, one that answers stays", async () => {
    const answering = await open();
    const silent = await open({ autoPong: false });
    let pings = 0;
    answering.socket.on("ping", () => pings++);
    await clock.advance(limits.wsPingIntervalMs);
    await eventually(() => pings === 1, "the first ping arrived");
    // The pong crosses the network while the fake clock stands still.
    await delay(100);
    await clock.advance(limits.wsPingIntervalMs);
    await silent.waitForClose();
    await eventually(() => pings === 2, "the second ping arrived");
    assert.equal(answering.closed, false);
    assert.equal(
      (await answering.request({ op: "signal.subscribe", channel: "alive" })).op,
      "signal.subscribed",
    );
  });

  test(`a connection holds at most ${limits.wsConsumersPerConnectionMax} consumers`, async () => {
    const socket = await open();
    for (let i = 0; i < limits.wsConsumersPerConnectionMax; i++) {
      assert.equal((await socket.request({ op: "consume", queue: "q", prefetch: 1 })).op, "consuming");
    }
    const refused = await socket.request({ op: "consume", queue: "q", prefetch: 1 });
    assert.equal((refused.error as { code: string }).code, "too_many_consumers");
  });

  test("signals: every live subscriber gets them, the publisher learns how many, nothing is kept", async () => {
    const publisher = await open();
    const alice = await open();
    const bob = await open();
    await alice.request({ op: "signal.subscribe", channel: "room.1" });
    await bob.request({ op: "signal.subscribe", channel: "room.1" });
    const published = await publisher.request({
      op: "signal.publish",
      channel: "room.1",
      data: { typing: "carol" },
    });
    assert.deepEqual([published.op, published.delivered], ["signal.published", 2]);
    for (const socket of [alice, bob]) {
      const signal = await socket.waitFor((f) => f.op === "signal");
      assert.deepEqual(signal, { op: "signal", channel: "room.1", data: { typing: "carol" } });
    }
    await bob.request({ op: "signal.unsubscribe", channel: "room.1" });
    const late = await open();
    await late.request({ op: "signal.subscribe", channel: "room.1" });
    const second = await publisher.request({ op: "signal.publish", channel: "room.1", data: 2 });
    assert.equal(second.delivered, 2);
    await alice.waitForCount("signal", 2);
    const lateSignals = await late.waitForCount("signal", 1);
    assert.deepEqual(
      lateSignals.map((f) => f.data),
      [2],
      "the late subscriber saw only what came after it",
    );
    await delay(50);
    assert.equal(bob.all("signal").length, 1);
    // A closed subscriber is forgotten.
    alice.close();
    await eventually(async () => {
      const answer = await publisher.request({ op: "signal.publish", channel: "room.1", data: 3 });
      return answer.delivered === 1;
    }, "the closed subscriber is gone");
  });
});

describe("websocket authentication", () => {
  let server: RunningServer | undefined;
  after(async () => {
    await server?.close();
  });

  test("with keys configured, the upgrade needs the Bearer header; a key in the query is not enough", async () => {
    server = await startServer({ dataPath: ":memory:", port: 0, apiKeys: ["secret"], logLevel: false });
    const refusals: { status?: number; body?: string }[] = [];
    for (const options of [{}, { apiKey: "wrong" }, { path: "/v1/ws?key=secret" }]) {
      await TestSocket.open(server.url, options).then(
        (socket) => {
          socket.close();
          assert.fail(`connected with ${JSON.stringify(options)}`);
        },
        (error: { status?: number; body?: string }) => refusals.push(error),
      );
    }
    assert.deepEqual(
      refusals.map((r) => [
        r.status,
        (JSON.parse(r.body ?? "{}") as { error?: { code: string } }).error?.code,
      ]),
      [
        [401, "unauthorized"],
        [401, "unauthorized"],
        [401, "unauthorized"],
      ],
    );
    const socket = await TestSocket.open(server.url, { apiKey: "secret" });
    assert.equal((await socket.request({ op: "signal.subscribe", channel: "c" })).op, "signal.subscribed");
    socket.close();
  });

  test("the socket of a refused upgrade is closed once the 401 is out", async () => {
    server ??= await startServer({ dataPath: ":memory:", port: 0, apiKeys: ["secret"], logLevel: false });
    const { port } = new URL(server.url);
    const socket = connect(Number(port), "127.0.0.1");
    let answer = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      answer += chunk;
    });
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.write(
      [
        "GET /v1/ws HTTP/1.1",
        "Host: localhost",
        "Connection: Upgrade",
        "Upgrade: websocket",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "",
        "",
      ].join("\r\n"),
    );
    await Promise.race([closed, delay(2_000).then(() => assert.fail("the refused socket stayed open"))]);
    assert.match(answer, /^HTTP\/1\.1 401 /);
  });
});

describe("websocket shutdown", () => {
  test("a graceful stop hands back the leases its consumers held, so a restart finds them available", async () => {
    const dir = createTempDir();
    try {
      const dataPath = dir.file("hopper.db");
      const first = await startServer({ dataPath, port: 0, logLevel: false });
      await first.broker.putQueue("q", {});
      await first.broker.send("q", [json(1), json(2)]);
      const socket = await TestSocket.open(first.url);
      await socket.request({ op: "consume", queue: "q", prefetch: 2 });
      await socket.waitForCount("deliver", 2);
      await first.close();
      await socket.waitForClose();
      const second = await startServer({ dataPath, port: 0, logLevel: false });
      try {
        const stats = await second.broker.stats("q");
        assert.deepEqual([stats.available, stats.inFlight], [2, 0]);
      } finally {
        await second.close();
      }
    } finally {
      dir.remove();
    }
  });
});
