import { type Clock, systemClock } from "./clock.js";
import { BatchCoalescer } from "./coalescer.js";
import { type ConsumeOptions, type Consumer, createConsumer } from "./consume.js";
import { clientErrorCodes, HopperError } from "./errors.js";
import { fetchTransport, type HttpAnswer, type HttpTransport } from "./fetch-transport.js";
import { Inboxes } from "./inboxes.js";
import {
  answerExcerptCharsMax,
  receiveWaitMsMax,
  requestTimeoutMsDefault,
  webSocketSendBytesMax,
} from "./limits.js";
import { defaultHttpTransport } from "./platform.js";
import { SharedSocket } from "./shared-socket.js";
import { Signals } from "./signals.js";
import type { SocketTarget } from "./socket.js";
import {
  type Binding,
  type ExchangeInfo,
  type ExchangeType,
  type ItemResult,
  isItemError,
  type PeekedMessage,
  type PeekState,
  type PublishMessage,
  type PublishResult,
  type QueueAttributes,
  type QueueInfo,
  type QueueSummary,
  type ReceivedMessage,
  type RedriveOptions,
  type SendMessage,
  type SendResult,
  type SentMessage,
  type Task,
} from "./types.js";
import { createWorker, type MessageHandler, type Worker, type WorkerOptions } from "./worker.js";

/** Measures a batch's size on the wire (TextEncoder exists in Node and in browsers). */
const utf8 = new TextEncoder();

/**
 * Whether `text` takes more than `max` bytes in UTF-8, encoding it only when its length leaves it open:
 * a UTF-16 code unit takes 1 to 3 bytes (a surrogate pair, two units, takes 4), so the size lies
 * between its length and three times that.
 */
function utf8LongerThan(text: string, max: number): boolean {
  if (text.length > max) return true;
  if (text.length * 3 <= max) return false;
  return utf8.encode(text).byteLength > max;
}

export interface HopperClientOptions {
  /** The server's base URL. Default `http://127.0.0.1:7171`. */
  url?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /**
   * A device token (a JWT the application issued): the client's WebSockets connect as
   * `/v1/ws?token=…`, for `inboxes.subscribe()` and signals from a browser or a phone.
   */
  token?: string;
  /**
   * Sends every HTTP request with this `fetch`, e.g. an in-memory server in tests. Without it the client
   * uses `node:http` with keep-alive connections in Node (less than half the CPU per request of the
   * global `fetch`) and the global `fetch` elsewhere.
   */
  fetch?: typeof fetch;
  /** Timers for request timeouts and for workers. Default: the real clock. */
  clock?: Clock;
  /** How long a request may go unanswered before it fails with `timeout`; a receive adds its wait. */
  requestTimeoutMs?: number;
  /**
   * How `publish()` sends its batches: "http" (default), one request per batch, or "websocket", one
   * frame per batch over a connection the client keeps open (less work per batch on both ends; a batch
   * of more than 192 KiB, too large for one frame, still goes over HTTP). `send()` always uses HTTP.
   */
  publishOver?: "http" | "websocket";
  /** Called as each HTTP request leaves, with its method and path (e.g. to count requests by kind). */
  onRequest?: (method: string, path: string) => void;
}

export interface ReceiveOptions {
  /** 1–100; the server's default is 1. */
  max?: number;
  /** Long poll, 0–20000; the server's default is the queue's `receiveWaitMs`. */
  waitMs?: number;
  /** Lease length; the server's default is the queue's `visibilityTimeoutMs`. */
  visibilityTimeoutMs?: number;
  /**
   * At most once: the server deletes the messages as it hands them out, so there is nothing to ack,
   * and a message is lost if this process fails before it is handled.
   */
  autoAck?: boolean;
  signal?: AbortSignal;
}

export interface NackOptions {
  /** When to deliver again; without it the queue's retry policy decides. Not with `deadLetter`. */
  delayMs?: number;
  /**
   * Rejects the messages for good: each goes to the queue's dead-letter target at once, not retried.
   * A queue with none answers `no_dead_letter_target` per item, and the message stays leased.
   */
  deadLetter?: boolean;
  /** With `deadLetter`: the dead letters' `x-dead-letter-reason`, 1–128 characters; default `rejected`. */
  reason?: string;
}

