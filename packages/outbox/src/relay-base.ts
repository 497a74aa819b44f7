/** What both relay modes set up the same way: time, errors, the Hopper client, the publisher, the
 * waits and stop, and the common part of the metrics. */
import { HopperClient } from "@hopper/client";
import { type OutboxClock, type RandomFloat, systemClock, systemRandom } from "./clock.js";
import type { OutboxRow } from "./event.js";
import { outboxLimits } from "./limits.js";
import { createPublisher, type Publisher, type RelayHooks } from "./publisher.js";
import type { Relay, RelayMetrics, RelayOptions } from "./relay.js";

/** What a mode reads for its metrics; the base adds the counters and the pauses. */
export type ModeMetrics = Pick<RelayMetrics, "pendingRows" | "failedRows" | "slotLagBytes"> & {
  oldestPendingCreatedAt: number | undefined;
};

export interface RelayBase {
  clock: OutboxClock;
  random: RandomFloat;
  onError: (error: unknown, context: { rows?: readonly OutboxRow[] }) => void;
  hopper: HopperClient;
  publisher: Publisher;
  batchRowsMax: number;
  counters: { published: number; failed: number };
  /** Closes the Hopper client if the relay opened it. */
  closeHopper(): Promise<void>;
  /** Aborted by stop(): ends back-offs and waits. */
  readonly stopSignal: AbortSignal;
  isStopped(): boolean;
  /** Ends the current idle wait, or, when none, makes the next one return at once. */
  wake(): void;
  /** Waits up to `waitMs`, less if woken or stopped. */
  idle(waitMs: number): Promise<void>;
  /** The relay handed to the application: stop() ends the loop and waits for `done`. */
  relay(mode: RelayMetrics["mode"], done: Promise<void>, read: () => Promise<ModeMetrics>): Relay;
}

export function relayBase(options: RelayOptions, hooks: RelayHooks): RelayBase {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const onError =
    options.onError ??
    ((error: unknown) => console.error("[hopper-outbox]", error instanceof Error ? error.message : error));
  const ownsClient = !(options.hopper instanceof HopperClient);
  const hopper =
    options.hopper instanceof HopperClient
      ? options.hopper
      : new HopperClient({ ...options.hopper, requestTimeoutMs: outboxLimits.publishTimeoutMs });
  let stopped = false;
  const stopController = new AbortController();
  /** Aborted to end an idle wait early (a wake, or stop); replaced after each wait. */
  let wakeController = new AbortController();
  let wakeRequested = false;
  const publisher = createPublisher(hopper, { clock, random, onError, hooks });
  const counters = { published: 0, failed: 0 };
  return {
    clock,
    random,
    onError,
    hopper,
    publisher,
    batchRowsMax: options.batchRowsMax ?? outboxLimits.claimRowsMax,
    counters,
    closeHopper: async () => {
      if (ownsClient) await hopper.close();
    },
    stopSignal: stopController.signal,
    isStopped: () => stopped,
    wake() {
      wakeRequested = true;
      wakeController.abort();
    },
    async idle(waitMs) {
      if (!wakeRequested && !stopped) await clock.sleep(Math.max(waitMs, 0), wakeController.signal);
      wakeRequested = false;
      if (wakeController.signal.aborted) wakeController = new AbortController();
    },
    relay(mode, done, read) {
      return {
        done,
        async stop() {
          stopped = true;
          stopController.abort();
          wakeController.abort();
          await done;
        },
        async metrics() {
          const metrics = await read();
          const now = clock.now();
          const oldest = metrics.oldestPendingCreatedAt;
          return {
            mode,
            ...counters,
            pendingRows: metrics.pendingRows,
            failedRows: metrics.failedRows,
            oldestPendingAgeMs: oldest === undefined ? 0 : Math.max(0, now - oldest),
            slotLagBytes: metrics.slotLagBytes,
            pausedDestinations: publisher.pausedDestinations(now),
            pausedOn: publisher.pausedOn,
          };
        },
      };
    },
  };
}
