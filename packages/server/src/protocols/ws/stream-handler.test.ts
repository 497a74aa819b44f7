/**
 * Stream consumers over `/v1/ws` against an in-process server on a fake clock: `stream.consume` pushes
 * no more uncommitted records than its prefetch and gives credit back on `stream.commit`; a closed
 * connection's member leaves its group; `share.consume` delivers one lease per record, `share.ack`
 * settles it, and a closed connection's unsettled records are delivered again at once.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { FakeClock } from "../../clock.js";
import { type RunningServer, startServer } from "../../server.js";
import { type Frame, TestSocket } from "../../testing/ws-test-client.js";

type Pushed = { partition: number; offset: number; body: unknown; receipt?: string };

describe("stream consumers over the websocket", () => {
  // Over 80 lines: one describe block of short tests sharing setup.
  let server: RunningServer;
  const sockets: TestSocket[] = [];
  const open = async () => {
    const socket = await TestSocket.open(server.url);
    sockets.push(socket);
    return socket;
  };

  beforeEach(async () => {
    server = await startServer({ dataPath: ":memory:", port: 0, clock: new FakeClock(), logLevel: false });
    await server.streams.putStream("s", { partitions: 1 });
    await server.streams.append("s", [{ body: 0 }, { body: 1 }, { body: 2 }]);
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.close();
    await server.close();
  });

  test("stream.consume pushes up to prefetch uncommitted records; a commit gives the credit back", async () => {
    const socket = await open();
    const consuming = await socket.request({
      op: "stream.consume",
      stream: "s",
      group: "g",
      member: "m",
      prefetch: 2,
    });
    assert.equal(consuming.op, "stream.consuming");
    const [first] = await socket.waitForCount("stream.records", 1);
    const records = (first as Frame).records as Pushed[];
    assert.deepEqual(
      records.map((record) => record.offset),
      [0, 1],
      "two, the prefetch",
    );
    const committed = await socket.request({
      op: "stream.commit",
      sub: consuming.sub,
      offsets: [{ partition: 0, offset: 2 }],
    });
    assert.deepEqual(committed.results, [{ ok: true }]);
    const frames = await socket.waitForCount("stream.records", 2);
    assert.deepEqual(
      ((frames[1] as Frame).records as Pushed[]).map((record) => [record.offset, record.body]),
      [[2, 2]],
    );
    // Records appended later come as they are appended: the fetch waits on the stream's topic.
    await socket.request({ op: "stream.commit", sub: consuming.sub, offsets: [{ partition: 0, offset: 3 }] });
    await server.streams.append("s", [{ body: 3 }]);
    const later = await socket.waitForCount("stream.records", 3);
    assert.deepEqual(
      ((later[2] as Frame).records as Pushed[]).map((record) => record.offset),
      [3],
    );
    assert.equal((await server.streams.groups.getGroup("s", "g")).partitions[0]?.committed, 3);
    socket.close();
    for (let tries = 0; (await server.streams.groups.getGroup("s", "g")).members.length > 0; tries++) {
      assert.ok(tries < 250, "the member left once its connection closed");
      await delay(20);
    }
  });

  test("share.consume delivers one lease per record; ack settles it; a closed connection's records come back", async () => {
    await server.streams.shares.putShare("s", "pool", { visibilityTimeoutMs: 600_000 });
    const first = await open();
    const consuming = await first.request({ op: "share.consume", stream: "s", group: "pool", prefetch: 2 });
    assert.equal(consuming.op, "share.consuming");
    const delivered = (await first.waitForCount("deliver", 2)).map((frame) => frame.message as Pushed);
    assert.deepEqual(
      delivered.map((message) => message.body),
      [0, 1],
    );
    const acked = await first.request({
      op: "share.ack",
      sub: consuming.sub,
      receipts: [delivered[0]?.receipt],
    });
    assert.deepEqual(acked.results, [{ ok: true }]);
    const third = (await first.waitForCount("deliver", 3))[2]?.message as Pushed;
    assert.equal(third.body, 2, "the credit came back with the ack");
    first.close();
    // Offsets 1 and 2 were unsettled: nacked as the connection closed, they are another consumer's now.
    const second = await open();
    await second.request({ op: "share.consume", stream: "s", group: "pool", prefetch: 5 });
    const again = (await second.waitForCount("deliver", 2)).map((frame) => (frame.message as Pushed).body);
    assert.deepEqual(again.sort(), [1, 2]);
  });

  test("unknown subs and a missing stream answer their codes", async () => {
    const socket = await open();
    const missing = await socket.request({
      op: "stream.consume",
      stream: "nope",
      group: "g",
      member: "m",
      prefetch: 1,
    });
    assert.equal((missing.error as { code: string }).code, "stream_not_found");
    const unknown = await socket.request({
      op: "stream.commit",
      sub: "42",
      offsets: [{ partition: 0, offset: 1 }],
    });
    assert.equal((unknown.error as { code: string }).code, "consumer_not_found");
    const noShare = await socket.request({ op: "share.consume", stream: "s", group: "none", prefetch: 1 });
    assert.equal((noShare.error as { code: string }).code, "group_not_found");
  });
});
