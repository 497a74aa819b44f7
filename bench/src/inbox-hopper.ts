/**
 * Hopper's inboxes as a target of the inbox bench: a fresh `hopper serve` (server-process.ts) on a temp
 * SQLite file or log directory, with no API keys, so the bench's loopback connections are a service's.
 *
 * - Append: `POST /v1/inboxes/{ns}/append` over `node:http` keep-alive connections (one per append in
 *   flight), answered once durable.
 * - Live devices: `hopper.inboxes.subscribe` of @hopper/client with `recipient` named (a service may
 *   name it), one WebSocket per device as the client opens them; the client acks after each batch.
 * - Replay and idle devices: raw `/v1/ws` connections sending `inbox.subscribe` (the client does not
 *   surface `inbox.live`, and opens one socket per subscription); a connection holds up to 64
 *   subscriptions (`inboxSubscriptionsPerConnectionMax`).
 */
import { Agent, request } from "node:http";
import { HopperClient, type InboxSubscription } from "@hopper/client";
import WebSocket from "ws";
import type { IdleDevices, InboxTarget, OnDeviceEntry, ReplayTiming } from "./inbox-target.js";
import { forEachLimited } from "./inbox-target.js";
import { startBenchServer } from "./server-process.js";

export const inboxNamespace = "bench";

