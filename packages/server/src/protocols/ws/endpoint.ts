/**
 * `GET /v1/ws` (API.md "WebSocket"). The upgrade request passes through Fastify's router and hooks, so
 * it is authenticated exactly as HTTP requests are (API key in `Authorization: Bearer`, or loopback
 * only when no keys are configured) and refused with the same error bodies before any upgrade.
 */
import websocket from "@fastify/websocket";
import type { FastifyInstance } from "fastify";
import type { WebSocket } from "ws";
import type { QueueBroker } from "../../broker/queues.js";
import { SignalHub } from "../../broker/signals.js";
import type { Clock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import { WsConnection } from "./connection.js";

/** One client frame: an ack of 100 receipts is ~7 KiB and a signal at most 7 KiB of data. */
export const frameBytesMax = 256 * 1024;
/** Open WebSocket connections per server: each holds a socket, timers and possibly long polls. */
export const connectionsMax = 10_000;
/** At shutdown, sockets get this long to finish the close handshake before they are cut. */
const closeGraceMs = 1_000;

export interface WebSocketEndpointOptions {
  broker: QueueBroker;
  clock: Clock;
  /** The signal hub; one per server unless a test shares its own. */
  signals?: SignalHub;
}

/** Registers the endpoint on the app; call before the app listens. */
export async function registerWebSocketEndpoint(
  app: FastifyInstance,
  options: WebSocketEndpointOptions,
): Promise<void> {
  const signals = options.signals ?? new SignalHub();
  const connections = new Map<WsConnection, WebSocket>();

  await app.register(websocket, { options: { maxPayload: frameBytesMax } });

  app.get(
    "/v1/ws",
    {
      websocket: true,
      // Runs after the app's authentication hook and before the upgrade, so a refusal is plain HTTP.
      onRequest: async () => {
        if (connections.size >= connectionsMax) {
          throw new HopperError("too_many_connections", undefined, { max: connectionsMax });
        }
      },
    },
    (socket) => {
      const connection = new WsConnection(socket, {
        broker: options.broker,
        signals,
        clock: options.clock,
        log: app.log,
      });
      connections.set(connection, socket);
      void connection.closed.then(() => connections.delete(connection));
    },
  );

  // An upgrade refused by a hook (401, 403, 429) is answered on the raw socket, which nothing else
  // would close: end it once the answer is out.
  app.addHook("onResponse", async (request) => {
    if (request.headers.upgrade !== undefined && !request.ws) request.raw.socket?.destroy();
  });

  // Leases go back to the store while it is still open: the app closes before the store does.
  app.addHook("preClose", async () => {
    const open = [...connections];
    await Promise.all(open.map(([connection]) => connection.close()));
    await closeSockets(open.map(([, socket]) => socket));
  });
}

/** Closes each socket with 1001 (going away), and cuts those that have not finished after a grace. */
async function closeSockets(sockets: WebSocket[]): Promise<void> {
  const closed = sockets.map(
    (socket) =>
      new Promise<void>((resolve) => {
        if (socket.readyState === socket.CLOSED) return resolve();
        socket.once("close", () => resolve());
        socket.close(1001, "server shutting down");
      }),
  );
  const grace = setTimeout(() => {
    for (const socket of sockets) socket.terminate();
  }, closeGraceMs);
  await Promise.all(closed);
  clearTimeout(grace);
}
