/**
 * The WAL relay (`runRelay({ mode: "wal" })`, PostgreSQL): it reads the outbox table's inserts from
 * logical decoding (pgoutput over a replication slot and a publication, through pg-logical-replication)
 * instead of polling the table, which the application keeps empty (writeOutbox's `mode: "wal"` inserts
 * and deletes the row in one transaction). Transactions come in commit order, each whole.
 *
 * Events are published with the polling relay's publisher (publisher.ts): at most one event of a key
 * in flight, up to a batch of keys' heads per round. The slot's position is acknowledged only up to
 * the end of the last transaction whose every event Hopper confirmed (or that was refused and written
 * to `<prefix>outbox_failed`), so a crash or a restart reads again from there: at least once, and
 * processOnce makes the duplicate harmless. A refused event leaves its key's sequence (it is recorded,
 * and the key goes on): holding the key would hold the slot, and with it the WAL of every key.
 *
 * Bounds: the relay keeps at most walBufferedRowsMax unpublished events in memory and then stops
 * reading (flow control), so the slot holds what Hopper cannot take yet; max_slot_wal_keep_size bounds
 * that on the server, and the slot's lag is a metric. A feedback loop tells the server the confirmed
 * position every walFeedbackIntervalMs (so a relay waiting for Hopper is not timed out), and when idle
 * writes a logical message that moves the slot past other tables' WAL.
 */
import type { Pool } from "pg";
import type { LogicalReplicationService, Pgoutput } from "pg-logical-replication";
import { backoffDelayMs } from "./backoff.js";
import { isPgPool, type RowMarks } from "./driver.js";
import { decodeRow, type OutboxRow } from "./event.js";
import { outboxLimits } from "./limits.js";
import { openDriver } from "./open-driver.js";
import { postgresQueries, walQueries } from "./postgres-queries.js";
import type { RelayHooks, RoundOutcome } from "./publisher.js";
import type { Relay, RelayOptions } from "./relay.js";
import { relayBase } from "./relay-base.js";
import { resolveTables, resolveWalNames } from "./tables.js";
import { setUpWal } from "./wal-setup.js";

interface WalTransaction {
  /** The end of its commit record, known once the commit came: the position to acknowledge. */
  endLsn: bigint | undefined;
  /** Its events not yet confirmed by Hopper or recorded as failed. */
  remaining: number;
}

interface WalEvent {
  row: OutboxRow;
  /** The columns as decoded, for the failed table. */
  raw: Record<string, unknown>;
  transaction: WalTransaction;
}

interface Session {
  service: LogicalReplicationService;
  ended: boolean;
}

