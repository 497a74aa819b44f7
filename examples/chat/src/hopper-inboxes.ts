/**
 * The inbox routes of Hopper's HTTP API that a service calls (docs/api.md, "Inbox routes"):
 * create the namespace, append, read a recipient's position and devices. @hopper/client covers the
 * device's side (`inboxes.subscribe`); these are the service's side, with the API key.
 */
import { HopperError, type HopperErrorInit } from "@hopper/client";

/** A service call that gets no answer fails after this, and the caller's retry policy takes over. */
const requestTimeoutMs = 10_000;

export interface AppendResult {
  recipient: string;
  seq?: number;
  duplicate?: boolean;
  skipped?: "idle";
}

export interface RecipientInfo {
  recipient: string;
  depth: number;
  head: number;
  oldest: number;
  epoch: string;
  devices: { device: string; cursor: number; lastSeenAt: string }[];
  /** Devices with a live WebSocket subscription now. */
  connected: string[];
}

export interface InboxInfo {
  name: string;
  epoch: string;
  stats: Record<string, number>;
}

export class HopperInboxes {
  constructor(
    private readonly hopper: { url: string; apiKey: string },
    readonly ns: string,
  ) {}

  /** Creates the namespace, or leaves it as it is (an update keeps its epoch). */
  put(attributes: Record<string, unknown> = {}): Promise<InboxInfo> {
    return this.call("PUT", "", attributes) as Promise<InboxInfo>;
  }

  get(): Promise<InboxInfo> {
    return this.call("GET", "") as Promise<InboxInfo>;
  }

  /** Appends one message to every recipient's log; idempotent on (recipient, id). */
  async append(recipients: string[], message: { id: string; body: unknown }): Promise<AppendResult[]> {
    const answer = (await this.call("POST", "/append", { recipients, message })) as {
      results: AppendResult[];
    };
    return answer.results;
  }

  recipient(user: string): Promise<RecipientInfo> {
    return this.call("GET", `/recipients/${encodeURIComponent(user)}`) as Promise<RecipientInfo>;
  }

  private async call(method: string, suffix: string, body?: unknown): Promise<unknown> {
    const response = await fetch(`${this.hopper.url}/v1/inboxes/${encodeURIComponent(this.ns)}${suffix}`, {
      method,
      headers: {
        authorization: `Bearer ${this.hopper.apiKey}`,
        ...(body !== undefined && { "content-type": "application/json" }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(requestTimeoutMs),
    });
    const answer = (await response.json()) as { error?: Omit<HopperErrorInit, "status"> };
    if (!response.ok) {
      const error = answer.error ?? { code: "http_error", message: `HTTP ${response.status}` };
      throw new HopperError({ ...error, status: response.status });
    }
    return answer;
  }
}
