// How the client sends one HTTP request. In Node it uses `node:http` (or `node:https`) with a keep-alive
// agent of its own; elsewhere, or when the caller passes `fetch`, it uses `fetch`. The global `fetch`
// costs the calling process two to three times the CPU per request of `node:http` (812-1,277 against
// 354-502 µs for a one-message send, `node bench/dist/http-client-cost.js`, docs/benchmarks.md), which
// at a few thousand requests a second is most of a core.
import type { Agent, IncomingMessage } from "node:http";
import type { HttpAnswer, HttpTransport } from "./fetch-transport.js";
import { freeSocketIdleMs } from "./limits.js";

export { fetchTransport, type HttpAnswer, type HttpRequest, type HttpTransport } from "./fetch-transport.js";

/** True where `node:http` can be loaded: Node, and runtimes that provide it (Bun, Deno). */
export function nodeHttpAvailable(): boolean {
  return typeof process !== "undefined" && typeof process.versions?.node === "string";
}

type NodeHttp = typeof import("node:http");
let nodeHttpModules: Promise<{ http: NodeHttp; https: typeof import("node:https") }> | undefined;

/** Loads `node:http` and `node:https` on first use, so that importing the client loads neither. */
function loadNodeHttp() {
  nodeHttpModules ??= Promise.all([import("node:http"), import("node:https")]).then(([http, https]) => ({
    http,
    https,
  }));
  return nodeHttpModules;
}

/**
 * A transport over `node:http`/`node:https` with one keep-alive agent per client (per scheme), so that
 * a client's requests reuse its connections. An idle connection is closed after `idleMs` (default `freeSocketIdleMs`),
 * well before the server drops it (Hopper's server keeps one for 65 s), so a request never goes out
 * on a connection the server is closing. Idle connections do not keep the process alive.
 */
export function nodeHttpTransport(options: { idleMs?: number } = {}): HttpTransport {
  const idleMs = options.idleMs ?? freeSocketIdleMs;
  const agents = new Map<string, Agent>();
  const agentFor = (modules: Awaited<ReturnType<typeof loadNodeHttp>>, protocol: string): Agent => {
    let agent = agents.get(protocol);
    if (!agent) {
      const agentOptions = { keepAlive: true, timeout: idleMs };
      agent =
        protocol === "https:" ? new modules.https.Agent(agentOptions) : new modules.http.Agent(agentOptions);
      agents.set(protocol, agent);
    }
    return agent;
  };
  return {
    async request({ method, url, headers, body, signal }) {
      const modules = await loadNodeHttp();
      const target = new URL(url);
      if (target.protocol !== "http:" && target.protocol !== "https:") {
        throw new TypeError(`unsupported protocol ${target.protocol} in ${url}`);
      }
      const send = target.protocol === "https:" ? modules.https.request : modules.http.request;
      const requestHeaders =
        body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) };
      return new Promise<HttpAnswer>((resolve, reject) => {
        const request = send(
          target,
          { method, headers: requestHeaders, agent: agentFor(modules, target.protocol), signal },
          (response: IncomingMessage) => {
            response.setEncoding("utf8");
            let text = "";
            response.on("data", (chunk: string) => {
              text += chunk;
            });
            response.on("end", () => {
              const retryAfter = response.headers["retry-after"];
              resolve({ status: response.statusCode ?? 0, text, retryAfter: retryAfter ?? null });
            });
            // A connection lost or an abort in the middle of the answer.
            response.on("error", reject);
          },
        );
        request.on("error", reject);
        request.end(body);
      });
    },
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}
