/**
 * A bare WebSocket client for tests of `/v1/ws`: it keeps every frame the server sent, in order, and
 * lets a test wait for the next frame that matches, or send a frame and wait for its answer by ref.
 */
import { WebSocket } from "ws";

export type Frame = { op: string; ref?: string | number } & Record<string, unknown>;

/** Long enough for a busy CI machine; a test that waits this long has failed anyway. */
const waitMsDefault = 5_000;

export class TestSocket {
  /** Every frame received, in order. */
  readonly frames: Frame[] = [];
  private readonly listeners = new Set<() => void>();
  private nextRef = 1;
  closed = false;

  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data) => {
      this.frames.push(JSON.parse(String(data)) as Frame);
      for (const listener of [...this.listeners]) listener();
    });
    socket.on("close", () => {
      this.closed = true;
      for (const listener of [...this.listeners]) listener();
    });
  }

  /** Opens `/v1/ws` on the server at `baseUrl` (http://…); rejects with the HTTP status if refused. */
  static open(
    baseUrl: string,
    options: { apiKey?: string; autoPong?: boolean; path?: string } = {},
  ): Promise<TestSocket> {
    const url = `${baseUrl.replace(/^http/, "ws")}${options.path ?? "/v1/ws"}`;
    const headers: Record<string, string> = {};
    if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
    const socket = new WebSocket(url, { headers, autoPong: options.autoPong ?? true });
    return new Promise((resolve, reject) => {
      socket.once("open", () => resolve(new TestSocket(socket)));
      socket.once("unexpected-response", (_request, response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          body += chunk;
        });
        response.on("end", () => {
          socket.terminate();
          reject(
            Object.assign(new Error(`refused with ${response.statusCode}`), {
              status: response.statusCode,
              body,
            }),
          );
        });
      });
      socket.once("error", reject);
    });
  }

  send(frame: object): void {
    this.socket.send(JSON.stringify(frame));
  }

  /** Sends the frame with a fresh ref and resolves with the answer that echoes it. */
  async request(frame: object): Promise<Frame> {
    const ref = `r${this.nextRef++}`;
    this.send({ ...frame, ref });
    return this.waitFor((f) => f.ref === ref);
  }

  /** Frames of one op received so far. */
  all(op: string): Frame[] {
    return this.frames.filter((frame) => frame.op === op);
  }

  /** Resolves with the first frame (already received or coming) that matches. */
  waitFor(match: (frame: Frame) => boolean, waitMs = waitMsDefault): Promise<Frame> {
    return this.until(() => this.frames.find(match), waitMs, "a matching frame");
  }

  /** Resolves once `count` frames of `op` have come, with all of them. */
  async waitForCount(op: string, count: number, waitMs = waitMsDefault): Promise<Frame[]> {
    await this.until(
      () => (this.all(op).length >= count ? true : undefined),
      waitMs,
      `${count} ${op} frames`,
    );
    return this.all(op);
  }

  /** Resolves once the server has closed the connection. */
  waitForClose(waitMs = waitMsDefault): Promise<true> {
    return this.until(() => (this.closed ? true : undefined), waitMs, "the close");
  }

  close(): void {
    this.socket.terminate();
  }

  /** Resolves with `check()` once it is defined, looking again at every frame and at close. */
  private until<T>(check: () => T | undefined, waitMs: number, what: string): Promise<T> {
    const found = check();
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const listener = () => {
        const value = check();
        if (value === undefined) return;
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(value);
      };
      const timer = setTimeout(() => {
        this.listeners.delete(listener);
        const last = JSON.stringify(this.frames.slice(-5)).slice(0, 1000);
        reject(new Error(`waited ${waitMs} ms for ${what}; last frames: ${last}`));
      }, waitMs);
      this.listeners.add(listener);
    });
  }
}

/** Receipts of the deliver frames among `frames`. */
export function receiptsOf(frames: Frame[]): string[] {
  return frames.map((frame) => (frame.message as { receipt: string }).receipt);
}
