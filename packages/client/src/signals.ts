// Ephemeral signals (typing, presence) over the WebSocket: publish reaches whoever is subscribed at that
// moment; nothing is stored, so a subscriber hears only what is published while it is connected. One
// connection serves all of a client's subscriptions and is replaced if it drops, subscribing again.
import { clientErrorCodes, HopperError } from "./errors.js";
import { SharedSocket } from "./shared-socket.js";
import type { ServerFrame, SocketTarget } from "./socket.js";

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
  private readonly socket: SharedSocket;
  private readonly listeners = new Map<string, Set<SignalListener>>();
  private onError: (error: unknown) => void = (error) => console.error("hopper signals:", error);

  constructor(target: SocketTarget) {
    this.socket = new SharedSocket(target, {
      name: "signals",
      // A new connection subscribes again to every channel with listeners.
      onOpen: async (session) => {
        await Promise.all(
          [...this.listeners.keys()].map((channel) => session.request({ op: "signal.subscribe", channel })),
        );
      },
      onPush: (frame) => this.onPush(frame),
      onError: (error) => this.onError(error),
    });
  }

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
      const session = await this.socket.ready();
      if (first) await session.request({ op: "signal.subscribe", channel });
    } catch (error) {
      this.remove(channel, entry);
      throw error;
    }
    return { unsubscribe: () => this.unsubscribe(channel, entry) };
  }

  /** Sends `data` (any JSON value) to the channel's current subscribers; answers how many it reached. */
  async publish(channel: string, data: unknown): Promise<number> {
    const session = await this.socket.ready();
    const answer = await session.request({ op: "signal.publish", channel, data });
    return typeof answer.delivered === "number" ? answer.delivered : 0;
  }

  /** Closes the connection; subscriptions end. */
  async close(): Promise<void> {
    this.listeners.clear();
    await this.socket.close();
  }

  private async unsubscribe(channel: string, entry: SignalListener): Promise<void> {
    const session = this.socket.current;
    if (!this.remove(channel, entry) || this.listeners.has(channel) || !session) return;
    try {
      await session.request({ op: "signal.unsubscribe", channel });
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
