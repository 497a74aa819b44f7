// What the client takes from a browser: its global WebSocket and `fetch`. It replaces platform.ts in a
// browser build (the `browser` field of package.json), so a bundle holds no `ws` and no `node:*`.
import type { HttpTransport } from "./fetch-transport.js";
import type { OpenWebSocket } from "./web-socket.js";

/** The browser's `fetch` is the transport (the client makes it when this answers undefined). */
export function defaultHttpTransport(): HttpTransport | undefined {
  return undefined;
}

/** A browser WebSocket sends no headers: a device authenticates with `?token=` in the URL. */
export const openWebSocket: OpenWebSocket = async (url, _options, events) => {
  const Socket = globalThis.WebSocket;
  if (Socket === undefined) throw new Error("this runtime has no global WebSocket");
  const socket = new Socket(url);
  socket.addEventListener("open", () => events.onOpen());
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string") events.onMessage(event.data);
  });
  // A browser tells no more than that something failed: a refused upgrade looks like this too.
  socket.addEventListener("error", () => events.onError(new Error("the WebSocket failed")));
  socket.addEventListener("close", (event) => events.onClose(event.code));
  return {
    get isOpen() {
      return socket.readyState === Socket.OPEN;
    },
    send: (text) => socket.send(text),
    close: (code) => socket.close(code),
    terminate: () => socket.close(),
  };
};
