import type { Clock } from "../clock.js";
import type { ErrorBody, ItemResult, ReceivedMessage, SendMessage, SendResult } from "../types.js";

export interface RecordedRequest {
  method: string;
  /** The path as sent, still percent-encoded, with its query. */
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

interface StoredMessage {
  id: string;
  sent: SendMessage;
  publishedAt: string;
  deliveryCount: number;
  /** Set while leased. */
  receipt: string | undefined;
  leaseExpiresAt: number;
}

interface ParkedReceive {
  queue: string;
  max: number;
  leaseMs: number;
  answer: (messages: ReceivedMessage[]) => void;
}

/**
 * A tiny in-memory Hopper queue server behind a `fetch` function: enough of send, receive (with long
 * polling on the given clock), ack, nack and extend to drive the client and the worker.
 */
export class FakeQueueServer {
  readonly requests: RecordedRequest[] = [];
  readonly acked: string[] = [];
  readonly nacked: string[] = [];
  /** Makes a sent item fail with this error when it returns one. */
  rejectItem: (message: SendMessage) => ErrorBody | undefined = () => undefined;
  /** Answers a receive with this many messages more than `max`, to test a misbehaving server. */
  extraMessagesPerReceive = 0;
  private readonly queues = new Map<string, StoredMessage[]>();
  private readonly parked = new Set<ParkedReceive>();
  private nextId = 1;

  constructor(private readonly clock: Clock) {}

  /** Stores messages directly, without a request. */
  seed(queue: string, count: number): void {
    for (let index = 0; index < count; index++) {
      this.store(queue, { body: { index } });
    }
  }

  /** Ends a message's lease, as if it timed out and another consumer took it. */
  revokeLease(messageId: string): void {
    const message = this.allMessages().find((candidate) => candidate.id === messageId);
    if (message) message.receipt = undefined;
  }

  get parkedReceiveCount(): number {
    return this.parked.size;
  }

  /** The lease length the fake queue reports, as the server's default. */
  visibilityTimeoutMs = 30_000;

  requestsTo(suffix: string): RecordedRequest[] {
    return this.requests.filter((request) => request.path.split("?")[0]?.endsWith(suffix));
  }

  readonly fetch: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    this.requests.push({ method: init?.method ?? "GET", path: url.pathname + url.search, headers, body });
    const [, version, collection, encodedQueue, action] = url.pathname.split("/");
    if (version !== "v1" || collection !== "queues" || encodedQueue === undefined) {
      return json(404, { error: { code: "not_found", message: "no such route" } });
    }
    const queue = decodeURIComponent(encodedQueue);
    switch (action) {
      case undefined:
        // GET /v1/queues/{queue}: the worker reads the lease length from it.
        return json(200, {
          name: queue,
          kind: "standard",
          attributes: { visibilityTimeoutMs: this.visibilityTimeoutMs },
          stats: {},
        });
      case "messages":
        return json(200, { results: (body.messages as SendMessage[]).map((sent) => this.send(queue, sent)) });
      case "receive":
        return json(200, { messages: await this.receive(queue, body, init?.signal ?? undefined) });
      case "ack":
        return json(200, {
          results: this.settleReceipts(body.receipts, (message) => this.ack(queue, message)),
        });
      case "nack":
        return json(200, { results: this.settleReceipts(body.receipts, (message) => this.nack(message)) });
      case "extend":
        return json(200, {
          results: this.settleReceipts(body.receipts, (message) => {
            message.leaseExpiresAt = this.clock.now() + body.visibilityTimeoutMs;
          }),
        });
      default:
        return json(404, { error: { code: "not_found", message: "no such route" } });
    }
  };

  private send(queue: string, sent: SendMessage): SendResult {
    const error = this.rejectItem(sent);
    if (error) return { error };
    return { id: this.store(queue, sent).id, duplicate: false };
  }

  private store(queue: string, sent: SendMessage): StoredMessage {
    const message: StoredMessage = {
      id: `m${this.nextId++}`,
      sent,
      publishedAt: new Date(this.clock.now()).toISOString(),
      deliveryCount: 0,
      receipt: undefined,
      leaseExpiresAt: 0,
    };
    this.messagesOf(queue).push(message);
    for (const waiter of this.parked) {
      const leased = this.lease(waiter.queue, waiter.max, waiter.leaseMs);
      if (leased.length > 0) waiter.answer(leased);
    }
    return message;
  }

  private receive(
    queue: string,
    body: { max?: number; waitMs?: number; visibilityTimeoutMs?: number },
    signal: AbortSignal | undefined,
  ): Promise<ReceivedMessage[]> {
    const max = (body.max ?? 1) + this.extraMessagesPerReceive;
    const leaseMs = body.visibilityTimeoutMs ?? 30_000;
    const leased = this.lease(queue, max, leaseMs);
    if (leased.length > 0 || !body.waitMs) return Promise.resolve(leased);
    return new Promise((resolve, reject) => {
      const waiter: ParkedReceive = { queue, max, leaseMs, answer: (messages) => finish(messages) };
      const timer = this.clock.setTimeout(() => finish([]), body.waitMs ?? 0);
      const onAbort = () => {
        this.parked.delete(waiter);
        this.clock.clearTimeout(timer);
        reject(signal?.reason);
      };
      const finish = (messages: ReceivedMessage[]) => {
        this.parked.delete(waiter);
        this.clock.clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(messages);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.parked.add(waiter);
    });
  }

  private lease(queue: string, max: number, leaseMs: number): ReceivedMessage[] {
    const now = this.clock.now();
    const available = this.messagesOf(queue).filter((message) => !this.isLeased(message, now));
    return available.slice(0, max).map((message) => {
      message.deliveryCount += 1;
      message.receipt = `${message.id}.${message.deliveryCount}`;
      message.leaseExpiresAt = now + leaseMs;
      return {
        id: message.id,
        receipt: message.receipt,
        body: message.sent.body,
        contentType: "application/json",
        headers: message.sent.headers ?? {},
        deliveryCount: message.deliveryCount,
        publishedAt: message.publishedAt,
        firstDeliveredAt: new Date(now).toISOString(),
      };
    });
  }

  private settleReceipts(receipts: string[], settle: (message: StoredMessage) => void): ItemResult[] {
    const now = this.clock.now();
    return receipts.map((receipt) => {
      const message = this.allMessages().find((candidate) => candidate.receipt === receipt);
      if (!message || !this.isLeased(message, now)) {
        return { error: { code: "stale_receipt", message: "the lease is gone" } };
      }
      settle(message);
      return { ok: true };
    });
  }

  private ack(queue: string, message: StoredMessage): void {
    const messages = this.messagesOf(queue);
    messages.splice(messages.indexOf(message), 1);
    this.acked.push(message.id);
  }

  private nack(message: StoredMessage): void {
    message.receipt = undefined;
    this.nacked.push(message.id);
  }

  private isLeased(message: StoredMessage, now: number): boolean {
    return message.receipt !== undefined && message.leaseExpiresAt > now;
  }

  private messagesOf(queue: string): StoredMessage[] {
    let messages = this.queues.get(queue);
    if (!messages) {
      messages = [];
      this.queues.set(queue, messages);
    }
    return messages;
  }

  private allMessages(): StoredMessage[] {
    return [...this.queues.values()].flat();
  }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}
