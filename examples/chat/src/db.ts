/**
 * The chat application's own database (SQLite, better-sqlite3): users, their sessions, conversations,
 * members, messages and receipts, the search index the integrations worker keeps, and the outbox
 * tables of @hopper/outbox. Hopper keeps none of this: its inboxes bridge a device's absence, and this
 * database is the history a page reloads from. Every process of the application opens the same file
 * (WAL mode, so readers never wait for the writer).
 */
import { migrate } from "@hopper/outbox";
import Database from "better-sqlite3";

/** How long a statement waits for another process's write lock before it fails. */
const busyTimeoutMs = 5_000;

const schema = `
CREATE TABLE IF NOT EXISTS users (
  id TEXT PRIMARY KEY,
  -- The token the push vendor knows this user's phone by; NULL once the vendor said it is revoked.
  push_token TEXT,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
  token TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users (id),
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversations (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  -- The sequence of the last message: a send takes last_seq + 1 in its transaction.
  last_seq INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
  conversation_id TEXT NOT NULL REFERENCES conversations (id),
  user_id TEXT NOT NULL REFERENCES users (id),
  PRIMARY KEY (conversation_id, user_id)
);
CREATE INDEX IF NOT EXISTS members_by_user ON members (user_id);
CREATE TABLE IF NOT EXISTS messages (
  -- The UUID the page made before its first attempt: a resend names the same row.
  id TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL REFERENCES conversations (id),
  seq INTEGER NOT NULL,
  sender TEXT NOT NULL REFERENCES users (id),
  text TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (conversation_id, seq)
);
CREATE TABLE IF NOT EXISTS receipts (
  message_id TEXT NOT NULL REFERENCES messages (id),
  user_id TEXT NOT NULL REFERENCES users (id),
  state TEXT NOT NULL CHECK (state IN ('delivered', 'read')),
  at TEXT NOT NULL,
  PRIMARY KEY (message_id, user_id, state)
);
-- The integrations worker's search index (FTS5); one row per message, written once (processOnce).
CREATE VIRTUAL TABLE IF NOT EXISTS message_search USING fts5 (message_id UNINDEXED, conversation_id UNINDEXED, text);
-- What the push worker did for each (message, recipient): sent, or the token was revoked.
CREATE TABLE IF NOT EXISTS push_outcomes (
  message_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('sent', 'revoked', 'no_token')),
  at TEXT NOT NULL,
  PRIMARY KEY (message_id, user_id)
);
-- Webhook deliveries the receiver confirmed, so a retry of the integrations message skips them.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  message_id TEXT PRIMARY KEY,
  at TEXT NOT NULL
);
`;

/** Opens (and creates) the chat database with its tables and the outbox's. */
export function openChatDb(file: string): Database.Database {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  db.pragma("foreign_keys = ON");
  db.exec(schema);
  return db;
}

/** Opens the database and applies the outbox's migrations; every process calls this at start. */
export async function openChatDbMigrated(file: string): Promise<Database.Database> {
  const db = openChatDb(file);
  await migrate(db);
  return db;
}

export interface MessageRow {
  id: string;
  conversationId: string;
  seq: number;
  sender: string;
  text: string;
  createdAt: string;
}

export interface ConversationRow {
  id: string;
  title: string;
  lastSeq: number;
  createdAt: string;
  members: string[];
}

