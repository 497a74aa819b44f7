/**
 * Local stand-ins for the services the workers call, so the example runs on one machine and its
 * tests can make them fail on purpose:
 *
 * - the **push vendor** (`POST /push { token, id, title, body }`): slow (a random delay), fails a
 *   share of requests with 503, rejects revoked tokens with 410, and keeps one delivery per `id`
 *   (as real vendors take an idempotency key), counting repeats;
 * - the **webhook receiver** (`POST /hook` with the event, `x-event-id` header): fails a share of
 *   requests with 500 and keeps one delivery per event id.
 *
 * `GET /deliveries` answers what each received. Randomness is seeded, so a test run repeats.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A request body the stand-ins read; a push or an event is well under this. */
const bodyBytesMax = 64 * 1024;

export interface StandInOptions {
  /** Share of requests answered with a failure, 0 to 1. */
  failRate: number;
  /** Each answer waits a random time up to this. */
  delayMsMax: number;
  /** Push tokens the vendor answers 410 for. */
  revokedTokens: readonly string[];
  seed: number;
}

export interface Delivery {
  id: string;
  payload: unknown;
  /** Accepted requests for this id: above 1, a repeat the idempotency key absorbed. */
  attempts: number;
}

/** A small seeded generator (mulberry32): floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function readJson(request: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    request.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > bodyBytesMax) request.destroy(new Error("body too large"));
      else chunks.push(chunk);
    });
    request.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch (error) {
        reject(error);
      }
    });
    request.on("error", reject);
  });
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

/**
 * Starts one stand-in: `kind` "push" reads `{ token, id }` from the body, "webhook" the id from the
 * `x-event-id` header. Resolves with its URL once it listens.
 */
export async function startStandIn(
  kind: "push" | "webhook",
  options: StandInOptions,
  port = 0,
): Promise<{ url: string; server: Server; deliveries: Map<string, Delivery> }> {
  const random = seededRandom(options.seed);
  const deliveries = new Map<string, Delivery>();
  const revoked = new Set(options.revokedTokens);
  const path = kind === "push" ? "/push" : "/hook";
  const server = createServer((request, response) => {
    if (request.method === "GET" && request.url === "/deliveries") {
      answer(response, 200, { deliveries: [...deliveries.values()] });
      return;
    }
    if (request.method !== "POST" || request.url !== path) {
      answer(response, 404, { error: "not_found" });
      return;
    }
    void readJson(request).then(
      (payload) => {
        const body = payload as { token?: string; id?: string };
        const id = kind === "push" ? body.id : String(request.headers["x-event-id"] ?? "");
        // The draws happen in request order, so a seed gives the same answers to the same run.
        const delayMs = Math.floor(random() * options.delayMsMax);
        const fails = random() < options.failRate;
        setTimeout(() => {
          if (!id) return answer(response, 400, { error: "no id" });
          if (kind === "push" && revoked.has(body.token ?? ""))
            return answer(response, 410, { error: "revoked" });
          if (fails) return answer(response, kind === "push" ? 503 : 500, { error: "unavailable" });
          const seen = deliveries.get(id);
          if (seen !== undefined) seen.attempts += 1;
          else deliveries.set(id, { id, payload, attempts: 1 });
          answer(response, 200, { id, duplicate: seen !== undefined });
        }, delayMs);
      },
      () => answer(response, 400, { error: "invalid json" }),
    );
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${bound}`, server, deliveries };
}

export function standInOptionsFromEnv(env: NodeJS.ProcessEnv): StandInOptions {
  return {
    failRate: Number(env.STANDIN_FAIL_RATE ?? 0.1),
    delayMsMax: Number(env.STANDIN_DELAY_MS_MAX ?? 300),
    revokedTokens: (env.STANDIN_REVOKED ?? "").split(",").filter((token) => token !== ""),
    seed: Number(env.STANDIN_SEED ?? 1),
  };
}
