/**
 * The compiled server's stores and test fixtures, for the scripts that measure a store alone
 * (store-lease, store-scaling, store-drain). The bench does not build against the server, so the few
 * store methods those scripts call are typed here, once. Run `npm run build` first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface BenchStore {
  queueUpsert(params: { name: string; kind: "standard"; attributes: object; now: number }): Promise<unknown>;
  queueSendMany(params: { now: number; sends: object[] }): Promise<{ leased: { receipt: string }[] }[]>;
  queueLease(params: object): Promise<{ messages: { receipt: string }[] }>;
  queueAck(params: { queue: string; receipts: string[] }): Promise<unknown>;
  queueDepth(params: { name: string; now: number }): Promise<object>;
  queuePurge(params: { queue: string }): Promise<{ purged: number }>;
  queueDelete(params: { name: string }): Promise<{ removed: number }>;
  close(): Promise<void>;
}

export const serverDist = new URL("../../packages/server/dist/", import.meta.url);

export const { seededRandom } = (await import(new URL("random.js", serverDist).href)) as {
  seededRandom: (seed: number) => unknown;
};

/** A queue's attributes and a message (`text/plain` unless overridden), as the conformance suite makes them. */
export const { attributes, message } = (await import(
  new URL("testing/conformance-fixtures.js", serverDist).href
)) as {
  attributes: object;
  message: (overrides: { body: string; headers: Record<string, string>; publishedAt: number }) => object;
};

const { SqliteStore } = (await import(new URL("store/sqlite/sqlite-store.js", serverDist).href)) as {
  SqliteStore: new (options: { path: string; durability?: string; random: unknown }) => BenchStore;
};

const { LogStore } = (await import(new URL("store/log/log-store.js", serverDist).href)) as {
  LogStore: { open(options: { dir: string; random: unknown }): BenchStore };
};

/** A log store in a fresh temporary directory; `drop` closes it and removes the directory. */
export function openLogStore(options: { label: string }): { store: BenchStore; drop: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), `hopper-${options.label}-`));
  const store = LogStore.open({ dir: join(dir, "log"), random: seededRandom(1) });
  const drop = async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { store, drop };
}

/** A SQLite store on a fresh file in a temporary directory; `drop` closes it and removes the directory. */
export function openSqliteStore(options: { label: string; durability?: "os" | "fsync" }): {
  store: BenchStore;
  drop: () => Promise<void>;
} {
  const dir = mkdtempSync(join(tmpdir(), `hopper-${options.label}-`));
  const store = new SqliteStore({
    path: join(dir, "hopper.db"),
    ...(options.durability && { durability: options.durability }),
    random: seededRandom(1),
  });
  const drop = async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { store, drop };
}
