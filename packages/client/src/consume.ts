// Push consumption over the WebSocket (`/v1/ws`): the server sends up to `prefetch` messages at a time,
// the consumer runs the handler for each, acks on success and nacks on a throw (dead-letters, on an
// UnrecoverableError). A dropped connection
// is replaced with capped exponential back-off; the server hands back every lease the old one held,
// so the handlers still running on it are told (their signal fires) and their messages are not acked.
// A graceful stop first asks the server for no more messages (`drain`), so that none is delivered,
// and counted as delivered, that the consumer would then hand back unrun.
import { BatchCoalescer } from "./coalescer.js";
import { clientErrorCodes, HopperError, nackOptionsAfter } from "./errors.js";
import { prefetchMax } from "./limits.js";
import { type ServerFrame, SocketSession, type SocketTarget } from "./socket.js";
import { type ItemResult, isItemError, type ReceivedMessage } from "./types.js";
import type { HandlerContext, MessageHandler } from "./worker.js";

export interface ConsumeOptions {
  /** The most messages held (being handled or waiting) at once, 1–1000. Default 1. */
  prefetch?: number;
  /** Aborting it stops the consumer, as stop() does. */
  signal?: AbortSignal;
  /** Receives every failure: connection errors, handler throws, failed acks and nacks, lost leases. */
  onError?: (error: unknown, message?: ReceivedMessage) => void;
}

export interface Consumer {
  /**
   * Asks the server to deliver no more, lets the handlers finish (those running, and any of a message
   * the server sent before it heard) and settles their messages, then closes the connection. A message
   * the consumer did not run is never counted as delivered. Idempotent.
   */
  stop(): Promise<void>;
  /** Resolves once the consumer has stopped. */
  readonly done: Promise<void>;
}

/** How a message is settled: acked, or nacked with the options a nack frame takes. */
type Settlement = { op: "ack" } | { op: "nack"; deadLetter?: true; reason?: string };

/** Starts consuming `queue` over a WebSocket to the client's server. */
export function createConsumer(
  target: SocketTarget,
  queue: string,
  handler: MessageHandler,
  options: ConsumeOptions = {},
): Consumer {
  const prefetch = options.prefetch ?? 1;
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > prefetchMax) {
    throw new RangeError(`prefetch must be an integer from 1 to ${prefetchMax}, got ${prefetch}`);
  }
  const onError = options.onError ?? ((error: unknown) => console.error("hopper consumer:", error));
  const consumer = new QueueConsumer(target, queue, prefetch, handler, onError);
  if (options.signal?.aborted) void consumer.stop();
  else options.signal?.addEventListener("abort", () => void consumer.stop(), { once: true });
  return { stop: () => consumer.stop(), done: consumer.done };
}

class QueueConsumer {
  readonly done: Promise<void>;
  private readonly session: SocketSession;
  /** Each running handler's lease, by receipt: lost when the connection it came on ends. */
  private readonly leases = new Map<string, Lease>();
  private readonly running = new Set<Promise<void>>();
  private readonly batches = new BatchCoalescer<string, ItemResult>();
  private stopping: Promise<void> | undefined;
  /** The server's id of this consumer on the open connection, once it answered `consume`. */
  private sub: string | undefined;
  /** The `consume` request under way on a new connection. */
  private consuming: Promise<unknown> | undefined;
  /** Set once deliveries are no longer run: they are held unrun, and closing hands them back. */
  private refusingDeliveries = false;
  private resolveDone!: () => void;

