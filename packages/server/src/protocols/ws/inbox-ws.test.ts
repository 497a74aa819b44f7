/**
 * Inbox subscriptions and device tokens over `/v1/ws`, in-process on a fake clock: the frames in order,
 * the refusals, what a device token allows, refresh, and the close at `exp` (4001).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { FakeClock, settle } from "../../clock.js";
import { type RunningServer, startServer } from "../../server.js";
import { createTempDir } from "../../testing/server-process.js";
import { type Frame, TestSocket } from "../../testing/ws-test-client.js";
import { tokenExpiredCloseCode } from "./device-access.js";

const secret = "a-test-secret-of-at-least-thirty-two-bytes";
const minuteMs = 60_000;

/** A device token for `sub`, expiring `expiresInMs` after `clock`'s now. */
function tokenFor(
  clock: FakeClock,
  sub: string,
  options: { expiresInMs?: number; inboxes?: string[]; signals?: string[]; key?: string } = {},
): Promise<string> {
  const nowSeconds = Math.floor(clock.now() / 1000);
  return new SignJWT({ hopper: { inboxes: options.inboxes ?? ["chat"], signals: options.signals ?? [] } })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(sub)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + Math.floor((options.expiresInMs ?? 10 * minuteMs) / 1000))
    .sign(new TextEncoder().encode(options.key ?? secret));
}

function openDevice(server: RunningServer, token: string): Promise<TestSocket> {
  return TestSocket.open(server.url, { path: `/v1/ws?token=${encodeURIComponent(token)}` });
}

async function refusedStatus(opening: Promise<TestSocket>): Promise<number> {
  try {
    (await opening).close();
  } catch (error) {
    return (error as { status: number }).status;
  }
  assert.fail("the upgrade was accepted");
}

function closeCodeOf(socket: TestSocket): Promise<number> {
  return new Promise((resolve) => socket.socket.once("close", (code) => resolve(code)));
}

