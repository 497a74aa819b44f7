/**
 * The names every part of the chat application shares (the exchange, its queues, the inbox namespace,
 * the signal channels) and the settings each process reads from its environment. One process per
 * role (role.ts); the launcher (main.ts) and the tests start them with these variables.
 */

export const names = {
  /** The topic exchange the relay publishes every committed message to. */
  exchange: "chat.events",
  routingKey: "message.committed",
  /** The inbox namespace: one log per user, read by each of the user's devices. */
  inbox: "chat",
  queues: { realtime: "realtime", push: "push", integrations: "integrations" },
} as const;

export type WorkerName = keyof typeof names.queues;

/** A conversation's typing channel; a device token lists the channels of its user's conversations. */
export function typingChannel(conversationId: string): string {
  return `conv.${conversationId}`;
}

/** The inbox entry ids: one per message, one per receipt, so each append is idempotent on its id. */
export const entryIds = {
  message: (messageId: string) => `msg:${messageId}`,
  receipt: (messageId: string, user: string, state: string) => `rcpt:${messageId}:${user}:${state}`,
};

export const limits = {
  /** A message's text; the page refuses longer ones before sending. */
  messageTextCharsMax: 2_000,
  /** The preview a MessageCreated event carries (and a push notification shows). */
  previewCharsMax: 140,
  /** Members of one conversation: one inbox append names them all (Hopper takes up to 5,000). */
  membersMax: 100,
  /** Messages one history read answers. */
  historyPageMax: 200,
  /** Message ids one receipt post names. */
  receiptBatchMax: 100,
  /** A device token's life; the page asks for a new one before it ends. */
  deviceTokenTtlSeconds: 3_600,
  /** Channels one token may list (Hopper's own bound is 100 patterns). */
  tokenChannelsMax: 100,
  /** Results of one search. */
  searchResultsMax: 50,
} as const;

/** The settings of a process, from its environment (the launcher and the tests set them). */
export interface ChatEnv {
  hopperUrl: string;
  hopperApiKey: string;
  /** The URL a browser uses to reach Hopper's WebSocket (default: hopperUrl). */
  hopperPublicUrl: string;
  /** The chat application's own SQLite file (users, conversations, messages, the outbox). */
  chatDb: string;
  /** The HS256 secret of device tokens, the one Hopper was started with (`--jwt-secret`). */
  jwtSecret: string;
  apiHost: string;
  apiPort: number;
  pushVendorUrl: string;
  webhookUrl: string;
  /** A test's crash point: the process stops there and says so, for a kill -9 to land on it. */
  pauseAt: string | undefined;
}

export function readEnv(env: NodeJS.ProcessEnv = process.env): ChatEnv {
  const required = (name: string): string => {
    const value = env[name];
    if (value === undefined || value === "") throw new Error(`${name} is not set`);
    return value;
  };
  const hopperUrl = required("HOPPER_URL");
  return {
    hopperUrl,
    hopperApiKey: required("HOPPER_API_KEY"),
    hopperPublicUrl: env.CHAT_HOPPER_PUBLIC_URL || hopperUrl,
    chatDb: required("CHAT_DB"),
    jwtSecret: required("CHAT_JWT_SECRET"),
    apiHost: env.CHAT_HOST || "127.0.0.1",
    apiPort: Number(env.CHAT_PORT ?? 0),
    pushVendorUrl: env.PUSH_VENDOR_URL ?? "",
    webhookUrl: env.WEBHOOK_URL ?? "",
    pauseAt: env.CHAT_PAUSE_AT || undefined,
  };
}

/**
 * Stops the process at a crash point when the test asked for it: prints `paused <point> <detail>` and
 * never returns, so the test's kill -9 lands exactly between two steps.
 */
export async function pausePoint(env: ChatEnv, point: string, detail: unknown): Promise<void> {
  if (env.pauseAt !== point) return;
  process.stdout.write(`paused ${point} ${JSON.stringify(detail)}\n`);
  setInterval(() => {}, 60_000);
  await new Promise<never>(() => {});
}
