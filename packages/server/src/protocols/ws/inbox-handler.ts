/**
 * The inbox subscriptions of one WebSocket connection: `inbox.subscribe`, `inbox.ack` and
 * `inbox.unsubscribe` (API.md "WebSocket"). Each subscription (broker/inbox-subscription.ts) writes its
 * frames here; the connection pauses them all when its send buffer is full and resumes them when it
 * drains, and closes them when it closes, which unregisters their devices.
 */
import type { DeviceClaims } from "../../auth/device-tokens.js";
import { InboxSubscription, type InboxSubscriptionSource } from "../../broker/inbox-subscription.js";
import type { Clock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import type { InboxAckFrame, InboxSubscribeFrame, InboxUnsubscribeFrame } from "./inbox-frames.js";
import { inboxEntryFrame } from "./inbox-frames.js";

/** What the connection's inbox frames need of the inbox broker. */
export interface WsInboxes {
  source: InboxSubscriptionSource;
  ack(ns: string, recipient: string, device: string, seq: number): Promise<{ cursor: number }>;
  /** Stats: an ack came `lagMs` after its entry was appended. */
  acked?(ns: string, lagMs: number): void;
}

type Answer = { op: string } & Record<string, unknown>;

export interface ConnectionInboxesContext {
  inboxes: WsInboxes | undefined;
  clock: Clock;
  /** A new subscription id, from the connection's one counter (consumers take theirs from it too). */
  nextSub(): string;
  send(answer: Answer): void;
  sendText(text: string): void;
  /** Whether the connection's send buffer is over its high mark now. */
  sendPaused(): boolean;
  onWarning(error: unknown, sub: string): void;
}

interface Held {
  subscription: InboxSubscription;
  ns: string;
  recipient: string;
  device: string;
}

export class ConnectionInboxes {
  private readonly held = new Map<string, Held>();
  private closing = false;

  constructor(private readonly context: ConnectionInboxesContext) {}

  get size(): number {
    return this.held.size;
  }

  /**
   * Opens a subscription: answers `inbox.subscribed` (with the frame's ref) once the device is
   * registered, then the subscription delivers. `device` is the connection's token, if it has one: its
   * recipient is the one read.
   */
  async subscribe(frame: InboxSubscribeFrame, device: DeviceClaims | undefined): Promise<undefined> {
    const inboxes = this.inboxes();
    if (frame.after > 0 && frame.epoch === undefined) {
      throw new HopperError(
        "invalid_request",
        "A cursor above 0 comes with the epoch it was read in: give epoch.",
        {
          after: frame.after,
        },
      );
    }
    const recipient = frame.recipient ?? device?.recipient;
    if (recipient === undefined) {
      throw new HopperError("invalid_request", "Name the recipient whose inbox to subscribe to.");
    }
    if (this.held.size >= limits.inboxSubscriptionsPerConnectionMax) {
      throw new HopperError(
        "too_many_subscriptions",
        `A connection holds at most ${limits.inboxSubscriptionsPerConnectionMax} inbox subscriptions.`,
        { max: limits.inboxSubscriptionsPerConnectionMax },
      );
    }
    const sub = this.context.nextSub();
    const subscription = new InboxSubscription({
      source: inboxes.source,
      ns: frame.ns,
      recipient,
      device: frame.device,
      after: frame.after,
      epoch: frame.epoch,
      onGap: (position) => this.context.send({ op: "inbox.gap", sub, ...position }),
      onEntries: (entries) => this.context.sendText(inboxEntryFrame(sub, entries)),
      onLive: (head) => this.context.send({ op: "inbox.live", sub, head }),
      onEnd: (error) => {
        this.held.delete(sub);
        this.context.send({ op: "inbox.unsubscribed", sub, error: error.toJSON() });
      },
      onWarning: (error) => this.context.onWarning(error, sub),
    });
    const position = await subscription.open();
    if (this.closing) {
      await subscription.close();
      throw new HopperError("invalid_request", "The connection is closing.");
    }
    this.held.set(sub, { subscription, ns: frame.ns, recipient, device: frame.device });
    // The answer goes out before the first entry: run() may deliver at once.
    const answer = { op: "inbox.subscribed", sub, ...position };
    this.context.send(frame.ref === undefined ? answer : { ...answer, ref: frame.ref });
    if (this.context.sendPaused()) subscription.pause();
    subscription.run();
    return undefined;
  }

  /** Moves the subscription's device cursor to `seq` (never back); answers the cursor. */
  async ack(frame: InboxAckFrame): Promise<Answer> {
    const { subscription, ns, recipient, device } = this.heldOf(frame.sub);
    const { cursor } = await this.inboxes().ack(ns, recipient, device, frame.seq);
    const appendedAt = subscription.appendedAtOf(frame.seq);
    if (appendedAt !== undefined) this.context.inboxes?.acked?.(ns, this.context.clock.now() - appendedAt);
    return { op: "inbox.acked", sub: frame.sub, cursor };
  }

  async unsubscribe(frame: InboxUnsubscribeFrame): Promise<Answer> {
    const { subscription } = this.heldOf(frame.sub);
    this.held.delete(frame.sub);
    await subscription.close();
    return { op: "inbox.unsubscribed", sub: frame.sub };
  }

  pause(): void {
    for (const { subscription } of this.held.values()) subscription.pause();
  }

  /** Resumes the subscriptions, stopping if one of them filled the send buffer again. */
  resume(): void {
    for (const { subscription } of this.held.values()) {
      if (this.context.sendPaused()) return;
      subscription.resume();
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    const held = [...this.held.values()];
    this.held.clear();
    await Promise.all(held.map(({ subscription }) => subscription.close()));
  }

  private inboxes(): WsInboxes {
    const { inboxes } = this.context;
    if (!inboxes) throw new HopperError("not_implemented", "This server has no inboxes.");
    return inboxes;
  }

  private heldOf(sub: string): Held {
    const held = this.held.get(sub);
    if (!held) {
      throw new HopperError("consumer_not_found", `This connection has no inbox subscription "${sub}".`, {
        sub,
      });
    }
    return held;
  }
}
