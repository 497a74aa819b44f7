// What the client takes from Node: `ws` for WebSockets (Node 20 has no global WebSocket) and
// `node:http` for requests, each loaded on first use. A browser build replaces this file with
// platform-browser.ts (the `browser` field of package.json), so a bundle holds neither.
import type { HttpTransport } from "./fetch-transport.js";
import { nodeHttpAvailable, nodeHttpTransport } from "./http-transport.js";
import type { OpenWebSocket } from "./web-socket.js";

let webSocketModule: Promise<typeof import("ws")> | undefined;

/** The default transport: `node:http` with keep-alive where it exists, else undefined (use `fetch`). */
export function defaultHttpTransport(): HttpTransport | undefined {
  return nodeHttpAvailable() ? nodeHttpTransport() : undefined;
}

export const openWebSocket: OpenWebSocket = async (url, options, events) => {
  webSocketModule ??= import("ws");
  const { WebSocket } = await webSocketModule;
  const socket = new WebSocket(url, {
    headers: options.headers,
    handshakeTimeout: options.handshakeTimeoutMs,
  });
  socket.on("open", () => events.onOpen());
  socket.on("message", (data) => events.onMessage(rawText(data)));
  socket.on("ping", () => events.onPing());
  // The server refused the upgrade with an HTTP answer: read its error body (401, 403, 429).
  socket.on("unexpected-response", (_request, response) => {
    let text = "";
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => {
      text += chunk;
    });
    response.on("end", () => {
      const retryAfter = response.headers["retry-after"];
      events.onRefused(response.statusCode ?? 0, text, typeof retryAfter === "string" ? retryAfter : null);
      socket.terminate();
    });
  });
  socket.on("error", (error) => events.onError(error));
  socket.on("close", (code) => events.onClose(code));
  return {
    get isOpen() {
      return socket.readyState === socket.OPEN;
    },
    send: (text) => socket.send(text),
    close: (code) => socket.close(code),
    terminate: () => socket.terminate(),
  };
};

function rawText(data: Buffer | ArrayBuffer | Buffer[]): string {
  if (Buffer.isBuffer(data)) return data.toString("utf8");
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return Buffer.from(data).toString("utf8");
}
