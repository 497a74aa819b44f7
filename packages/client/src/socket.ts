// One WebSocket to `/v1/ws` that reconnects by itself. It matches answers to requests by `ref`, hands
// every other frame (deliveries, signals) to its owner, and tells the owner when a connection opens
// (to consume or subscribe again) and when it ends (everything held on it is gone).
import { type Clock, type ClockTimer, interruptibleWait } from "./clock.js";
import { clientErrorCodes, HopperError } from "./errors.js";
import {
  answerExcerptCharsMax,
  receiveBackoffMsMax,
  receiveBackoffMsMin,
  serverSilenceMsMax,
} from "./limits.js";
import { openWebSocket } from "./platform.js";
import type { ErrorBody } from "./types.js";
import type { ClientWebSocket } from "./web-socket.js";

/** Where and how to connect; the HopperClient gives its own. */
export interface SocketTarget {
  /** The server's base URL, http(s)://… */
  url: string;
  apiKey: string | undefined;
  /** A device token (JWT): the connection is opened as `/v1/ws?token=…` (browsers send no headers). */
  token?: string | undefined;
  clock: Clock;
  /** An answer later than this ends the connection, as a request timeout does over HTTP. */
  requestTimeoutMs: number;
}

/** A frame from the server: an answer (it carries the request's `ref`), a push, or an error. */
export interface ServerFrame {
  op: string;
  ref?: string | number;
  [field: string]: unknown;
}

export interface SocketSessionEvents {
  /** A connection opened: set up what the session is for. A rejection ends that connection. */
  onOpen(session: SocketSession): Promise<void>;
  /** A frame that answers no request: `deliver`, `signal`, `cancelled`. */
  onPush(frame: ServerFrame): void;
  /** A connection ended; what was held on it (leases, subscriptions) is gone. */
  onClose(): void;
  onError(error: unknown): void;
}

interface PendingAnswer {
  resolve(frame: ServerFrame): void;
  reject(error: unknown): void;
  timer: ClockTimer;
}

export class SocketSession {
  /** Resolves once close() has run and no connection is open. */
  readonly done: Promise<void>;
  private socket: ClientWebSocket | undefined;
  private stopped = false;
  private nextRef = 1;
  private readonly answers = new Map<number, PendingAnswer>();
  private wakePause: (() => void) | undefined;
  private lastHeardAt = 0;
  private silenceTimer: ClockTimer | undefined;

  constructor(
    private readonly target: SocketTarget,
    private readonly events: SocketSessionEvents,
  ) {
    this.done = this.run();
  }

  /** Sends a frame and resolves with its answer; rejects with the server's error, or when the connection ends first. */
  request(frame: { op: string } & Record<string, unknown>): Promise<ServerFrame> {
    return this.requestJson(JSON.stringify(frame), frame.op);
  }

  /**
   * As request(), for a frame its caller has already serialized: `frameJson` is a JSON object (without
   * `ref`, which is added here) and `op` names it in errors. A frame is serialized once this way, even
   * when its caller must first know its size.
   */
  requestJson(frameJson: string, op: string): Promise<ServerFrame> {
    const socket = this.socket;
    if (!socket?.isOpen) {
      return Promise.reject(
        new HopperError({
          code: clientErrorCodes.network,
          message: "the WebSocket is not connected",
          status: 0,
        }),
      );
    }
    const ref = this.nextRef++;
    const { clock, requestTimeoutMs } = this.target;
    return new Promise((resolve, reject) => {
      const timer = clock.setTimeout(() => {
        this.answers.delete(ref);
        const message = `${op}: no answer within ${requestTimeoutMs} ms`;
        reject(new HopperError({ code: clientErrorCodes.timeout, message, status: 0 }));
        // A server that stopped answering on this connection may answer on a new one.
        socket.terminate();
      }, requestTimeoutMs);
      this.answers.set(ref, { resolve, reject, timer });
      socket.send(`${frameJson.slice(0, -1)},"ref":${ref}}`);
    });
  }

  /** Ends the connection that is open now; the session connects again after a pause. */
  reconnect(): void {
    this.socket?.terminate();
  }

  /** Stops reconnecting, closes the connection and resolves once it is closed. Idempotent. */
  close(): Promise<void> {
    this.stopped = true;
    this.wakePause?.();
    this.socket?.close(1000);
    return this.done;
  }

  private async run(): Promise<void> {
    let failuresInRow = 0;
    while (!this.stopped) {
      const established = await this.connectOnce();
      if (this.stopped) break;
      // A connection that worked and then dropped waits the shortest pause; failures in a row wait longer.
      failuresInRow = established ? 1 : failuresInRow + 1;
      await this.pause(backoffMs(failuresInRow));
    }
  }