/** `X/Y` (hex halves, as PostgreSQL and the library print an LSN) as a number. */
export function parseLsn(text: string): bigint {
  const [high, low] = text.split("/");
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

export function formatLsn(lsn: bigint): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** How long stop() waits for the server to show the last acknowledged position, polled this often;
 * past it the position is still sent, and a restart may publish the last events again. */
const stopConfirmWaitMs = 2_000;
const stopConfirmPollMs = 20;

export function startWalRelay(options: RelayOptions, hooks: RelayHooks): Relay {
  // Over 80 lines: the session, the buffer, the publish loop and the feedback loop share this state.
  if (!isPgPool(options.db)) throw new TypeError("runRelay: the WAL mode takes a pg Pool as db");
  const pool: Pool = options.db;
  const base = relayBase(options, hooks);
  const { clock, random, onError, publisher, counters, batchRowsMax } = base;
  const tables = resolveTables(options, "postgres");
  const names = resolveWalNames(tables, options);
  const q = postgresQueries(tables);
  const wq = walQueries(tables, names);
  const driver = openDriver(pool, options);
  const outboxTable = `${tables.prefix}outbox`;
  const tickPrefix = `hopper-outbox:${names.slot}`;
  const feedbackIntervalMs = options.feedbackIntervalMs ?? outboxLimits.walFeedbackIntervalMs;

  /** Events read and not yet done, in commit order. */
  let events: WalEvent[] = [];
  /** Transactions read and not yet acknowledged, in commit order (ticks are empty ones). */
  let transactions: WalTransaction[] = [];
  let open: WalTransaction | undefined;
  /** The position acknowledged to the server (or found on the slot at the session's start). */
  let confirmedLsn: bigint | undefined;
  let confirmedAtStart: bigint | undefined;
  let session: Session | undefined;
  let roomWaiters: (() => void)[] = [];
  const wake = () => base.wake();
  const releaseRoom = () => {
    for (const resolve of roomWaiters) resolve();
    roomWaiters = [];
  };

  function sendFeedback(current: Session | undefined): void {
    // The library adds one to the position it is given (it reports "the next byte"); the end of a
    // commit record already is the next byte, so it gets one less.
    if (current && !current.ended && confirmedLsn !== undefined && confirmedLsn > 0n) {
      void current.service.acknowledge(formatLsn(confirmedLsn - 1n)).catch(() => {});
    }
  }

  /** The stream's messages, one at a time (flow control): resolving late stops the reading. */
  async function onData(current: Session, lsn: string, message: Pgoutput.Message) {
    if (current !== session || current.ended) return;
    if (message.tag === "begin") {
      open = { endLsn: undefined, remaining: 0 };
      transactions.push(open);
    } else if (message.tag === "insert" && open) {
      if (message.relation.schema !== tables.schema || message.relation.name !== outboxTable) return;
      const raw = message.new as Record<string, unknown>;
      events.push({ row: decodeRow({ ...raw, state: "pending" }), raw, transaction: open });
      open.remaining += 1;
      wake();
      while (events.length >= outboxLimits.walBufferedRowsMax && current === session && !current.ended) {
        await new Promise<void>((resolve) => roomWaiters.push(resolve));
      }
    } else if (message.tag === "commit" && open) {
      open.endLsn = parseLsn(lsn);
      open = undefined;
      wake();
    } else if (message.tag === "message" && message.prefix === tickPrefix && !message.transactional) {
      transactions.push({ endLsn: parseLsn(lsn), remaining: 0 });
      wake();
    }
  }

  async function openSession(): Promise<void> {
    const setup = await setUpWal(pool, options);
    if (setup.created.includes("slot")) {
      onError(
        new Error(`created replication slot ${names.slot}: events written before it were not captured`),
        {},
      );
    }
    const slot = (await pool.query(wq.walSlotFind)).rows[0] as { confirmed_flush_lsn: string | null };
    confirmedAtStart = slot.confirmed_flush_lsn === null ? undefined : parseLsn(slot.confirmed_flush_lsn);
    confirmedLsn = confirmedAtStart;
    const { LogicalReplicationService, PgoutputPlugin } = await import("pg-logical-replication");
    const service = new LogicalReplicationService(pool.options, {
      // Acknowledged by this relay alone, after Hopper's confirm; never on a timer of the library's.
      acknowledge: { auto: false, timeoutSeconds: 0 },
      flowControl: { enabled: true },
    });
    const current: Session = { service, ended: false };
    const end = (error?: unknown) => {
      // The library both emits and rejects with a failed connection: one report.
      if (error !== undefined && !current.ended && !base.isStopped()) onError(error, {});
      current.ended = true;
      releaseRoom();
      wake();
    };
    service.on("data", (lsn: string, message: Pgoutput.Message) => onData(current, lsn, message));
    service.on("heartbeat", (_lsn: string, _at: number, shouldRespond: boolean) => {
      if (shouldRespond) sendFeedback(current);
    });
    service.on("error", end);
    session = current;
    const plugin = new PgoutputPlugin({
      protoVersion: 1,
      publicationNames: [names.publication],
      messages: true,
    });
    service.subscribe(plugin, names.slot).then(() => end(), end);
  }

  /** Ends the session; what it read and did not acknowledge will be read again by the next one. */
  async function closeSession(): Promise<void> {
    const current = session;
    session = undefined;
    events = [];
    transactions = [];
    open = undefined;
    if (!current) return;
    current.ended = true;
    releaseRoom();
    await current.service.stop().catch(() => {});
    current.service.removeAllListeners();
  }

  /** Acknowledges the end of every transaction at the front that is done. */
  function advance(): void {
    let target: bigint | undefined;
    for (;;) {
      const first = transactions[0];
      if (first === undefined || first.endLsn === undefined || first.remaining > 0) break;
      target = first.endLsn;
      transactions.shift();
    }
    if (target !== undefined && (confirmedLsn === undefined || target > confirmedLsn)) {
      confirmedLsn = target;
      sendFeedback(session);
    }
  }

  /** The first event of each key not yet done, in commit order, skipping paused destinations. */
  function heads(): WalEvent[] {
    const paused = new Set(publisher.pausedDestinations(clock.now()));
    const seenKeys = new Set<string>();
    const taken: WalEvent[] = [];
    for (const event of events) {
      const key = event.row.key ?? "";
      if (seenKeys.has(key)) continue;
      seenKeys.add(key);
      const { destination } = event.row;
      const label =
        "queue" in destination ? `queue:${destination.queue}` : `exchange:${destination.exchange}`;
      if (paused.has(label)) continue;
      taken.push(event);
      if (taken.length === batchRowsMax) break;
    }
    return taken;
  }

  /** Takes finished events out of the buffer; their transactions may now be acknowledged. */
  function finish(finished: WalEvent[]): void {
    if (finished.length === 0) return;
    const set = new Set(finished);
    for (const event of finished) event.transaction.remaining -= 1;
    events = events.filter((event) => !set.has(event));
    releaseRoom();
  }

  /** Records what the round decided: sent events are done; refused ones once in the failed table. */
  async function settle(taken: WalEvent[], marks: RowMarks): Promise<void> {
    const bySeq = new Map(taken.map((event) => [event.row.seq, event]));
    const now = clock.now();
    const sent = marks.sent.map((seq) => bySeq.get(seq) as WalEvent);
    finish(sent);
    counters.published += sent.length;
    if (options.onPublished && sent.length > 0) {
      options.onPublished(
        sent.map((event) => event.row),
        now,
      );
    }
    // One at a time: a database failure leaves the rest in the buffer, refused again next round.
    for (const failed of marks.failed) {
      const event = bySeq.get(failed.seq) as WalEvent;
      const { raw } = event;
      await pool.query(q.outboxFailedInsert, [
        raw.id,
        raw.destination_kind,
        raw.destination_name,
        raw.routing_key,
        raw.order_key,
        raw.body,
        raw.body_encoding,
        raw.content_type,
        raw.headers,
        raw.created_at,
        now,
        JSON.stringify(failed.error),
      ]);
      finish([event]);
      counters.failed += 1;
    }
  }

  async function loop(): Promise<void> {
    let failureAttempt = 0;
    try {
      while (!base.isStopped()) {
        const round: RoundOutcome = { retry: false, retryAfterMs: undefined };
        try {
          if (session?.ended) {
            // Lost (the server restarted, the slot is busy with another relay): back off, then open
            // a new session that reads again from the slot's confirmed position.
            await closeSession();
            round.retry = true;
          } else if (!session) await openSession();
        } catch (error) {
          onError(error, {});
          round.retry = true;
        }
        if (round.retry) {
          failureAttempt += 1;
          await clock.sleep(backoffDelayMs(failureAttempt, random, undefined), base.stopSignal);
          continue;
        }
        try {
          advance();
          const taken = heads();
          if (taken.length === 0) {
            const now = clock.now();
            const pauseEnd = publisher.nextPauseEndMs(now) ?? Number.POSITIVE_INFINITY;
            await base.idle(Math.min(feedbackIntervalMs, pauseEnd - now));
            continue;
          }
          const marks = await publisher.publish(
            taken.map((event) => event.row),
            round,
          );
          await settle(taken, marks);
          advance();
        } catch (error) {
          onError(error, {});
          round.retry = true;
        }
        if (!round.retry) {
          failureAttempt = 0;
          continue;
        }
        failureAttempt += 1;
        await clock.sleep(backoffDelayMs(failureAttempt, random, round.retryAfterMs), base.stopSignal);
      }
      await confirmBeforeStop();
    } finally {
      await closeSession();
      await base.closeHopper();
    }
  }

  /** Sends the last position and waits (bounded) until the slot shows it, so a restart starts there. */
  async function confirmBeforeStop(): Promise<void> {
    if (!session || session.ended || confirmedLsn === undefined) return;
    if (confirmedAtStart !== undefined && confirmedLsn <= confirmedAtStart) return;
    sendFeedback(session);
    const deadline = clock.now() + stopConfirmWaitMs;
    while (clock.now() < deadline) {
      const slot = (await pool.query(wq.walSlotFind).catch(() => undefined))?.rows[0];
      if (slot?.confirmed_flush_lsn && parseLsn(slot.confirmed_flush_lsn) >= confirmedLsn) return;
      await clock.sleep(stopConfirmPollMs);
    }
  }

  async function slotLagBytes(): Promise<number | undefined> {
    const slot = (await pool.query(wq.walSlotFind).catch(() => undefined))?.rows[0];
    return slot?.lag_bytes === null || slot?.lag_bytes === undefined ? undefined : Number(slot.lag_bytes);
  }

  /** Keeps the server informed while the publish loop waits, and moves an idle slot forward. */
  async function feedbackLoop(): Promise<void> {
    while (!base.isStopped()) {
      await clock.sleep(feedbackIntervalMs, base.stopSignal);
      if (base.isStopped() || !session || session.ended) continue;
      sendFeedback(session);
      if (events.length > 0 || transactions.length > 0 || open) continue;
      try {
        if (((await slotLagBytes()) ?? 0) > 0) await pool.query(wq.walTick, [tickPrefix]);
      } catch (error) {
        onError(error, {});
      }
    }
  }

  const feedback = feedbackLoop();
  const done = loop().finally(() => feedback);
  return base.relay("wal", done, async () => ({
    pendingRows: events.length,
    failedRows: (await driver.outboxStats()).failedRows,
    oldestPendingCreatedAt: events[0]?.row.createdAt,
    slotLagBytes: await slotLagBytes(),
  }));
}
