/**
 * The whole application for a test, as real processes on a temporary directory: Hopper
 * (`hopper serve`), the stand-in vendor and webhook receiver, the chat API, the relay and the workers.
 * A test can stop, kill -9 and start any role again, with a crash point (CHAT_PAUSE_AT) or without,
 * and call the chat API and Hopper as a client would.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HopperClient } from "@hopper/client";
import Database from "better-sqlite3";
import { names } from "../config.js";
import { HopperInboxes } from "../hopper-inboxes.js";
import { type RunningProcess, startHopper, startRole } from "../processes.js";

export type Role = "api" | "relay" | "realtime" | "push" | "integrations";

export interface StackOptions {
  /** Roles started at once (default all); others can be started later with `start`. */
  roles?: Role[];
  vendor?: Record<string, string>;
  webhook?: Record<string, string>;
}

export interface ApiAnswer<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export class ChatStack {
  readonly running = new Map<string, RunningProcess>();
  readonly hopperClient: HopperClient;
  readonly inboxes: HopperInboxes;

  private constructor(
    readonly dir: string,
    readonly hopper: RunningProcess,
    readonly env: Record<string, string>,
  ) {
    const access = { url: hopper.url, apiKey: env.HOPPER_API_KEY as string };
    this.hopperClient = new HopperClient(access);
    this.inboxes = new HopperInboxes(access, names.inbox);
  }

  static async start(options: StackOptions = {}): Promise<ChatStack> {
    const dir = mkdtempSync(join(tmpdir(), "hopper-chat-"));
    const apiKey = randomBytes(16).toString("hex");
    const jwtSecret = randomBytes(32).toString("hex");
    const hopper = await startHopper({ dataFile: join(dir, "hopper.db"), apiKey, jwtSecret });
    const vendor = await startRole("vendor", {
      STANDIN_FAIL_RATE: "0",
      STANDIN_DELAY_MS_MAX: "20",
      ...options.vendor,
    });
    const webhook = await startRole("webhook", {
      STANDIN_FAIL_RATE: "0",
      STANDIN_DELAY_MS_MAX: "20",
      ...options.webhook,
    });
    const env = {
      HOPPER_URL: hopper.url,
      HOPPER_API_KEY: apiKey,
      CHAT_DB: join(dir, "chat.db"),
      CHAT_JWT_SECRET: jwtSecret,
      PUSH_VENDOR_URL: vendor.url,
      WEBHOOK_URL: `${webhook.url}/hook`,
    };
    const stack = new ChatStack(dir, hopper, env);
    stack.running.set("vendor", vendor);
    stack.running.set("webhook", webhook);
    // The API first: it creates the database, which the others then open.
    for (const role of options.roles ?? ["api", "relay", "realtime", "push", "integrations"])
      await stack.start(role);
    return stack;
  }

  /** Starts a role (stopping a running one of that name first); `name` tells two of one role apart. */
  async start(
    role: Role,
    extraEnv: Record<string, string> = {},
    name: string = role,
  ): Promise<RunningProcess> {
    await this.running.get(name)?.stop();
    const started = await startRole(role, { ...this.env, ...extraEnv });
    this.running.set(name, started);
    return started;
  }

  process(name: string): RunningProcess {
    const found = this.running.get(name);
    if (found === undefined) throw new Error(`${name} is not running`);
    return found;
  }

  get apiUrl(): string {
    return this.process("api").url;
  }

  async api<T = Record<string, unknown>>(
    method: string,
    path: string,
    session?: string,
    body?: unknown,
  ): Promise<ApiAnswer<T>> {
    const response = await fetch(`${this.apiUrl}${path}`, {
      method,
      headers: {
        ...(session !== undefined && { authorization: `Bearer ${session}` }),
        ...(body !== undefined && { "content-type": "application/json" }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as T };
  }

  async signIn(name: string): Promise<string> {
    const { body } = await this.api<{ session: string }>("POST", "/api/signin", undefined, { name });
    return body.session;
  }

  async conversation(session: string, members: string[]): Promise<string> {
    const { body } = await this.api<{ conversation: { id: string } }>("POST", "/api/conversations", session, {
      members,
    });
    return body.conversation.id;
  }

  async send(session: string, conversationId: string, text: string, id: string = randomUUID()) {
    return this.api<{ message: { id: string; seq: number }; duplicate: boolean }>(
      "POST",
      `/api/conversations/${conversationId}/messages`,
      session,
      { id, text },
    );
  }

  /** The ids of the entries in `user`'s inbox, in sequence order (read with the API key). */
  async inboxIds(user: string): Promise<string[]> {
    const response = await fetch(
      `${this.hopper.url}/v1/inboxes/${names.inbox}/recipients/${user}/entries?limit=1000`,
      {
        headers: { authorization: `Bearer ${this.env.HOPPER_API_KEY}` },
      },
    );
    const { entries } = (await response.json()) as { entries: { id: string }[] };
    return entries.map((entry) => entry.id);
  }

  /** Reads the chat database, as an operator would. */
  query<T>(sql: string, ...params: unknown[]): T[] {
    const db = new Database(this.env.CHAT_DB as string, { readonly: true });
    try {
      return db.prepare(sql).all(...params) as T[];
    } finally {
      db.close();
    }
  }

  /** Changes the chat database as an operator (or a fault) would, with a busy timeout of its own. */
  exec(sql: string): void {
    const db = new Database(this.env.CHAT_DB as string);
    try {
      db.pragma("busy_timeout = 5000");
      db.exec(sql);
    } finally {
      db.close();
    }
  }

  async stop(): Promise<void> {
    for (const name of [...this.running.keys()].reverse()) await this.running.get(name)?.stop();
    await this.hopperClient.close();
    await this.hopper.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `check` until it answers something other than undefined (each poll is a real read). */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