  /** Opens one connection and resolves when it has ended: true if it got as far as onOpen's success. */
  private async connectOnce(): Promise<boolean> {
    if (this.stopped) return false;
    const headers: Record<string, string> = {};
    if (this.target.apiKey !== undefined) headers.authorization = `Bearer ${this.target.apiKey}`;
    let established = false;
    let reported = false;
    const report = (error: unknown) => {
      if (reported) return;
      reported = true;
      this.events.onError(error);
    };
    let socket: ClientWebSocket | undefined;
    let opened = false;
    return new Promise<boolean>((resolve) => {
      const url = webSocketUrl(this.target.url, this.target.token);
      const options = { headers, handshakeTimeoutMs: this.target.requestTimeoutMs };
      openWebSocket(url, options, {
        onOpen: () => {
          const open = socket as ClientWebSocket;
          if (this.stopped) {
            open.close(1000);
            return;
          }
          opened = true;
          this.socket = open;
          this.heard();
          this.events.onOpen(this).then(
            () => {
              established = true;
            },
            (error) => {
              report(error);
              open.close(1000);
            },
          );
        },
        onMessage: (text) => {
          this.heard();
          this.onMessage(text);
        },
        onPing: () => this.heard(),
        onRefused: (status, text, retryAfter) => report(HopperError.fromResponse(status, text, retryAfter)),
        onError: (cause) =>
          report(
            new HopperError({
              code: clientErrorCodes.network,
              message: `WebSocket: ${cause.message}`,
              status: 0,
              cause,
            }),
          ),
        onClose: () => {
          const wasOpen = opened && this.socket === socket;
          if (wasOpen) this.socket = undefined;
          this.stopSilenceTimer();
          this.rejectAnswers();
          if (wasOpen) this.events.onClose();
          resolve(established);
        },
      }).then(
        (made) => {
          socket = made;
        },
        (error) => {
          report(error);
          resolve(false);
        },
      );
    });
  }

  private onMessage(text: string): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(text) as ServerFrame;
    } catch (cause) {
      const message = `frame is not JSON: ${text.slice(0, answerExcerptCharsMax)}`;
      this.events.onError(
        new HopperError({ code: clientErrorCodes.invalidResponse, message, status: 0, cause }),
      );
      return;
    }
    const pending = typeof frame.ref === "number" ? this.answers.get(frame.ref) : undefined;
    if (!pending) {
      if (frame.op === "error") this.events.onError(errorFrom(frame));
      else this.events.onPush(frame);
      return;
    }
    this.answers.delete(frame.ref as number);
    this.target.clock.clearTimeout(pending.timer);
    if (frame.op === "error") pending.reject(errorFrom(frame));
    else pending.resolve(frame);
  }

  private rejectAnswers(): void {
    for (const pending of this.answers.values()) {
      this.target.clock.clearTimeout(pending.timer);
      pending.reject(
        new HopperError({
          code: clientErrorCodes.network,
          message: "the WebSocket closed before the answer",
          status: 0,
        }),
      );
    }
    this.answers.clear();
  }

  /** Notes that the server was heard from, and makes sure a silence check is pending. */
  private heard(): void {
    const { clock } = this.target;
    this.lastHeardAt = clock.now();
    if (this.silenceTimer !== undefined) return;
    const check = () => {
      const silentMs = clock.now() - this.lastHeardAt;
      if (silentMs >= serverSilenceMsMax) {
        this.silenceTimer = undefined;
        this.socket?.terminate();
        return;
      }
      this.silenceTimer = clock.setTimeout(check, serverSilenceMsMax - silentMs);
    };
    this.silenceTimer = clock.setTimeout(check, serverSilenceMsMax);
  }

  private stopSilenceTimer(): void {
    if (this.silenceTimer === undefined) return;
    this.target.clock.clearTimeout(this.silenceTimer);
    this.silenceTimer = undefined;
  }

  /** Waits `delayMs` on the client's clock, or until close(). */
  private pause(delayMs: number): Promise<void> {
    const { wait, wake } = interruptibleWait(this.target.clock, delayMs);
    this.wakePause = wake;
    return wait.then(() => {
      this.wakePause = undefined;
    });
  }
}

/** http://host:port → ws://host:port/v1/ws (https → wss), with `?token=` for a device. */
export function webSocketUrl(baseUrl: string, token?: string): string {
  const url = `${baseUrl.replace(/^http/, "ws").replace(/\/+$/, "")}/v1/ws`;
  return token === undefined ? url : `${url}?token=${encodeURIComponent(token)}`;
}

/** Capped exponential back-off between connection attempts: 250 ms, 500 ms, 1 s, … up to 30 s. */
export function backoffMs(failuresInRow: number): number {
  const exponent = Math.min(Math.max(failuresInRow, 1) - 1, 30);
  return Math.min(receiveBackoffMsMax, receiveBackoffMsMin * 2 ** exponent);
}

function errorFrom(frame: ServerFrame): HopperError {
  const body = frame.error as Partial<ErrorBody> | undefined;
  return new HopperError({
    code: typeof body?.code === "string" ? body.code : clientErrorCodes.invalidResponse,
    message: typeof body?.message === "string" ? body.message : "error frame without a message",
    status: 0,
    ...(body?.details !== undefined && { details: body.details }),
  });
}