export interface PeekOptions {
  state?: PeekState;
  limit?: number;
}

export interface PutQueueResult {
  /** True when the queue is new (201), false when it existed and its attributes were updated (200). */
  created: boolean;
  queue: QueueInfo;
}

interface RequestOptions {
  body?: unknown;
  /** False for endpoints whose answer is not JSON, such as the health checks. */
  parseAnswer?: boolean;
  signal?: AbortSignal | undefined;
  timeoutMs?: number;
}

interface Answer {
  status: number;
  body: unknown;
}

/** A typed client for Hopper's native HTTP API. Every non-2xx answer throws a `HopperError`. */
export class HopperClient {
  readonly url: string;
  readonly clock: Clock;
  private readonly apiKey: string | undefined;
  private readonly http: HttpTransport;
  private readonly onRequest: ((method: string, path: string) => void) | undefined;
  private readonly requestTimeoutMs: number;
  private readonly sendBatches = new BatchCoalescer<SendMessage, SendResult>();
  private readonly receiptBatches = new BatchCoalescer<string, ItemResult>();
  /** Ephemeral signals (typing, presence) over one WebSocket, opened on first use; see signals.ts. */
  readonly signals: Signals;
  /** A device's inbox subscriptions (with `token`); see inboxes.ts. */
  readonly inboxes: Inboxes;
  private readonly token: string | undefined;
  /** The connection `publish()` sends over, with `publishOver: "websocket"`. */
  private readonly publishSocket: SharedSocket | undefined;

  constructor(options: HopperClientOptions = {}) {
    this.url = (options.url ?? "http://127.0.0.1:7171").replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.clock = options.clock ?? systemClock;
    this.requestTimeoutMs = options.requestTimeoutMs ?? requestTimeoutMsDefault;
    this.onRequest = options.onRequest;
    this.token = options.token;
    this.http = options.fetch
      ? fetchTransport(options.fetch)
      : (defaultHttpTransport() ??
        // Calling the global fetch as a method of another object throws "Illegal invocation" in browsers.
        fetchTransport((input, init) => globalThis.fetch(input, init)));
    this.signals = new Signals(this.socketTarget());
    this.inboxes = new Inboxes(this.socketTarget());
    this.publishSocket =
      options.publishOver === "websocket"
        ? new SharedSocket(this.socketTarget(), {
            name: "publish",
            // A dropped connection fails the publishes it carried (they reject); the next one reconnects.
            onError: () => {},
          })
        : undefined;
  }

  /** Creates the queue, or updates the attributes of an existing one. */
  async putQueue(name: string, attributes: QueueAttributes = {}): Promise<PutQueueResult> {
    const answer = await this.request("PUT", queuePath(name), { body: attributes });
    return { created: answer.status === 201, queue: answer.body as QueueInfo };
  }

  async getQueue(name: string): Promise<QueueInfo> {
    return (await this.request("GET", queuePath(name))).body as QueueInfo;
  }

  async listQueues(): Promise<QueueSummary[]> {
    return arrayField<QueueSummary>(await this.request("GET", "/v1/queues"), "queues");
  }

  async deleteQueue(name: string): Promise<void> {
    await this.request("DELETE", queuePath(name));
  }

  /** Sends a batch (at most 100); each item succeeds or fails on its own. */
  async send(queue: string, messages: SendMessage[]): Promise<SendResult[]> {
    const answer = await this.request("POST", queuePath(queue, "/messages"), { body: { messages } });
    return batchResults<SendResult>(answer, messages.length);
  }

  /** Leases up to `max` messages, waiting up to `waitMs` for the first one to arrive. */
  async receive(queue: string, options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
    const { signal, ...body } = options;
    const timeoutMs = this.requestTimeoutMs + (body.waitMs ?? receiveWaitMsMax);
    const answer = await this.request("POST", queuePath(queue, "/receive"), { body, signal, timeoutMs });
    return arrayField<ReceivedMessage>(answer, "messages");
  }

  /** Deletes the leased messages; a receipt whose lease ended answers `stale_receipt`. */
  async ack(queue: string, receipts: string[]): Promise<ItemResult[]> {
    const answer = await this.request("POST", queuePath(queue, "/ack"), { body: { receipts } });
    return batchResults<ItemResult>(answer, receipts.length);
  }