  constructor(
    target: SocketTarget,
    private readonly queue: string,
    private readonly prefetch: number,
    private readonly handler: MessageHandler,
    private readonly onError: (error: unknown, message?: ReceivedMessage) => void,
  ) {
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
    this.session = new SocketSession(target, {
      onOpen: async (session) => {
        // A connection that opens while stopping consumes nothing: stop() is about to close it.
        if (this.stopping) return;
        // `batch`: each lease's messages come in one frame, which costs the server far less per message.
        const consuming = session.request({
          op: "consume",
          queue: this.queue,
          prefetch: this.prefetch,
          batch: true,
        });
        this.consuming = consuming;
        const answer = await consuming;
        this.sub = typeof answer.sub === "string" ? answer.sub : undefined;
      },
      onPush: (frame) => this.onPush(frame),
      onClose: () => this.connectionLost(),
      onError: (error) => this.report(error),
    });
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.stopDeliveries();
      // A delivery the server sent before it heard may start a handler while others finish.
      while (this.running.size > 0) await Promise.all(this.running);
      this.refusingDeliveries = true;
      await this.session.close();
      this.resolveDone();
    })();
    return this.stopping;
  }

  /**
   * Asks the server to lease no more messages to this consumer, keeping the ones it holds: once it
   * answers, every delivery it made has arrived (bar those it held while this client read too
   * slowly). Without it the credit of each handler that finishes would bring a message that is then
   * handed back unrun, with its delivery counted. Where the server cannot be asked (no connection, a
   * server without `drain`), deliveries are held unrun from now on, as they were before `drain`.
   */
  private async stopDeliveries(): Promise<void> {
    await this.consuming?.catch(() => {});
    const sub = this.sub;
    if (sub === undefined) {
      this.refusingDeliveries = true;
      return;
    }
    try {
      await this.session.request({ op: "drain", sub });
    } catch {
      this.refusingDeliveries = true;
    }
  }

  private onPush(frame: ServerFrame): void {
    if (frame.op === "deliver") {
      // Once the consumer no longer runs deliveries, one is held unrun; closing the connection hands it back.
      if (this.refusingDeliveries) return;
      const messages = (frame.messages as ReceivedMessage[] | undefined) ?? [
        frame.message as ReceivedMessage,
      ];
      for (const message of messages) this.track(this.handle(message));
      return;
    }
    if (frame.op === "cancelled") {
      // The server ended the consumer (its queue was deleted): try again after a pause, as after a drop.
      const error = frame.error as { code?: string; message?: string } | undefined;
      this.report(
        new HopperError({
          code: error?.code ?? "cancelled",
          message: error?.message ?? `the server cancelled the consumer of "${this.queue}"`,
          status: 0,
        }),
      );
      this.session.reconnect();
    }
  }

  /** Holds `work` until it settles; `work` never rejects. */
  private track(work: Promise<void>): void {
    const tracked = work.finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }

  private async handle(message: ReceivedMessage): Promise<void> {
    const lease = new Lease();
    this.leases.set(message.receipt, lease);
    let settlement: Settlement = { op: "ack" };
    try {
      await this.handler(message, lease.context);
    } catch (error) {
      settlement = { op: "nack", ...nackOptionsAfter(error) };
      if (lease.lostBecause === undefined) this.report(error, message);
    }
    this.leases.delete(message.receipt);
    // The connection it came on has ended: the server handed the message back; the receipt is dead.
    if (lease.lostBecause !== undefined) return;
    try {
      const result = await this.settle(settlement, message.receipt);
      if (isItemError(result)) this.report(HopperError.fromItem(result.error, 200), message);
    } catch (error) {
      this.report(error, message);
    }
  }

  /** The connection ended: every running handler's lease went with it. */
  private connectionLost(): void {
    this.sub = undefined;
    this.consuming = undefined;
    for (const [receipt, lease] of this.leases) {
      const error = new HopperError({
        code: "stale_receipt",
        message: `the connection closed, so the server handed back the message with receipt ${receipt}`,
        status: 0,
      });
      lease.lose(error);
      this.report(error);
    }
    this.leases.clear();
  }

  /**
   * Acks or nacks one receipt; the receipts of one event-loop turn settled alike share a frame of at
   * most 100.
   */
  private settle(settlement: Settlement, receipt: string): Promise<ItemResult> {
    const key =
      settlement.op === "ack"
        ? "ack"
        : `nack\n${settlement.deadLetter ? `dead\n${settlement.reason ?? ""}` : ""}`;
    return this.batches.add(key, receipt, async (receipts) => {
      const answer = await this.session.request({ ...settlement, receipts });
      if (!Array.isArray(answer.results)) {
        const message = `${settlement.op}: the answer has no results`;
        throw new HopperError({ code: clientErrorCodes.invalidResponse, message, status: 0 });
      }
      return answer.results as ItemResult[];
    });
  }

  private report(error: unknown, message?: ReceivedMessage): void {
    try {
      this.onError(error, message);
    } catch {
      // An onError that throws must not stop the consumer or leave a message unsettled.
    }
  }
}

/**
 * What a pushed message's handler gets: `signal` is made when first read, since an AbortSignal costs
 * more than the rest of a delivery on the client (2.4 µs here) and most handlers never look
 * (bench/results/2026-12-01-session-11.md). It is a getter on the prototype, so a copy made by spreading
 * the context does not carry it (client.md); an object literal with its own getter cost 0.6 µs a message.
 */
class LeaseContext implements HandlerContext {
  readonly #lease: Lease;

  constructor(lease: Lease) {
    this.#lease = lease;
  }

  get signal(): AbortSignal {
    return this.#lease.signal();
  }
}

/** A delivered message's lease, lost when the connection it came on ends. */
class Lease {
  /** Set once the lease is lost: the reason its signal fires with. */
  lostBecause: HopperError | undefined;
  readonly context: HandlerContext = new LeaseContext(this);
  private controller: AbortController | undefined;

  signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.lostBecause !== undefined) this.controller.abort(this.lostBecause);
    }
    return this.controller.signal;
  }

  lose(error: HopperError): void {
    this.lostBecause ??= error;
    this.controller?.abort(error);
  }
}
