// Ephemeral signals (typing, presence) over the WebSocket: publish reaches whoever is subscribed at that
// moment; nothing is stored, so a subscriber hears only what is published while it is connected. One
// connection serves all of a client's subscriptions and is replaced if it drops, subscribing again.
import { clientErrorCodes, HopperError } from "./errors.js";
import { type ServerFrame, SocketSession, type SocketTarget } from "./socket.js";

export type SignalListener = (data: unknown, channel: string) => void;

export interface SignalSubscription {
  /** Stops this listener; the channel is left when its last listener goes. */
  unsubscribe(): Promise<void>;
}

export interface SignalsOptions {
  /** Receives connection failures and errors thrown by listeners. */
  onError?: (error: unknown) => void;
}

/** `client.signals`: subscribe to and publish on signal channels. */
export class Signals {
  private session: SocketSession | undefined;
  private readonly listeners = new Map<string, Set<SignalListener>>();
  /** Resolves once the connection now being made has subscribed again; replaced on each drop. */
  private connected: Promise<void> | undefined;
  private markConnected: (() => void) | undefined;
  private onError: (error: unknown) => void = (error) => console.error("hopper signals:", error);

  constructor(private readonly target: SocketTarget) {}

  /** Where connection errors go (default: console.error). */
  configure(options: SignalsOptions): void {
    if (options.onError) this.onError = options.onError;
  }

  /** Calls `listener` with every signal published on `channel` from now on. */
  async subscribe(channel: string, listener: SignalListener): Promise<SignalSubscription> {
    let channelListeners = this.listeners.get(channel);
    const first = !channelListeners;
    if (!channelListeners) {
      channelListeners = new Set();
      this.listeners.set(channel, channelListeners);
    }
    const entry: SignalListener = (data, from) => listener(data, from);
    channelListeners.add(entry);
    try {
      const session = await this.ready();
      if (first) await session.request({ op: "signal.subscribe", channel });
    } catch (error) {
      this.remove(channel, entry);
      throw error;
    }
    return { unsubscribe: () => this.unsubscribe(channel, entry) };
  }

  /** Sends `data` (any JSON value) to the channel's current subscribers; answers how many it reached. */
  async publish(channel: string, data: unknown): Promise<number> {
    const session = await this.ready();
    const answer = await session.request({ op: "signal.publish", channel, data });
    return typeof answer.delivered === "number" ? answer.delivered : 0;
  }

  /** Closes the connection; subscriptions end. */
  async close(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    this.connected = undefined;
    this.listeners.clear();
    await session?.close();
  }

  private async unsubscribe(channel: string, entry: SignalListener): Promise<void> {
    if (!this.remove(channel, entry) || this.listeners.has(channel) || !this.session) return;
    try {
      await this.session.request({ op: "signal.unsubscribe", channel });
    } catch (error) {
      // Not connected: the server forgot the subscription with the connection anyway.
      if (!(error instanceof HopperError && error.code === clientErrorCodes.network)) throw error;
    }
  }

  /** Removes one listener; answers whether it was there. */
  private remove(channel: string, entry: SignalListener): boolean {
    const channelListeners = this.listeners.get(channel);
    if (!channelListeners?.delete(entry)) return false;
    if (channelListeners.size === 0) this.listeners.delete(channel);
    return true;
  }

  /** The session, once its connection is open and has subscribed to every channel again. */
  private async ready(): Promise<SocketSession> {
    if (!this.session) {
      this.expectConnection();
      this.session = new SocketSession(this.target, {
        onOpen: async (session) => {
          await Promise.all(
            [...this.listeners.keys()].map((channel) => session.request({ op: "signal.subscribe", channel })),
          );
          this.markConnected?.();
        },
        onPush: (frame) => this.onPush(frame),
        onClose: () => this.expectConnection(),
        onError: (error) => this.onError(error),
      });
    }
    const session = this.session;
    await this.waitForConnection();
    return session;
  }

  /** Waits for the connection, at most the client's request timeout. */
  private async waitForConnection(): Promise<void> {
    const { clock, requestTimeoutMs } = this.target;
    let timer: unknown;
    const timeout = new Promise<never>((_, reject) => {
      timer = clock.setTimeout(() => {
        const message = `signals: not connected within ${requestTimeoutMs} ms`;
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

  private onPush(frame: ServerFrame): void {
    if (frame.op !== "signal" || typeof frame.channel !== "string") return;
    for (const listener of [...(this.listeners.get(frame.channel) ?? [])]) {
      try {
        listener(frame.data, frame.channel);
      } catch (error) {
        this.onError(error);
      }
    }
  }
}