  /**
   * Ends the leases so the messages are delivered again, after `delayMs` or the queue's retry policy;
   * with `deadLetter: true`, moves them to the queue's dead-letter target at once instead.
   */
  async nack(queue: string, receipts: string[], options: NackOptions = {}): Promise<ItemResult[]> {
    const body = { receipts, ...options };
    const answer = await this.request("POST", queuePath(queue, "/nack"), { body });
    return batchResults<ItemResult>(answer, receipts.length);
  }

  /** Sets the leases to end `visibilityTimeoutMs` from now. */
  async extend(queue: string, receipts: string[], visibilityTimeoutMs: number): Promise<ItemResult[]> {
    const body = { receipts, visibilityTimeoutMs };
    const answer = await this.request("POST", queuePath(queue, "/extend"), { body });
    return batchResults<ItemResult>(answer, receipts.length);
  }

  /** Reads messages without leasing them, for operators. */
  async peek(queue: string, options: PeekOptions = {}): Promise<PeekedMessage[]> {
    const query = new URLSearchParams();
    if (options.state !== undefined) query.set("state", options.state);
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    const suffix = query.toString() === "" ? "/messages" : `/messages?${query}`;
    return arrayField<PeekedMessage>(await this.request("GET", queuePath(queue, suffix)), "messages");
  }

  async purge(queue: string): Promise<{ purged: number }> {
    return (await this.request("POST", queuePath(queue, "/purge"))).body as { purged: number };
  }

  /** Creates the exchange (`created: true`) or updates its alternate. */
  async putExchange(
    name: string,
    options: { type: ExchangeType; alternate?: string | null },
  ): Promise<{ created: boolean; exchange: ExchangeInfo }> {
    const answer = await this.request("PUT", exchangePath(name), { body: options });
    return { created: answer.status === 201, exchange: answer.body as ExchangeInfo };
  }

  async getExchange(name: string): Promise<ExchangeInfo> {
    return (await this.request("GET", exchangePath(name))).body as ExchangeInfo;
  }

  async listExchanges(): Promise<ExchangeInfo[]> {
    return ((await this.request("GET", "/v1/exchanges")).body as { exchanges: ExchangeInfo[] }).exchanges;
  }

  async deleteExchange(name: string): Promise<void> {
    await this.request("DELETE", exchangePath(name), { parseAnswer: false });
  }

  /** Binds a queue or exchange to the exchange with a pattern; idempotent. */
  async bind(exchange: string, binding: Binding): Promise<{ created: boolean }> {
    const answer = await this.request("PUT", exchangePath(exchange, "/bindings"), { body: binding });
    return { created: answer.status === 201 };
  }

  async unbind(exchange: string, binding: Binding): Promise<void> {
    await this.request("DELETE", exchangePath(exchange, "/bindings"), { body: binding, parseAnswer: false });
  }

  /** Publishes a batch; each message lands in every queue its routing key reaches, or in none. */
  async publishTo(
    exchange: string,
    messages: PublishMessage[],
    options: { mandatory?: boolean } = {},
  ): Promise<PublishResult[]> {
    const answer = await this.request("POST", exchangePath(exchange, "/publish"), {
      body: { messages, ...options },
    });
    return (answer.body as { results: PublishResult[] }).results;
  }

  /**
   * Starts moving the messages of a (dead-letter) queue back to the queue each came from, or to
   * `to`, and answers the running task; follow it with `getTask`. A queue already being redriven
   * answers 409 `redrive_running`.
   */
  async redrive(queue: string, options: RedriveOptions = {}): Promise<Task> {
    const answer = await this.request("POST", queuePath(queue, "/redrive"), { body: options });
    return objectField<Task>(answer, "task");
  }

  /** A task's state and progress; one that ended more than an hour ago answers `task_not_found`. */
  async getTask(id: string): Promise<Task> {
    return (await this.request("GET", taskPath(id))).body as Task;
  }

  /** The server's running tasks and those that ended within the hour. */
  async listTasks(): Promise<Task[]> {
    return arrayField<Task>(await this.request("GET", "/v1/tasks"), "tasks");
  }

