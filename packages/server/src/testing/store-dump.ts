/**
 * For tests: everything a Store's reads can tell about its state at one instant, to compare two
 * stores, or one store before and after a reopen.
 */
import type { ExchangeRecord } from "../model/exchange.js";
import type { MessageState, StoredMessage } from "../model/message.js";
import type { QueueDepth, QueueRecord } from "../model/queue.js";
import type { Store } from "../store/store.js";

export interface StoreDump {
  queues: { queue: QueueRecord; depth: QueueDepth }[];
  /** By "<queue>/<state>". */
  messages: Record<string, StoredMessage[]>;
  next: Record<string, { nextVisibleAt: number | null; oldestPublishedAt: number | null }>;
  exchanges: ExchangeRecord[];
}

const states: MessageState[] = ["available", "delayed", "in-flight"];

export async function dumpStore(store: Store, now: number): Promise<StoreDump> {
  const queues = await store.queueListWithDepth({ now });
  const messages: StoreDump["messages"] = {};
  const next: StoreDump["next"] = {};
  for (const { queue } of queues) {
    for (const state of states) {
      messages[`${queue.name}/${state}`] = await store.queuePeek({
        queue: queue.name,
        state,
        limit: 10_000,
        now,
      });
    }
    next[queue.name] = await store.queueNextEvents({ queue: queue.name, now });
  }
  return { queues, messages, next, exchanges: await store.exchangeList() };
}
