/**
 * A stream's share group (queue semantics over a log, as Kafka's KIP-932; docs/streams.md "Share
 * groups"): any number of consumers; each record is leased on its own, by receipt, for a visibility
 * timeout; ack, nack and extend as a queue's; past `maxDeliveries` a copy goes to a dead-letter queue;
 * the log keeps every record. Every store keeps a share group as this one state and applies these pure
 * functions to it inside its transaction, so what a share group means is written once, here.
 *
 * State: per partition `next`, the first offset never delivered; and `inFlight`, every record
 * delivered and neither acked nor dead-lettered, with its lease. So a record below `next` and not in
 * flight is done. A record in flight whose lease is still on (`visibleAt` > now) is held by exactly one
 * consumer: receive hands out only records whose lease has ended, then new ones from `next`.
 */
import type { NewMessage, ReceiptResult } from "./message.js";
import type { StoredStreamRecord } from "./stream.js";
import type { GroupStart, HeadRange } from "./stream-group.js";

export interface ShareAttributes {
  visibilityTimeoutMs: number;
  /** Past maxDeliveries deliveries a record's copy goes to `queue`; null: it is delivered for ever. */
  deadLetter: { queue: string; maxDeliveries: number } | null;
  /** Where a partition starts the first time the group reads it. */
  start: GroupStart;
}

export interface ShareLease {
  token: number;
  visibleAt: number;
  deliveries: number;
}

export interface ShareCounters {
  delivered: number;
  acked: number;
  nacked: number;
  deadLettered: number;
}

export interface ShareState {
  attributes: ShareAttributes;
  createdAt: number;
  /** Per partition: the first offset never delivered; null until the group first reads it. */
  next: (number | null)[];
  /** By leaseKey(partition, offset). */
  inFlight: Record<string, ShareLease>;
  counters: ShareCounters;
}

/** A record handed out: where it is, its receipt and how often it was delivered. */
export interface ShareDelivery {
  partition: number;
  offset: number;
  receipt: string;
  deliveries: number;
}

/** A record to copy into the dead-letter queue. */
export interface ShareDeadLetter {
  partition: number;
  offset: number;
  deliveries: number;
}

export function newShareState(attributes: ShareAttributes, now: number): ShareState {
  return {
    attributes,
    createdAt: now,
    next: [],
    inFlight: {},
    counters: { delivered: 0, acked: 0, nacked: 0, deadLettered: 0 },
  };
}

export function leaseKey(partition: number, offset: number): string {
  return `${partition}:${offset}`;
}

function keyParts(key: string): { partition: number; offset: number } {
  const [partition, offset] = key.split(":").map(Number) as [number, number];
  return { partition, offset };
}

/** A share receipt: `<partition>.<offset>.<token>`, base 36. */
export function shareReceipt(partition: number, offset: number, token: number): string {
  return `${partition.toString(36)}.${offset.toString(36)}.${token.toString(36)}`;
}

function parseReceipt(receipt: string): { key: string; token: number } | undefined {
  const parts = receipt.split(".");
  if (parts.length !== 3 || parts.some((part) => !/^[0-9a-z]{1,12}$/.test(part))) return undefined;
  const [partition, offset, token] = parts.map((part) => Number.parseInt(part, 36)) as [
    number,
    number,
    number,
  ];
  return { key: leaseKey(partition, offset), token };
}

/** Records whose lease ended, oldest first: what receive hands out before anything new. */
function redeliverable(state: ShareState, now: number): string[] {
  return Object.entries(state.inFlight)
    .filter(([, lease]) => lease.visibleAt <= now)
    .map(([key]) => key)
    .sort((a, b) => {
      const left = keyParts(a);
      const right = keyParts(b);
      return left.partition - right.partition || left.offset - right.offset;
    });
}

/** Whether the record's next delivery would pass maxDeliveries. */
function exhausted(state: ShareState, lease: ShareLease): boolean {
  const { deadLetter } = state.attributes;
  return deadLetter !== null && lease.deliveries >= deadLetter.maxDeliveries;
}

/**
 * A receive, step one: leases records whose lease ended (dead-lettering those past maxDeliveries) and
 * drops from flight those retention removed. Answers the deliveries and the dead letters; the caller
 * then takes new records with `shareTakeNew` while the answer has room.
 */
export function shareRedeliver(
  state: ShareState,
  params: { max: number; now: number; leaseMs: number; heads: readonly HeadRange[]; token: () => number },
): { deliveries: ShareDelivery[]; deadLetters: ShareDeadLetter[] } {
  const deliveries: ShareDelivery[] = [];
  const deadLetters: ShareDeadLetter[] = [];
  for (const key of redeliverable(state, params.now)) {
    if (deliveries.length >= params.max) break;
    const lease = state.inFlight[key] as ShareLease;
    const { partition, offset } = keyParts(key);
    if (offset < (params.heads[partition]?.oldest ?? 0)) {
      // Retention removed it: there is nothing left to deliver.
      delete state.inFlight[key];
      continue;
    }
    if (exhausted(state, lease)) {
      delete state.inFlight[key];
      state.counters.deadLettered++;
      deadLetters.push({ partition, offset, deliveries: lease.deliveries });
      continue;
    }
    lease.token = params.token();
    lease.visibleAt = params.now + params.leaseMs;
    lease.deliveries++;
    state.counters.delivered++;
    deliveries.push({
      partition,
      offset,
      receipt: shareReceipt(partition, offset, lease.token),
      deliveries: lease.deliveries,
    });
  }
  return { deliveries, deadLetters };
}