  /**
   * Stops a running task before its next step (a step under way completes: what it moved stays
   * moved) and answers the task; a task that already ended is answered as it is.
   */
  async cancelTask(id: string): Promise<Task> {
    return (await this.request("POST", taskPath(id, "/cancel"))).body as Task;
  }

  /** Resolves when the server process is up; throws otherwise. */
  async health(): Promise<void> {
    await this.request("GET", "/healthz", { parseAnswer: false });
  }

  /** Resolves when the server can reach its store; throws otherwise. */
  async ready(): Promise<void> {
    await this.request("GET", "/readyz", { parseAnswer: false });
  }

  /**
   * Sends one message, with its `dedupId` and `priority` as given, and answers `{ id, duplicate }`.
   * Calls for the same queue made in the same event-loop turn share one `send` batch of at most 100,
   * in call order, so many publishes can be in flight over few connections. An item error rejects only
   * its caller; a failed request, such as 429 `queue_full`, rejects every caller in that batch.
   */
  async publish(queue: string, message: SendMessage): Promise<SentMessage> {
    const result = await this.sendBatches.add(queue, message, (messages) =>
      this.publishSocket
        ? this.sendOverSocket(this.publishSocket, queue, messages)
        : this.send(queue, messages),
    );
    if (isItemError(result)) {
      throw HopperError.fromItem(result.error, 200);
    }
    return result;
  }

  /**
   * One send batch as a `send` frame on the publish connection; answers as `send()` does. A batch too
   * large for one frame goes over HTTP.
   */
  private async sendOverSocket(
    socket: SharedSocket,
    queue: string,
    messages: SendMessage[],
  ): Promise<SendResult[]> {
    const frameJson = JSON.stringify({ op: "send", queue, messages });
    if (utf8LongerThan(frameJson, webSocketSendBytesMax)) {
      return this.send(queue, messages);
    }
    const session = await socket.ready();
    const answer = await session.requestJson(frameJson, "send");
    return answer.results as SendResult[];
  }

  /** Closes the connections the client keeps open (HTTP keep-alive, publishing over a WebSocket, signals). */
  async close(): Promise<void> {
    this.http.close();
    await Promise.all([this.publishSocket?.close(), this.signals.close(), this.inboxes.close()]);
  }

  /** Acks one receipt in a coalesced batch; an item error is answered, not thrown. */
  ackLater(queue: string, receipt: string): Promise<ItemResult> {
    return this.receiptBatches.add(`ack\n${queue}`, receipt, (receipts) => this.ack(queue, receipts));
  }

  /** Nacks one receipt in a coalesced batch; an item error is answered, not thrown. */
  nackLater(queue: string, receipt: string, options: NackOptions = {}): Promise<ItemResult> {
    const rejected = options.deadLetter ? `dead\n${options.reason ?? ""}` : "";
    const key = `nack\n${queue}\n${options.delayMs ?? ""}\n${rejected}`;
    return this.receiptBatches.add(key, receipt, (receipts) => this.nack(queue, receipts, options));
  }

  /** Extends one lease in a coalesced batch; an item error is answered, not thrown. */
  extendLater(queue: string, receipt: string, visibilityTimeoutMs: number): Promise<ItemResult> {
    const key = `extend\n${queue}\n${visibilityTimeoutMs}`;
    return this.receiptBatches.add(key, receipt, (receipts) =>
      this.extend(queue, receipts, visibilityTimeoutMs),
    );
  }

  /** Starts a worker that runs `handler` for each message of `queue`; see worker.ts. */
  worker(queue: string, handler: MessageHandler, options: WorkerOptions = {}): Worker {
    return createWorker(this, queue, handler, options);
  }

  /**
   * Consumes `queue` over a WebSocket: the server pushes up to `prefetch` messages at a time, and the
   * connection is replaced if it drops; see consume.ts.
   */
  consume(queue: string, handler: MessageHandler, options: ConsumeOptions = {}): Consumer {
    return createConsumer(this.socketTarget(), queue, handler, options);
  }

  private socketTarget(): SocketTarget {
    return {
      url: this.url,
      apiKey: this.apiKey,
      token: this.token,
      clock: this.clock,
      requestTimeoutMs: this.requestTimeoutMs,
    };
  }

