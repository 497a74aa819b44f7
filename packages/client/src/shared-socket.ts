// A WebSocket that a part of the client opens on first use and keeps: it is replaced when it drops,
// and `ready()` waits (at most the request timeout) until the connection open now has been set up.
// Signals use one to subscribe and publish; `publish()` uses one to send when the client sends over
// the WebSocket.
import { clientErrorCodes, HopperError } from "./errors.js";
import { type ServerFrame, SocketSession, type SocketTarget } from "./socket.js";

export interface SharedSocketHooks {
  /** Names the socket in errors: "signals", "sends". */
  name: string;
  /** Runs on every new connection before `ready()` answers (to subscribe again, say). */
  onOpen?: (session: SocketSession) => Promise<void>;
  onPush?: (frame: ServerFrame) => void;
  onError: (error: unknown) => void;
}

export class SharedSocket {
  private session: SocketSession | undefined;
  /** Resolves once the connection now being made is set up; replaced on each drop. */
  private connected: Promise<void> | undefined;
  private markConnected: (() => void) | undefined;

  constructor(
    private readonly target: SocketTarget,
    private readonly hooks: SharedSocketHooks,
  ) {}

  /** The session, if one was opened; it may be between connections. */
  get current(): SocketSession | undefined {
    return this.session;
  }

  /** The session, once its connection is open and set up. */
  async ready(): Promise<SocketSession> {
    if (!this.session) {
      this.expectConnection();
      this.session = new SocketSession(this.target, {
        onOpen: async (session) => {
          await this.hooks.onOpen?.(session);
          this.markConnected?.();
        },
        onPush: (frame) => this.hooks.onPush?.(frame),
        onClose: () => this.expectConnection(),
        onError: (error) => this.hooks.onError(error),
      });
    }
    const session = this.session;
    await this.waitForConnection();
    return session;
  }

  async close(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    this.connected = undefined;
    await session?.close();
  }

  /** Waits for the connection, at most the client's request timeout. */
  private async waitForConnection(): Promise<void> {
    const { clock, requestTimeoutMs } = this.target;
    let timer: unknown;
    const timeout = new Promise<never>((_, reject) => {
      timer = clock.setTimeout(() => {
        const message = `${this.hooks.name}: not connected within ${requestTimeoutMs} ms`;
        reject(new HopperError({ code: clientErrorCodes.network, message, status: 0 }));
      }, requestTimeoutMs);
    });
    try {
      await Promise.race([this.connected, timeout]);
    } finally {
      clock.clearTimeout(timer);
    }
  }

  private expectConnection(): void {
    this.connected = new Promise((resolve) => {
      this.markConnected = resolve;
    });
  }
}