/** Where partition `partition`'s new records start now (the group's first read of it sets it). */
export function shareNext(state: ShareState, partition: number, head: HeadRange): number {
  const next = state.next[partition] ?? (state.attributes.start === "latest" ? head.next : head.oldest);
  return Math.max(next, head.oldest);
}

/** Leases new records of a partition, just read from `shareNext`: `offsets` in order. */
export function shareTakeNew(
  state: ShareState,
  partition: number,
  offsets: readonly number[],
  params: { now: number; leaseMs: number; token: () => number },
): ShareDelivery[] {
  while (state.next.length <= partition) state.next.push(null);
  return offsets.map((offset) => {
    const token = params.token();
    state.inFlight[leaseKey(partition, offset)] = {
      token,
      visibleAt: params.now + params.leaseMs,
      deliveries: 1,
    };
    state.next[partition] = offset + 1;
    state.counters.delivered++;
    return { partition, offset, receipt: shareReceipt(partition, offset, token), deliveries: 1 };
  });
}

/** The leases the receipts name, or why not: `stale_receipt` once another delivery took the record. */
function leaseOf(state: ShareState, receipt: string): { key: string; lease: ShareLease } | ReceiptResult {
  const parsed = parseReceipt(receipt);
  if (!parsed) return { error: "invalid_receipt" };
  const lease = state.inFlight[parsed.key];
  if (!lease || lease.token !== parsed.token) return { error: "stale_receipt" };
  return { key: parsed.key, lease };
}

export function shareAck(state: ShareState, receipts: readonly string[]): ReceiptResult[] {
  return receipts.map((receipt) => {
    const found = leaseOf(state, receipt);
    if (!("key" in found)) return found;
    delete state.inFlight[found.key];
    state.counters.acked++;
    return { ok: true };
  });
}

/** Nack: the record is visible again after `delayMs`, or, past maxDeliveries, dead-lettered now. */
export function shareNack(
  state: ShareState,
  receipts: readonly string[],
  params: { now: number; delayMs: number },
): { results: ReceiptResult[]; deadLetters: ShareDeadLetter[] } {
  const deadLetters: ShareDeadLetter[] = [];
  const results = receipts.map((receipt): ReceiptResult => {
    const found = leaseOf(state, receipt);
    if (!("key" in found)) return found;
    state.counters.nacked++;
    if (exhausted(state, found.lease)) {
      delete state.inFlight[found.key];
      state.counters.deadLettered++;
      deadLetters.push({ ...keyParts(found.key), deliveries: found.lease.deliveries });
    } else {
      found.lease.visibleAt = params.now + params.delayMs;
    }
    return { ok: true };
  });
  return { results, deadLetters };
}

/** Extend: a lease still on lasts until now + leaseMs. */
export function shareExtend(
  state: ShareState,
  receipts: readonly string[],
  params: { now: number; leaseMs: number },
): ReceiptResult[] {
  return receipts.map((receipt) => {
    const found = leaseOf(state, receipt);
    if (!("key" in found)) return found;
    if (found.lease.visibleAt <= params.now) return { error: "stale_receipt" };
    found.lease.visibleAt = params.now + params.leaseMs;
    return { ok: true };
  });
}

/** The records in flight (as XPENDING), by partition and offset, at most `limit`. */
export function sharePending(
  state: ShareState,
  params: { now: number; limit: number },
): { partition: number; offset: number; deliveries: number; visibleAt: number; leased: boolean }[] {
  return Object.entries(state.inFlight)
    .map(([key, lease]) => ({
      ...keyParts(key),
      deliveries: lease.deliveries,
      visibleAt: lease.visibleAt,
      leased: lease.visibleAt > params.now,
    }))
    .sort((a, b) => a.partition - b.partition || a.offset - b.offset)
    .slice(0, params.limit);
}

/** A record's dead-letter copy: its body, key and headers with where it came from (as a queue's dead
 * letters carry). */
export function shareDeadLetterMessage(
  record: StoredStreamRecord,
  params: { id: string; now: number; stream: string; group: string; deliveries: number },
): NewMessage {
  return {
    id: params.id,
    body: record.body,
    contentType: record.contentType,
    headers: shareDeadLetterHeaders(record.headers, {
      ...params,
      partition: record.partition,
      offset: record.offset,
    }),
    key: record.key,
    priority: 0,
    dedupId: null,
    publishedAt: params.now,
    visibleAt: params.now,
  };
}

function shareDeadLetterHeaders(
  headers: Record<string, string>,
  params: { stream: string; group: string; partition: number; offset: number; deliveries: number },
): Record<string, string> {
  return {
    ...headers,
    "x-dead-letter-reason": "max_deliveries",
    "x-original-stream": params.stream,
    "x-original-share-group": params.group,
    "x-original-partition": String(params.partition),
    "x-original-offset": String(params.offset),
    "x-delivery-count": String(params.deliveries),
  };
}

/** What a share group shows: its attributes, counters and how many records are in flight. */
export interface ShareInfo {
  name: string;
  attributes: ShareAttributes;
  createdAt: number;
  counters: ShareCounters;
  inFlight: number;
}

export function shareInfo(name: string, state: ShareState): ShareInfo {
  return {
    name,
    attributes: state.attributes,
    createdAt: state.createdAt,
    counters: { ...state.counters },
    inFlight: Object.keys(state.inFlight).length,
  };
}

/** When the first lease in flight ends (a waiting receive looks again then), or null with none. */
export function shareNextVisibleAt(state: ShareState): number | null {
  let next: number | null = null;
  for (const lease of Object.values(state.inFlight))
    if (next === null || lease.visibleAt < next) next = lease.visibleAt;
  return next;
}