/** The named statements the application runs; every SQL the processes use is here. */
export function chatQueries(db: Database.Database) {
  // Over 80 lines: one named statement per entry, each a line or three; splitting would scatter them.
  const messageColumns = "id, conversation_id AS conversationId, seq, sender, text, created_at AS createdAt";
  return {
    insertUser: db.prepare<[string, string, string]>(
      "INSERT INTO users (id, push_token, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
    ),
    insertSession: db.prepare<[string, string, string]>(
      "INSERT INTO sessions (token, user_id, created_at) VALUES (?, ?, ?)",
    ),
    sessionUser: db.prepare<[string], { userId: string }>(
      "SELECT user_id AS userId FROM sessions WHERE token = ?",
    ),
    insertConversation: db.prepare<[string, string, string]>(
      "INSERT INTO conversations (id, title, created_at) VALUES (?, ?, ?)",
    ),
    insertMember: db.prepare<[string, string]>(
      "INSERT INTO members (conversation_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
    ),
    conversation: db.prepare<[string], Omit<ConversationRow, "members">>(
      "SELECT id, title, last_seq AS lastSeq, created_at AS createdAt FROM conversations WHERE id = ?",
    ),
    conversationsOf: db.prepare<[string], Omit<ConversationRow, "members">>(
      `SELECT c.id, c.title, c.last_seq AS lastSeq, c.created_at AS createdAt
       FROM conversations c JOIN members m ON m.conversation_id = c.id
       WHERE m.user_id = ? ORDER BY c.created_at, c.id`,
    ),
    members: db.prepare<[string], { userId: string }>(
      "SELECT user_id AS userId FROM members WHERE conversation_id = ? ORDER BY user_id",
    ),
    isMember: db.prepare<[string, string], { one: number }>(
      "SELECT 1 AS one FROM members WHERE conversation_id = ? AND user_id = ?",
    ),
    nextSeq: db.prepare<[string], { lastSeq: number }>(
      "UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq AS lastSeq",
    ),
    insertMessage: db.prepare<[string, string, number, string, string, string]>(
      "INSERT INTO messages (id, conversation_id, seq, sender, text, created_at) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    message: db.prepare<[string], MessageRow>(`SELECT ${messageColumns} FROM messages WHERE id = ?`),
    history: db.prepare<[string, number, number], MessageRow>(
      `SELECT ${messageColumns} FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
    ),
    receiptsOfRange: db.prepare<
      [string, number, number],
      { messageId: string; userId: string; state: string }
    >(
      `SELECT r.message_id AS messageId, r.user_id AS userId, r.state
       FROM receipts r JOIN messages m ON m.id = r.message_id
       WHERE m.conversation_id = ? AND m.seq > ? AND m.seq <= ?`,
    ),
    insertReceipt: db.prepare<[string, string, string, string]>(
      "INSERT INTO receipts (message_id, user_id, state, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ),
    pushToken: db.prepare<[string], { pushToken: string | null }>(
      "SELECT push_token AS pushToken FROM users WHERE id = ?",
    ),
    revokePushToken: db.prepare<[string, string]>(
      "UPDATE users SET push_token = NULL WHERE id = ? AND push_token = ?",
    ),
    pushOutcome: db.prepare<[string, string], { outcome: string }>(
      "SELECT outcome FROM push_outcomes WHERE message_id = ? AND user_id = ?",
    ),
    insertPushOutcome: db.prepare<[string, string, string, string]>(
      "INSERT INTO push_outcomes (message_id, user_id, outcome, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ),
    insertSearchRow: db.prepare<[string, string, string]>(
      "INSERT INTO message_search (message_id, conversation_id, text) VALUES (?, ?, ?)",
    ),
    search: db.prepare<[string, string, number], { messageId: string; conversationId: string; text: string }>(
      `SELECT s.message_id AS messageId, s.conversation_id AS conversationId, s.text
       FROM message_search s JOIN members m ON m.conversation_id = s.conversation_id
       WHERE message_search MATCH ? AND m.user_id = ? ORDER BY rank LIMIT ?`,
    ),
    webhookDelivered: db.prepare<[string], { one: number }>(
      "SELECT 1 AS one FROM webhook_deliveries WHERE message_id = ?",
    ),
    insertWebhookDelivery: db.prepare<[string, string]>(
      "INSERT INTO webhook_deliveries (message_id, at) VALUES (?, ?) ON CONFLICT DO NOTHING",
    ),
    users: db.prepare<[], { id: string }>("SELECT id FROM users ORDER BY id"),
  };
}

export type ChatQueries = ReturnType<typeof chatQueries>;
