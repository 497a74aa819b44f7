/**
 * `GET /v1/ws` (API.md "WebSocket"). The upgrade request passes through Fastify's router and hooks, so
 * it is authenticated exactly as HTTP requests are (API key in `Authorization: Bearer`, or loopback
 * only when no keys are configured) and refused with the same error bodies before any upgrade. An
 * upgrade with `?token=` is a device's: the app's API-key hook leaves it alone (auth/device-tokens.ts isDeviceUpgrade), and
 * it is authenticated here by its JWT alone, from any address.
 */

import websocket from "@fastify/websocket";
import type { FastifyInstance } from "fastify";
import type { WebSocket } from "ws";
import { type DeviceClaims, type DeviceTokens, deviceTokenOf } from "../../auth/device-tokens.js";
import type { QueueBroker } from "../../broker/queues.js";
import { SignalHub } from "../../broker/signals.js";
import type { StreamBroker } from "../../broker/streams.js";
import type { Clock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import { WsConnection } from "./connection.js";
import type { WsInboxes } from "./inbox-handler.js";

export interface WebSocketEndpointOptions {
  broker: QueueBroker;
  clock: Clock;
  /** The signal hub; one per server unless a test shares its own. */
  signals?: SignalHub;
  /** Inbox subscriptions over the socket (broker/inbox-subscription.ts); without it they are refused. */
  inboxes?: WsInboxes;
  /** Stream and share-group consumers over the socket; without it they are refused. */
  streams?: StreamBroker;
  /** Verifies device tokens (`--jwt-secret`, `--jwt-jwks`); without it `?token=` upgrades are refused. */
  deviceTokens?: DeviceTokens;
}

/** Registers the endpoint on the app; call before the app listens. */
export async function registerWebSocketEndpoint(
  app: FastifyInstance,
  options: WebSocketEndpointOptions,
): Promise<void> {
  const signals = options.signals ?? new SignalHub();
  const connections = new Map<WsConnection, WebSocket>();
  /** The claims of each device upgrade, from its verification (onRequest) to its connection. */
  const deviceClaims = new WeakMap<object, DeviceClaims>();

  await app.register(websocket, { options: { maxPayload: limits.wsFrameBytesMax } });

  app.get(
    "/v1/ws",
    {
      websocket: true,
      // Runs after the app's authentication hook and before the upgrade, so a refusal is plain HTTP.
      onRequest: async (request) => {
        if (connections.size >= limits.wsConnectionsMax) {
          throw new HopperError("too_many_connections", undefined, { max: limits.wsConnectionsMax });
        }
        const token = deviceTokenOf(request.url);
        if (token === undefined) return;
        if (!options.deviceTokens) {
          throw new HopperError(
            "unauthorized",
            "This server takes no device tokens (--jwt-secret, --jwt-jwks).",
          );
        }
        deviceClaims.set(request.raw, await options.deviceTokens.verify(token, options.clock.now()));
      },
    },
    (socket, request) => {
      const claims = deviceClaims.get(request.raw);
      const connection = new WsConnection(socket, {
        broker: options.broker,
        signals,
        clock: options.clock,
        log: app.log,
        inboxes: options.inboxes,
        streams: options.streams,
        device: claims && options.deviceTokens && { claims, tokens: options.deviceTokens },
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
  }, limits.wsCloseGraceMs);
  await Promise.all(closed);
  clearTimeout(grace);
}