  /** Sends one request and parses its JSON answer; every failure becomes a `HopperError`. */
  private async request(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const { signal } = options;
    if (signal?.aborted) {
      throw abortedError(signal.reason);
    }
    const controller = new AbortController();
    const abortFromCaller = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", abortFromCaller, { once: true });
    let timedOut = false;
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    const timer = this.clock.setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      let answer: HttpAnswer;
      this.onRequest?.(method, path);
      try {
        answer = await this.http.request({
          method,
          url: this.url + path,
          headers: this.headers(options.body !== undefined),
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          signal: controller.signal,
        });
      } catch (cause) {
        if (timedOut) {
          const message = `${method} ${path}: no answer within ${timeoutMs} ms`;
          throw new HopperError({ code: clientErrorCodes.timeout, message, status: 0, cause });
        }
        if (signal?.aborted) {
          throw abortedError(cause);
        }
        const message = `${method} ${path}: ${cause instanceof Error ? cause.message : String(cause)}`;
        throw new HopperError({ code: clientErrorCodes.network, message, status: 0, cause });
      }
      const { status, text } = answer;
      if (status < 200 || status > 299) {
        throw HopperError.fromResponse(status, text, answer.retryAfter);
      }
      const body = options.parseAnswer === false ? undefined : parseJsonAnswer(text, status);
      return { status, body };
    } finally {
      this.clock.clearTimeout(timer);
      signal?.removeEventListener("abort", abortFromCaller);
    }
  }

  private headers(hasBody: boolean): Record<string, string> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (hasBody) headers["content-type"] = "application/json";
    if (this.apiKey !== undefined) headers.authorization = `Bearer ${this.apiKey}`;
    return headers;
  }
}

function queuePath(name: string, suffix = ""): string {
  return `/v1/queues/${encodePathSegment(name)}${suffix}`;
}

function exchangePath(name: string, suffix = ""): string {
  return `/v1/exchanges/${encodePathSegment(name)}${suffix}`;
}

function taskPath(id: string, suffix = ""): string {
  return `/v1/tasks/${encodePathSegment(id)}${suffix}`;
}

/**
 * Percent-encodes a name for a URL path. "." and ".." are refused because URLs resolve them as
 * relative segments (even when encoded), so the request would reach a different resource.
 */
function encodePathSegment(name: string): string {
  if (name === "" || name === "." || name === "..") {
    const message = `"${name}" cannot be used as a name in a URL path`;
    throw new HopperError({ code: "invalid_name", message, status: 0 });
  }
  return encodeURIComponent(name);
}

function abortedError(cause: unknown): HopperError {
  return new HopperError({ code: clientErrorCodes.aborted, message: "request aborted", status: 0, cause });
}

function parseJsonAnswer(text: string, status: number): unknown {
  if (text === "") {
    return undefined;
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    const message = `answer is not JSON: ${text.slice(0, answerExcerptCharsMax)}`;
    throw new HopperError({ code: clientErrorCodes.invalidResponse, message, status, cause });
  }
}

function arrayField<T>(answer: Answer, name: string): T[] {
  const value = (answer.body as Record<string, unknown> | undefined)?.[name];
  if (!Array.isArray(value)) {
    const message = `answer has no "${name}" array`;
    throw new HopperError({ code: clientErrorCodes.invalidResponse, message, status: answer.status });
  }
  return value as T[];
}

function objectField<T>(answer: Answer, name: string): T {
  const value = (answer.body as Record<string, unknown> | undefined)?.[name];
  if (typeof value !== "object" || value === null) {
    const message = `answer has no "${name}" object`;
    throw new HopperError({ code: clientErrorCodes.invalidResponse, message, status: answer.status });
  }
  return value as T;
}

/** A batch answer must hold one result per item, in order (API.md). */
function batchResults<T>(answer: Answer, itemCount: number): T[] {
  const results = arrayField<T>(answer, "results");
  if (results.length !== itemCount) {
    const message = `answer has ${results.length} results for ${itemCount} items`;
    throw new HopperError({ code: clientErrorCodes.invalidResponse, message, status: answer.status });
  }
  return results;
}
