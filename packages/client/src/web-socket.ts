// The WebSocket as the client's sessions use it, whatever implements it: `ws` in Node (platform.ts) or
// the browser's own WebSocket (platform-browser.ts). It imports nothing.

/** What a session needs of one WebSocket connection. */
export interface ClientWebSocket {
  /** True while frames can be sent. */
  readonly isOpen: boolean;
  send(text: string): void;
  /** Starts the closing handshake. */
  close(code?: number): void;
  /** Drops the connection at once (a browser, which cannot, closes it). */
  terminate(): void;
}

/** What the connection tells its session; each is called on the implementation's events. */
export interface ClientWebSocketEvents {
  onOpen(): void;
  /** A text frame. */
  onMessage(text: string): void;
  /** The server pinged (Node only: a browser answers pings without telling). */
  onPing(): void;
  /** The server refused the upgrade with an HTTP answer (Node only: a browser sees only an error). */
  onRefused(status: number, text: string, retryAfter: string | null): void;
  onError(error: Error): void;
  /** The connection ended, with the close code. */
  onClose(code: number): void;
}

export interface WebSocketOptions {
  /** Sent with the upgrade where the platform can (Node); a browser sends none. */
  headers: Record<string, string>;
  handshakeTimeoutMs: number;
}

/** Opens a connection to `url` (ws:// or wss://), telling `events` what happens to it. */
export type OpenWebSocket = (
  url: string,
  options: WebSocketOptions,
  events: ClientWebSocketEvents,
) => Promise<ClientWebSocket>;