export async function startHopperInboxTarget(params: {
  store: "sqlite" | "log";
  profileDir: string | undefined;
  appendConnections: number;
  /**
   * Live devices: "client" (`hopper.inboxes.subscribe`, which acks each frame and waits for the answer
   * before it handles the next) or "raw" (a /v1/ws connection per device that acks each frame without
   * waiting).
   */
  devices: "client" | "raw";
}): Promise<InboxTarget> {
  // Over 80 lines: the Hopper target's workloads share its server and connections in this closure.
  const server = await startBenchServer({
    store: { kind: params.store, durability: "fsync" },
    profileDir: params.profileDir,
  });
  const agent = new Agent({ keepAlive: true, maxSockets: params.appendConnections });
  const base = new URL(server.url);
  const wsUrl = `ws://${base.host}/v1/ws`;
  const sockets = new Set<WebSocket>();
  const close = async () => {
    for (const socket of sockets) socket.terminate();
    sockets.clear();
    agent.destroy();
    await server.stop();
  };
  const http = (method: string, path: string, body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        {
          agent,
          host: base.hostname,
          port: base.port,
          method,
          path,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  try {
    const created = await http("PUT", `/v1/inboxes/${inboxNamespace}`, "{}");
    if (created.status !== 201) throw new Error(`PUT inbox: ${created.status} ${created.text}`);
  } catch (error) {
    await close();
    throw error;
  }

  /** Opens a raw connection and subscribes `recipients`' devices; frames after the answers go to `onFrame`. */
  const openSubscriptions = async (
    recipients: readonly string[],
    device: string,
    onFrame?: (frame: { op: string; [field: string]: unknown }) => void,
  ): Promise<{ socket: WebSocket; openedAt: number; requestedAt: number; subs: string[] }> => {
    const openedAt = performance.now();
    const socket = new WebSocket(wsUrl, { perMessageDeflate: false });
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve());
      socket.once("error", reject);
    });
    const answers = new Map<number, (frame: Record<string, unknown>) => void>();
    socket.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as { op: string; ref?: number; [field: string]: unknown };
      const answer = frame.ref === undefined ? undefined : answers.get(frame.ref);
      if (answer) {
        answers.delete(frame.ref as number);
        answer(frame);
      } else onFrame?.(frame);
    });
    const requestedAt = performance.now();
    const subs = await Promise.all(
      recipients.map(
        (recipient, index) =>
          new Promise<string>((resolve, reject) => {
            answers.set(index + 1, (frame) => {
              if (frame.op === "inbox.subscribed") resolve(String(frame.sub));
              else reject(new Error(`inbox.subscribe ${recipient}: ${JSON.stringify(frame)}`));
            });
            socket.send(
              JSON.stringify({
                op: "inbox.subscribe",
                ref: index + 1,
                ns: inboxNamespace,
                device,
                after: 0,
                recipient,
              }),
            );
          }),
      ),
    );
    return { socket, openedAt, requestedAt, subs };
  };
  const closeSocket = (socket: WebSocket) =>
    new Promise<void>((resolve) => {
      if (socket.readyState === WebSocket.CLOSED) return resolve();
      socket.once("close", () => resolve());
      socket.close(1000);
    });

  const rawDevices = async (recipients: readonly string[], onEntry: OnDeviceEntry) => {
    let failure: Error | undefined;
    let ref = 1_000_000;
    const opened = await Promise.all(
      recipients.map(async (recipient) => {
        const { socket } = await openSubscriptions([recipient], "phone", (frame) => {
          if (frame.op === "inbox.entry") {
            const receivedAt = performance.now();
            const entries = frame.entries as { seq: number; body: unknown }[];
            for (const entry of entries) onEntry(recipient, entry.body, receivedAt);
            const last = entries[entries.length - 1]?.seq;
            socket.send(JSON.stringify({ op: "inbox.ack", sub: frame.sub, seq: last, ref: ref++ }));
          } else if (frame.op !== "inbox.live" && frame.op !== "inbox.acked") {
            failure ??= new Error(`device ${recipient}: ${JSON.stringify(frame).slice(0, 300)}`);
          }
        });
        return socket;
      }),
    );
    return async () => {
      await Promise.all(opened.map(closeSocket));
      if (failure) throw failure;
    };
  };

  return {
    label: `Hopper, ${params.store === "sqlite" ? "SQLite (fsync)" : "log store"}${params.devices === "raw" ? ", raw devices" : ""}`,
    versions: "the working tree",
    semantics: `append = POST …/append answered once durable; live devices = ${params.devices === "raw" ? "a /v1/ws connection each, acking every frame without waiting" : "hopper.inboxes.subscribe, one WebSocket each, acking every frame and waiting for the answer"}; replay and idle devices = inbox.subscribe on raw /v1/ws connections`,
    pid: server.pid,
    async append(id, recipients, bodyJson) {
      const body = `{"recipients":${JSON.stringify(recipients)},"message":{"id":${JSON.stringify(id)},"body":${bodyJson}}}`;
      const { status, text } = await http("POST", `/v1/inboxes/${inboxNamespace}/append`, body);
      if (status !== 200) throw new Error(`append ${id}: ${status} ${text.slice(0, 300)}`);
      const { results } = JSON.parse(text) as { results: { seq?: number; duplicate?: boolean }[] };
      if (results.length !== recipients.length || results.some((result) => result.seq === undefined)) {
        throw new Error(`append ${id}: ${text.slice(0, 300)}`);
      }
    },
    async prepareDevice(recipient, device) {
      const { socket } = await openSubscriptions([recipient], device);
      await closeSocket(socket);
    },
    async replay(recipient, device, expected): Promise<ReplayTiming> {
      let entries = 0;
      let lastSeq = 0;
      let liveAt: number | undefined;
      let failure: Error | undefined;
      let onLive: () => void = () => {};
      const live = new Promise<void>((resolve) => {
        onLive = resolve;
      });
      const { socket, openedAt, requestedAt } = await openSubscriptions([recipient], device, (frame) => {
        if (frame.op === "inbox.entry") {
          const batch = frame.entries as { seq: number; body: unknown }[];
          entries += batch.length;
          lastSeq = batch[batch.length - 1]?.seq ?? lastSeq;
        } else if (frame.op === "inbox.live") {
          liveAt = performance.now();
          if (Number(frame.head) !== lastSeq) {
            failure = new Error(`inbox.live at head ${frame.head} after entry ${lastSeq}`);
          }
          onLive();
        } else {
          failure = new Error(`replay: unexpected frame ${JSON.stringify(frame).slice(0, 300)}`);
          onLive();
        }
      });
      await live;
      await closeSocket(socket);
      if (failure) throw failure;
      if (entries !== expected) throw new Error(`replay delivered ${entries} entries, expected ${expected}`);
      return {
        connectToLiveMs: (liveAt as number) - openedAt,
        requestToLiveMs: (liveAt as number) - requestedAt,
        entries,
      };
    },
    async subscribeDevices(recipients, onEntry: OnDeviceEntry) {
      if (params.devices === "raw") return rawDevices(recipients, onEntry);
      const client = new HopperClient({ url: server.url });
      const subscriptions: InboxSubscription[] = [];
      let failure: unknown;
      for (const recipient of recipients) {
        const subscription = await client.inboxes.subscribe({
          ns: inboxNamespace,
          device: "phone",
          recipient,
          onEntry: (entry) => onEntry(recipient, entry.body, performance.now()),
          onError: (error) => {
            failure ??= error;
          },
        });
        subscriptions.push(subscription);
      }
      await Promise.all(subscriptions.map((subscription) => subscription.ready));
      return async () => {
        await Promise.all(subscriptions.map((subscription) => subscription.close()));
        await client.close();
        if (failure) throw failure;
      };
    },
    async openIdleDevices(recipients, perConnection): Promise<IdleDevices> {
      const groups: string[][] = [];
      for (let i = 0; i < recipients.length; i += perConnection) {
        groups.push(recipients.slice(i, i + perConnection));
      }
      const opened: WebSocket[] = [];
      await forEachLimited(groups, 20, async (group) => {
        const { socket } = await openSubscriptions(group, "phone", (frame) => {
          if (frame.op !== "inbox.live") throw new Error(`idle device got ${JSON.stringify(frame)}`);
        });
        opened.push(socket);
      });
      return {
        connections: opened.length,
        async close() {
          await Promise.all(opened.map(closeSocket));
        },
      };
    },
    async storeCommits() {
      const { status, text } = await http("GET", "/metrics", "");
      if (status !== 200) throw new Error(`GET /metrics: ${status}`);
      const sample = (name: string) =>
        Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
      return {
        commits: sample("hopper_store_commits_total"),
        jobs: sample("hopper_store_commit_jobs_total"),
      };
    },
    close,
  };
}