describe("inboxes over /v1/ws", () => {
  // Over 80 lines as a suite only: short tests around one server, each its own function.
  let clock: FakeClock;
  let server: RunningServer;

  before(async () => {
    clock = new FakeClock(Date.now());
    server = await startServer({ dataPath: ":memory:", port: 0, clock, logLevel: false, jwtSecret: secret });
    await server.inboxes.putInbox("chat", {});
    await server.inboxes.putInbox("other", {});
  });
  after(() => server.close());

  async function append(recipient: string, count: number, prefix: string): Promise<void> {
    for (let i = 0; i < count; i++) {
      await server.inboxes.append("chat", {
        recipients: [recipient],
        message: { id: `${prefix}${i}`, body: { i } },
      });
    }
  }

  test("subscribed, entries after the cursor in order, live once, then new entries; ack moves the cursor", async () => {
    await append("ann", 3, "a");
    const socket = await TestSocket.open(server.url);
    const subscribed = await socket.request({
      op: "inbox.subscribe",
      ns: "chat",
      recipient: "ann",
      device: "d1",
      after: 1,
      epoch: (await server.inboxes.getInbox("chat")).epoch,
    });
    assert.equal(subscribed.op, "inbox.subscribed");
    assert.deepEqual([subscribed.head, subscribed.oldest], [3, 1]);
    const live = await socket.waitFor((frame) => frame.op === "inbox.live");
    assert.equal(live.head, 3);
    await append("ann", 1, "b");
    await socket.waitFor(
      (frame) => frame.op === "inbox.entry" && (frame.entries as { seq: number }[]).some((e) => e.seq === 4),
    );
    const ops = socket.frames.map((frame) => frame.op);
    assert.deepEqual(ops, ["inbox.subscribed", "inbox.entry", "inbox.live", "inbox.entry"]);
    const seqs = socket
      .all("inbox.entry")
      .flatMap((frame) => (frame.entries as { seq: number }[]).map((e) => e.seq));
    assert.deepEqual(seqs, [2, 3, 4]);
    const entry = (socket.all("inbox.entry")[0]?.entries as Record<string, unknown>[] | undefined)?.[0];
    assert.deepEqual(entry?.body, { i: 1 });
    assert.equal(entry?.id, "a1");
    const acked = await socket.request({ op: "inbox.ack", sub: subscribed.sub, seq: 4 });
    assert.deepEqual([acked.op, acked.cursor], ["inbox.acked", 4]);
    assert.deepEqual((await server.inboxes.recipient("chat", "ann")).connected, ["d1"]);
    const gone = await socket.request({ op: "inbox.unsubscribe", sub: subscribed.sub });
    assert.equal(gone.op, "inbox.unsubscribed");
    assert.deepEqual((await server.inboxes.recipient("chat", "ann")).connected, []);
    socket.close();
  });

  test("a cursor above 0 without its epoch is invalid_request; a service names the recipient", async () => {
    const socket = await TestSocket.open(server.url);
    const noEpoch = await socket.request({
      op: "inbox.subscribe",
      ns: "chat",
      recipient: "ann",
      device: "d",
      after: 2,
    });
    assert.equal((noEpoch.error as { code: string }).code, "invalid_request");
    const noRecipient = await socket.request({ op: "inbox.subscribe", ns: "chat", device: "d", after: 0 });
    assert.equal((noRecipient.error as { code: string }).code, "invalid_request");
    const missing = await socket.request({
      op: "inbox.subscribe",
      ns: "nope",
      recipient: "ann",
      device: "d",
      after: 0,
    });
    assert.equal((missing.error as { code: string }).code, "inbox_not_found");
    socket.close();
  });

  test("a device token reads and acks its own inbox only, and uses no queue", async () => {
    await append("alice", 2, "al");
    const bob = await openDevice(server, await tokenFor(clock, "bob", { signals: ["room.*"] }));
    const errorOf = (frame: Frame) => (frame.error as { code: string } | undefined)?.code;
    assert.equal(
      errorOf(
        await bob.request({ op: "inbox.subscribe", ns: "chat", recipient: "alice", device: "b", after: 0 }),
      ),
      "forbidden",
    );
    assert.equal(
      errorOf(await bob.request({ op: "inbox.subscribe", ns: "other", device: "b", after: 0 })),
      "forbidden",
    );
    assert.equal(errorOf(await bob.request({ op: "consume", queue: "q", prefetch: 1 })), "forbidden");
    assert.equal(
      errorOf(await bob.request({ op: "send", queue: "q", messages: [{ body: 1 }] })),
      "forbidden",
    );
    assert.equal(errorOf(await bob.request({ op: "signal.subscribe", channel: "dm.alice" })), "forbidden");
    assert.equal((await bob.request({ op: "signal.subscribe", channel: "room.1" })).op, "signal.subscribed");
    const own = await bob.request({ op: "inbox.subscribe", ns: "chat", device: "b", after: 0 });
    assert.equal(own.op, "inbox.subscribed");
    // An ack names a sub of this connection, which is Bob's own: Alice's sub is not here.
    assert.equal(errorOf(await bob.request({ op: "inbox.ack", sub: "999", seq: 1 })), "consumer_not_found");
    assert.deepEqual((await server.inboxes.recipient("chat", "alice")).devices, []);
    bob.close();
  });

  test("expired, badly signed and unconfigured tokens are refused at the upgrade with 401", async () => {
    assert.equal(
      await refusedStatus(openDevice(server, await tokenFor(clock, "bob", { expiresInMs: -60_000 }))),
      401,
    );
    const forged = await tokenFor(clock, "bob", { key: "another-secret-of-at-least-thirty-two-b" });
    assert.equal(await refusedStatus(openDevice(server, forged)), 401);
    assert.equal(await refusedStatus(openDevice(server, "not.a.jwt")), 401);
  });

  test("auth.refresh extends the connection for the same sub only; at exp it is closed with 4001", async () => {
    const socket = await openDevice(server, await tokenFor(clock, "carol", { expiresInMs: 2 * minuteMs }));
    const other = await socket.request({ op: "auth.refresh", token: await tokenFor(clock, "dave") });
    assert.equal((other.error as { code: string }).code, "forbidden");
    const refreshed = await socket.request({
      op: "auth.refresh",
      token: await tokenFor(clock, "carol", { expiresInMs: 5 * minuteMs }),
    });
    assert.equal(refreshed.op, "auth.refreshed");
    const closed = closeCodeOf(socket);
    await clock.advance(3 * minuteMs);
    await settle();
    assert.equal(socket.closed, false, "the refresh moved exp on");
    await clock.advance(3 * minuteMs);
    assert.equal(await closed, tokenExpiredCloseCode);
  });
});

describe("device tokens from a key set", () => {
  test("an ES256 token signed by a key of --jwt-jwks connects; another key's is refused", async () => {
    const dir = createTempDir();
    const clock = new FakeClock(Date.now());
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    const stranger = await generateKeyPair("ES256");
    writeFileSync(
      dir.file("jwks.json"),
      JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }] }),
    );
    const server = await startServer({
      dataPath: ":memory:",
      port: 0,
      clock,
      logLevel: false,
      jwtJwksPath: dir.file("jwks.json"),
    });
    try {
      const sign = (key: CryptoKey) =>
        new SignJWT({ hopper: { inboxes: ["chat"] } })
          .setProtectedHeader({ alg: "ES256", kid: "k1" })
          .setSubject("erin")
          .setExpirationTime(Math.floor(clock.now() / 1000) + 600)
          .sign(key);
      const socket = await openDevice(server, await sign(privateKey));
      socket.close();
      assert.equal(await refusedStatus(openDevice(server, await sign(stranger.privateKey))), 401);
      // An HS256 token is not accepted where a key set is configured (no algorithm confusion).
      assert.equal(await refusedStatus(openDevice(server, await tokenFor(clock, "erin"))), 401);
    } finally {
      await server.close();
      dir.remove();
    }
  });
});
