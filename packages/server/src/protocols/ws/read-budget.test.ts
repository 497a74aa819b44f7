/**
 * The read budget of one WebSocket connection (connection.ts, limits.wsReadBytesPerTurnMax): frames
 * read in one turn of the event loop past the budget stop the socket's reading until the next turn, so
 * a publisher with a deep window cannot hold the event loop while other connections' frames wait.
 * Driven through a stand-in socket, so that what is read in one turn is exactly what the test emits.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { test } from "node:test";
import type { WebSocket } from "ws";
import type { QueueBroker } from "../../broker/queues.js";
import { SignalHub } from "../../broker/signals.js";
import { FakeClock } from "../../clock.js";
import { limits } from "../../limits.js";
import { WsConnection } from "./connection.js";

class StandInSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  bufferedAmount = 0;
  calls: string[] = [];
  sent = 0;
  pause(): void {
    this.calls.push("pause");
  }
  resume(): void {
    this.calls.push("resume");
  }
  send(_data: string | Buffer, _options: { binary: boolean }, callback?: () => void): void {
    this.sent++;
    callback?.();
  }
  ping(): void {}
  terminate(): void {}
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** A connection on a stand-in socket; its frames need no broker (signal.publish, or refused ones). */
/** A frame of about 6 KB that the connection answers without a broker. */
const frame = Buffer.from(JSON.stringify({ op: "signal.publish", channel: "c", data: "x".repeat(6000) }));

function standInConnection(): { socket: StandInSocket; connection: WsConnection } {
  const socket = new StandInSocket();
  const connection = new WsConnection(socket as unknown as WebSocket, {
    broker: {} as QueueBroker,
    signals: new SignalHub(),
    clock: new FakeClock(),
    log: { warn() {}, error() {} },
  });
  return { socket, connection };
}

test("frames past the read budget of a turn stop reading until the next turn", async () => {
  const { socket, connection } = standInConnection();
  const framesToBudget = Math.ceil(limits.wsReadBytesPerTurnMax / (frame.length + 2));
  try {
    for (let i = 0; i < framesToBudget - 1; i++) socket.emit("message", frame, false);
    assert.deepEqual(socket.calls, [], "under the budget, reading goes on");
    socket.emit("message", frame, false);
    assert.deepEqual(socket.calls, ["pause"], "the frame that reaches the budget stops reading");
    // Frames the socket had already read still run in this turn; the pause is not repeated.
    socket.emit("message", frame, false);
    assert.deepEqual(socket.calls, ["pause"]);
    await nextTurn();
    assert.deepEqual(socket.calls, ["pause", "resume"], "the next turn reads again");
    assert.equal(socket.sent, framesToBudget + 1, "every frame read was answered");

    // The budget starts over each turn: a turn below it does not stop reading.
    for (let i = 0; i < framesToBudget - 1; i++) socket.emit("message", frame, false);
    await nextTurn();
    for (let i = 0; i < framesToBudget - 1; i++) socket.emit("message", frame, false);
    assert.deepEqual(socket.calls, ["pause", "resume"]);
  } finally {
    await connection.close();
  }
});

test("a connection closed in the turn its budget ran out still reads again, so the peer's close frame is read", async () => {
  const { socket, connection } = standInConnection();
  for (let read = 0; read < limits.wsReadBytesPerTurnMax; read += frame.length)
    socket.emit("message", frame, false);
  assert.deepEqual(socket.calls, ["pause"]);
  await connection.close();
  await nextTurn();
  assert.deepEqual(socket.calls, ["pause", "resume"]);
});

test("empty frames use up the budget too: one turn of them stops reading", async () => {
  const { socket, connection } = standInConnection();
  try {
    // Each is answered with an error within microtasks, which run between the groups below without
    // ending the turn, so the bound on frames in flight never stops reading here.
    for (let read = 0; read < limits.wsReadBytesPerTurnMax; read += 2 * 32) {
      for (let i = 0; i < 32; i++) socket.emit("message", Buffer.alloc(0), false);
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
    assert.deepEqual(socket.calls, ["pause"]);
    await nextTurn();
    assert.deepEqual(socket.calls, ["pause", "resume"]);
  } finally {
    await connection.close();
  }
});
