/**
 * What a connection authenticated by a device token may do (API.md "WebSocket", docs/websocket.md
 * "Device connections"): only `inbox.*` on its own recipient in the namespaces its token lists, and
 * `signal.*` on the channels its token's patterns match; anything else is `forbidden`. `auth.refresh`
 * replaces the token with a newer one for the same recipient; when the token in force expires, the
 * connection is closed with code 4001, on the injected clock.
 */
import { type DeviceClaims, type DeviceTokens, signalChannelAllowed } from "../../auth/device-tokens.js";
import type { Clock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import type { ClientFrame } from "./frames.js";

/** The WebSocket close code of a connection whose device token expired: 4000–4999 are the application's. */
export const tokenExpiredCloseCode = 4001;

export class DeviceAccess {
  private cancelExpiry: () => void;
  private closed = false;

  constructor(
    private current: DeviceClaims,
    private readonly tokens: DeviceTokens,
    private readonly clock: Clock,
    /** Called once, when the token in force expires. */
    private readonly onExpired: () => void,
  ) {
    this.cancelExpiry = this.armExpiry();
  }

  get claims(): DeviceClaims {
    return this.current;
  }

  /** Throws `forbidden` unless a device with these claims may send the frame. */
  authorize(frame: ClientFrame): void {
    switch (frame.op) {
      case "inbox.subscribe": {
        if (frame.recipient !== undefined && frame.recipient !== this.current.recipient) {
          throw forbidden(`This device token reads only the inbox of "${this.current.recipient}".`);
        }
        if (!this.current.inboxes.includes(frame.ns)) {
          throw forbidden(`This device token does not list inbox namespace "${frame.ns}".`);
        }
        return;
      }
      // A connection's subscriptions are all its own recipient's, so their sub names nothing else.
      case "inbox.ack":
      case "inbox.unsubscribe":
      case "auth.refresh":
      case "signal.unsubscribe":
        return;
      case "signal.subscribe":
      case "signal.publish":
        if (!signalChannelAllowed(this.current, frame.channel)) {
          throw forbidden(`This device token does not allow signal channel "${frame.channel}".`);
        }
        return;
      default:
        throw forbidden(`A device connection may not use "${frame.op}": queues are for services.`);
    }
  }

  /**
   * Verifies `token` and puts it in force, if it names the same recipient; the connection then lasts
   * until its `exp`. A token that does not verify, or names another recipient, is refused and changes
   * nothing.
   */
  async refresh(token: string): Promise<{ op: string; expiresAt: string }> {
    const claims = await this.tokens.verify(token, this.clock.now());
    if (claims.recipient !== this.current.recipient) {
      throw forbidden(`A refresh keeps the recipient: this connection is "${this.current.recipient}"'s.`);
    }
    if (this.closed) throw new HopperError("unauthorized", "The connection's token has expired.");
    this.current = claims;
    this.cancelExpiry();
    this.cancelExpiry = this.armExpiry();
    return { op: "auth.refreshed", expiresAt: new Date(claims.expiresAtMs).toISOString() };
  }

  /** Stops the expiry timer (the connection closed). */
  close(): void {
    this.closed = true;
    this.cancelExpiry();
  }

  private armExpiry(): () => void {
    return this.clock.setTimer(this.current.expiresAtMs, () => {
      if (this.closed) return;
      this.closed = true;
      this.onExpired();
    });
  }
}

function forbidden(message: string): HopperError {
  return new HopperError("forbidden", message);
}
