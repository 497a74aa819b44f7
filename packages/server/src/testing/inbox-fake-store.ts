/**
 * A small in-memory InboxStore for the inbox broker's unit tests: the contract of store/inbox-store.ts
 * kept in plain maps, written for clarity rather than speed, so the broker's tests do not depend on a
 * real store. The real stores pass the conformance suite (testing/store-conformance/).
 */

import type { InboxBrokerStore } from "../broker/inboxes.js";
import { HopperError } from "../errors.js";
import {
  type AppendResult,
  type DeviceCursor,
  type InboxEntry,
  type InboxRecord,
  type RecipientState,
  zeroInboxCounters,
} from "../model/inbox.js";
import type { StoreEvent } from "../store/store.js";

interface RecipientLog {
  entries: InboxEntry[];
  head: number;
  devices: Map<string, DeviceCursor>;
  skippedAfter: number | null;
  /** Message ids appended, with the sequence given and when. */
  ids: Map<string, { seq: number; at: number }>;
}

interface Namespace {
  record: Omit<InboxRecord, "entries" | "recipients">;
  logs: Map<string, RecipientLog>;
}

function notFound(name: string): HopperError {
  return new HopperError("inbox_not_found", `Inbox namespace "${name}" does not exist.`, { inbox: name });
}

export class FakeInboxStore implements InboxBrokerStore {
  private readonly namespaces = new Map<string, Namespace>();
  private readonly listeners: ((event: StoreEvent) => void)[] = [];
  /** Calls of inboxAppend so far: a refused append must not reach the store. */
  appendCalls = 0;
  leader = true;

  watch(listener: (event: StoreEvent) => void): void {
    this.listeners.push(listener);
  }

  /** Reports an event as if another node had sent it. */
  emit(event: unknown): void {
    for (const listener of this.listeners) listener(event as StoreEvent);
  }

  async housekeepingLeader(): Promise<boolean> {
    return this.leader;
  }

  async inboxUpsert(params: {
    name: string;
    attributes: InboxRecord["attributes"];
    epoch: string;
    now: number;
  }) {
    const existing = this.namespaces.get(params.name);
    if (existing) {
      existing.record.attributes = params.attributes;
      return { created: false, inbox: this.recordOf(existing) };
    }
    const created: Namespace = {
      record: {
        name: params.name,
        attributes: params.attributes,
        epoch: params.epoch,
        createdAt: params.now,
        counters: { ...zeroInboxCounters },
      },
      logs: new Map(),
    };
    this.namespaces.set(params.name, created);
    return { created: true, inbox: this.recordOf(created) };
  }

  async inboxGet(params: { name: string }) {
    const namespace = this.namespaces.get(params.name);
    return namespace && this.recordOf(namespace);
  }

  async inboxList() {
    return [...this.namespaces.values()].map((namespace) => this.recordOf(namespace));
  }

  async inboxDelete(params: { name: string }) {
    const namespace = this.need(params.name);
    this.namespaces.delete(params.name);
    let removed = 0;
    for (const log of namespace.logs.values()) removed += log.entries.length;
    return { removed };
  }

  async inboxAppend(params: {
    name: string;
    recipients: readonly string[];
    message: { id: string; body: Buffer | string; contentType: string; headers: Record<string, string> };
    now: number;
  }) {
    this.appendCalls++;
    const namespace = this.need(params.name);
    const { attributes, counters } = namespace.record;
    const results: AppendResult[] = [];
    for (const recipient of params.recipients) {
      const log = this.log(namespace, recipient);
      const seen = log.ids.get(params.message.id);
      if (seen && params.now - seen.at <= attributes.dedupWindowMs) {
        counters.duplicates++;
        results.push({ recipient, seq: seen.seq, duplicate: true });
        continue;
      }
      const devices = [...log.devices.values()];
      const idle =
        attributes.stopFanoutAfterMs !== null &&
        devices.length > 0 &&
        devices.every((device) => params.now - device.lastSeenAt >= (attributes.stopFanoutAfterMs as number));
      if (idle) {
        counters.skipped++;
        log.skippedAfter = log.head;
        results.push({ recipient, skipped: "idle" });
        continue;
      }
      log.head++;
      log.entries.push({ seq: log.head, appendedAt: params.now, ...params.message });
      log.ids.set(params.message.id, { seq: log.head, at: params.now });
      counters.appended++;
      while (log.entries.length > attributes.maxDepth) {
        log.entries.shift();
        counters.overflowed++;
      }
      results.push({ recipient, seq: log.head, duplicate: false });
    }
    return { results };
  }

