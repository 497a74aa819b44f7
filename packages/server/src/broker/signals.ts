/**
 * Ephemeral signals (typing, presence): a publish on a channel reaches the listeners subscribed at that
 * moment and nothing else. Nothing is stored, nothing is retried, and a late subscriber sees nothing
 * from before it joined. This is the whole hub: a map from channel to listeners, with bounds.
 */
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { Store } from "../store/store.js";

/** One signal as a listener gets it: the data, and its JSON text, serialized once for every listener. */
export interface Signal {
  channel: string;
  data: unknown;
  dataJson: string;
}

/** Returns false when the signal was dropped (the subscriber cannot take it now). */
export type SignalListener = (signal: Signal) => boolean;

const namePattern = new RegExp(limits.namePattern);

export class SignalHub {
  private readonly listenersByChannel = new Map<string, Set<SignalListener>>();
  private subscriptionCount = 0;

  /**
   * With a store shared by several nodes, signals published here go to the other nodes' subscribers
   * too, and theirs come here. A failed hand-over is reported to `onError`; the local delivery stands.
   */
  constructor(
    private readonly store?: Store,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    store?.watch((event) => {
      if (event.kind === "signal") this.deliver(event.channel, JSON.parse(event.dataJson), event.dataJson);
    });
  }

  /** Adds a listener to the channel; the returned function removes it (and is safe to call twice). */
  subscribe(channel: string, listener: SignalListener): () => void {
    checkChannel(channel);
    if (this.subscriptionCount >= limits.signalSubscriptionsMax) {
      throw new HopperError(
        "too_many_subscriptions",
        "The server holds the most signal subscriptions it allows.",
        {
          max: limits.signalSubscriptionsMax,
        },
      );
    }
    let listeners = this.listenersByChannel.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.listenersByChannel.set(channel, listeners);
    }
    const channelListeners = listeners;
    // A wrapper per subscription, so one function subscribed twice is two subscriptions.
    const entry: SignalListener = (signal) => listener(signal);
    channelListeners.add(entry);
    this.subscriptionCount++;
    return () => {
      if (!channelListeners.delete(entry)) return;
      this.subscriptionCount--;
      if (channelListeners.size === 0) this.listenersByChannel.delete(channel);
    };
  }

  /** Hands `data` to every current listener of the channel; answers how many took it. */
  publish(channel: string, data: unknown): number {
    checkChannel(channel);
    const dataJson = JSON.stringify(data) ?? "null";
    const bytes = Buffer.byteLength(dataJson);
    if (bytes > limits.signalDataBytesMax) {
      throw new HopperError(
        "signal_too_large",
        `The data is ${bytes} bytes; a signal carries at most ${limits.signalDataBytesMax}.`,
        {
          bytes,
          max: limits.signalDataBytesMax,
        },
      );
    }
    this.store?.signalBroadcast({ channel, dataJson }).catch(this.onError);
    return this.deliver(channel, data, dataJson);
  }

  /** Hands one signal to this node's current listeners of the channel; answers how many took it. */
  private deliver(channel: string, data: unknown, dataJson: string): number {
    const listeners = this.listenersByChannel.get(channel);
    if (!listeners) return 0;
    const signal: Signal = { channel, data, dataJson };
    let reached = 0;
    // A copy, so a listener that unsubscribes while being called does not disturb the loop.
    for (const listener of [...listeners]) if (listener(signal)) reached++;
    return reached;
  }

  /** Live subscriptions on a channel (all channels without one), for tests and metrics. */
  subscriptions(channel?: string): number {
    return channel === undefined ? this.subscriptionCount : (this.listenersByChannel.get(channel)?.size ?? 0);
  }
}

function checkChannel(channel: string): void {
  if (!namePattern.test(channel)) {
    throw new HopperError(
      "invalid_name",
      `"${channel.slice(0, limits.refusedNameEchoLengthMax)}" is not a valid channel name.`,
      {
        name: channel.slice(0, limits.refusedNameEchoLengthMax),
      },
    );
  }
}
