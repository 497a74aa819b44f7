/**
 * What one HTTP request costs the calling process, by transport: the global `fetch` against `node:http`
 * with a keep-alive agent, bare and inside @hopper/client (given `fetch`, and by default, which in Node
 * is `node:http`), each sending a one-message send (a 1 KiB JSON body) to a Hopper server on SQLite,
 * one request at a time:
 *
 *   node bench/dist/http-client-cost.js [requests]     (default: 2000, after 300 to warm up)
 *
 * Prints the CPU time of this process and the wall time per request, two rounds alternating.
 */
import http from "node:http";
import { HopperClient } from "@hopper/client";
import { startBenchServer } from "./server-process.js";

const requests = Number(process.argv[2] ?? 2000);
if (!Number.isInteger(requests) || requests < 1) throw new Error("requests is a positive integer");
const warmUp = 300;

const server = await startBenchServer({ store: { kind: "sqlite", durability: "os" } });
try {
  const body = JSON.stringify({ messages: [{ body: { pad: "x".repeat(1000) } }] });
  const url = new URL("/v1/queues/cost/messages", server.url);
  const created = await fetch(new URL("/v1/queues/cost", server.url), {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  if (created.status !== 201) throw new Error(`PUT queue: ${created.status}`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const viaHttp = () =>
    new Promise<void>((resolve, reject) => {
      const request = http.request(
        url,
        {
          method: "POST",
          agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("end", () => {
            if (response.statusCode !== 200) reject(new Error(`send: ${response.statusCode}`));
            else {
              JSON.parse(Buffer.concat(chunks).toString("utf8"));
              resolve();
            }
          });
        },
      );
      request.on("error", reject);
      request.end(body);
    });
  const viaFetch = async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    if (response.status !== 200) throw new Error(`send: ${response.status}`);
    await response.json();
  };
  const clientWithFetch = new HopperClient({ url: server.url, fetch: (input, init) => fetch(input, init) });
  const clientByDefault = new HopperClient({ url: server.url });
  const clientSend = (client: HopperClient) => async () => {
    await client.send("cost", [{ body: { pad: "x".repeat(1000) } }]);
  };
  for (let round = 1; round <= 2; round++) {
    for (const [name, send] of [
      ["fetch", viaFetch],
      ["node:http, keep-alive", viaHttp],
      ["HopperClient given fetch", clientSend(clientWithFetch)],
      ["HopperClient by default (node:http)", clientSend(clientByDefault)],
    ] as const) {
      for (let i = 0; i < warmUp; i++) await send();
      const cpuBefore = process.cpuUsage();
      const start = performance.now();
      for (let i = 0; i < requests; i++) await send();
      const cpu = process.cpuUsage(cpuBefore);
      const wallMicros = ((performance.now() - start) * 1000) / requests;
      console.log(
        `round ${round}, ${name}: ${((cpu.user + cpu.system) / requests).toFixed(0)} µs of this process's CPU ` +
          `and ${wallMicros.toFixed(0)} µs wall per request`,
      );
    }
  }
  agent.destroy();
  await Promise.all([clientWithFetch.close(), clientByDefault.close()]);
} finally {
  await server.stop();
}