  async inboxRead(params: { name: string; recipient: string; after: number; limit: number }) {
    const namespace = this.need(params.name);
    const log = this.log(namespace, params.recipient);
    const entries = log.entries.filter((entry) => entry.seq > params.after).slice(0, params.limit);
    return { entries, state: this.stateOf(namespace, log) };
  }

  async inboxAck(params: { name: string; recipient: string; device: string; seq: number; now: number }) {
    const namespace = this.need(params.name);
    const log = this.log(namespace, params.recipient);
    if (params.seq > log.head) {
      throw new HopperError("cursor_beyond_head", undefined, { seq: params.seq, head: log.head });
    }
    const device = log.devices.get(params.device) ?? {
      device: params.device,
      cursor: 0,
      lastSeenAt: params.now,
    };
    device.cursor = Math.max(device.cursor, params.seq);
    device.lastSeenAt = params.now;
    log.devices.set(params.device, device);
    this.trimAcked(namespace, log, params.now);
    return { cursor: device.cursor };
  }

  async inboxDeviceSeen(params: {
    name: string;
    recipient: string;
    device: string;
    cursor: number;
    now: number;
  }) {
    const log = this.log(this.need(params.name), params.recipient);
    const device = log.devices.get(params.device) ?? {
      device: params.device,
      cursor: params.cursor,
      lastSeenAt: 0,
    };
    device.lastSeenAt = params.now;
    log.devices.set(params.device, device);
  }

  async inboxDeviceDelete(params: { name: string; recipient: string; device: string; now: number }) {
    const namespace = this.need(params.name);
    const log = this.log(namespace, params.recipient);
    const deleted = log.devices.delete(params.device);
    this.trimAcked(namespace, log, params.now);
    return { deleted };
  }

  async inboxRecipientGet(params: { name: string; recipient: string }): Promise<RecipientState> {
    const namespace = this.need(params.name);
    return this.stateOf(namespace, this.log(namespace, params.recipient));
  }

  async inboxSweep(params: { name: string; now: number; max: number }) {
    const namespace = this.need(params.name);
    const { attributes, counters } = namespace.record;
    let expired = 0;
    let devicesForgotten = 0;
    let acked = 0;
    for (const log of namespace.logs.values()) {
      while (
        expired < params.max &&
        (log.entries[0]?.appendedAt ?? params.now) < params.now - attributes.maxAgeMs
      ) {
        log.entries.shift();
        expired++;
      }
      for (const [name, device] of log.devices) {
        if (device.lastSeenAt < params.now - attributes.forgetDeviceAfterMs) {
          log.devices.delete(name);
          devicesForgotten++;
        }
      }
      acked += this.trimAcked(namespace, log, params.now);
      for (const [id, seen] of log.ids)
        if (params.now - seen.at > attributes.dedupWindowMs) log.ids.delete(id);
    }
    counters.expired += expired;
    counters.devicesForgotten += devicesForgotten;
    return { expired, devicesForgotten, acked };
  }

  /** Trims the entries every active device has acked; answers how many. */
  private trimAcked(namespace: Namespace, log: RecipientLog, now: number): number {
    const active = [...log.devices.values()].filter(
      (device) => now - device.lastSeenAt < namespace.record.attributes.forgetDeviceAfterMs,
    );
    if (active.length === 0) return 0;
    const lowest = Math.min(...active.map((device) => device.cursor));
    let trimmed = 0;
    while ((log.entries[0]?.seq ?? Number.POSITIVE_INFINITY) <= lowest) {
      log.entries.shift();
      trimmed++;
    }
    namespace.record.counters.acked += trimmed;
    return trimmed;
  }

  private need(name: string): Namespace {
    const namespace = this.namespaces.get(name);
    if (!namespace) throw notFound(name);
    return namespace;
  }

  private log(namespace: Namespace, recipient: string): RecipientLog {
    let log = namespace.logs.get(recipient);
    if (!log) {
      log = { entries: [], head: 0, devices: new Map(), skippedAfter: null, ids: new Map() };
      namespace.logs.set(recipient, log);
    }
    return log;
  }

  private stateOf(namespace: Namespace, log: RecipientLog): RecipientState {
    return {
      head: log.head,
      oldest: log.entries[0]?.seq ?? log.head + 1,
      epoch: namespace.record.epoch,
      depth: log.entries.length,
      devices: [...log.devices.values()].map((device) => ({ ...device })),
      skippedAfter: log.skippedAfter,
    };
  }

  private recordOf(namespace: Namespace): InboxRecord {
    let entries = 0;
    for (const log of namespace.logs.values()) entries += log.entries.length;
    return {
      ...namespace.record,
      attributes: { ...namespace.record.attributes },
      counters: { ...namespace.record.counters },
      entries,
      recipients: namespace.logs.size,
    };
  }
}
