/**
 * FROZEN. A Hopper client as a third party writes one from docs/api.md and docs/websocket.md alone,
 * without @hopper/client: `node:http` with a keep-alive agent, each publish request a `send` of
 * `bodyBase64` items, and a `ws` consumer that speaks API.md's protocol (one `deliver` frame per
 * message, no `batch`) and acks each message in an `ack` frame of its own. `bench compare
 * --hopper-client plain` measures Hopper through it, so that the figures say what any client gets,
 * not only Hopper's own (which coalesces acks and sends, and asks for batched deliveries).
 *
 * Change this file only to follow a change of the documented API, or to fix a bug in it; say which in
 * the commit, with the figures before and after. Making it faster is not a reason: the server's
 * per-request and per-frame costs are what it measures.
 */
import { Agent, request } from "node:http";
import WebSocket from "ws";

/** One delivered message, as `deliver` renders it (docs/websocket.md). */
export interface PlainDelivery {
  receipt: string;
  body: unknown;
  deliveryCount: number;
}

export class PlainHopperClient {
  private readonly agent = new Agent({ keepAlive: true });

  constructor(private readonly url: string) {}

  /** `PUT /v1/queues/{queue}`: true when it was created (201). */
  async putQueue(queue: string): Promise<boolean> {
    const { status } = await this.call("PUT", `/v1/queues/${encodeURIComponent(queue)}`, {});
    return status === 201;
  }

  /** `POST /v1/queues/{queue}/messages` with each body as `bodyBase64` of its JSON text. */
  async send(queue: string, bodies: readonly Buffer[]): Promise<void> {
    const messages = bodies.map((body) => ({
      bodyBase64: body.toString("base64"),
      contentType: "application/json",
    }));
    const { answer } = await this.call("POST", `/v1/queues/${encodeURIComponent(queue)}/messages`, {
      messages,
    });
    for (const result of (answer as { results: { error?: { code: string } }[] }).results) {
      if (result.error) throw new Error(`send refused an item: ${result.error.code}`);
    }
  }

  /**
   * `GET /v1/ws`, then `consume` with `prefetch`; every delivery goes to `onMessage` and is acked in
   * its own frame as soon as it returns. `onAcked` hears each `acked` answer's results.
   */
  consume(
    queue: string,
    prefetch: number,
    onMessage: (message: PlainDelivery) => void,
    onAcked: (ok: number, refused: number) => void,
    onError: (error: Error) => void,
  ): PlainConsumer {
    const socket = new WebSocket(`${this.url.replace(/^http/, "ws")}/v1/ws`);
    const consuming = new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.on("message", (data) => {
        const frame = JSON.parse(String(data)) as {
          op: string;
          message?: PlainDelivery;
          results?: { ok?: true }[];
          error?: { code: string };
        };
        if (frame.op === "deliver" && frame.message) {
          onMessage(frame.message);
          socket.send(JSON.stringify({ op: "ack", receipts: [frame.message.receipt] }));
        } else if (frame.op === "acked" && frame.results) {
          const ok = frame.results.filter((result) => result.ok === true).length;
          onAcked(ok, frame.results.length - ok);
        } else if (frame.op === "consuming") {
          resolve();
        } else if (frame.op === "error" || frame.op === "cancelled") {
          onError(new Error(`the server answered ${frame.op}: ${frame.error?.code ?? "no code"}`));
        }
      });
      socket.once("open", () => socket.send(JSON.stringify({ op: "consume", queue, prefetch })));
    });
    socket.on("error", (error) => onError(error));
    return {
      consuming,
      close: () =>
        new Promise<void>((resolve) => {
          if (socket.readyState === WebSocket.CLOSED) return resolve();
          socket.once("close", () => resolve());
          socket.close();
        }),
    };
  }

  /** Closes the keep-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  private call(method: string, path: string, body: unknown): Promise<{ status: number; answer: unknown }> {
    const payload = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const outgoing = request(
        `${this.url}${path}`,
        {
          method,
          agent: this.agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("end", () => {
            const status = response.statusCode ?? 0;
            const text = Buffer.concat(chunks).toString("utf8");
            if (status >= 400)
              reject(new Error(`${method} ${path} answered ${status}: ${text.slice(0, 200)}`));
            else resolve({ status, answer: text === "" ? undefined : JSON.parse(text) });
          });
          response.on("error", reject);
        },
      );
      outgoing.on("error", reject);
      outgoing.end(payload);
    });
  }
}

export interface PlainConsumer {
  /** Resolves once the server answered `consuming`. */
  consuming: Promise<void>;
  close(): Promise<void>;
}
