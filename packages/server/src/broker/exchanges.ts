/**
 * What exchanges do (DESIGN.md §4): publish once, and a copy lands in every queue the routing key
 * reaches, in one transaction. Routing is the Router's; writing the copies is the queue broker's.
 */
import type { Clock } from "../clock.js";
import { exchangeNotFound, HopperError } from "../errors.js";
import { limits } from "../limits.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../model/exchange.js";
import type { Store, StreamAppendCopy } from "../store/store.js";
import { checkRoutingKey, type OutgoingMessage, type QueueBroker } from "./queues.js";
import type { Router } from "./router.js";
import type { StreamBroker } from "./streams.js";

export interface PublishItem {
  routingKey: string;
  message: OutgoingMessage;
}

/** `id` is null when the message reached no queue and so was never stored. */
/** `routed`: copies stored; `duplicate`: every destination queue already had it (by dedupId). */
export type PublishResult =
  | { id: string | null; routed: number; duplicate: boolean }
  | { error: HopperError };

const namePattern = new RegExp(limits.namePattern);

function checkName(kind: string, name: string): void {
  if (!namePattern.test(name)) {
    throw new HopperError(
      "invalid_name",
      `"${name.slice(0, limits.refusedNameEchoLengthMax)}" is not a valid ${kind} name.`,
      {
        name: name.slice(0, limits.refusedNameEchoLengthMax),
      },
    );
  }
}

export class ExchangeBroker {
  /** Publishes that reached no queue and were not mandatory, per exchange, since the process started:
   * such a message was never stored, and this is where it is counted. */
  readonly unroutable = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly router: Router,
    private readonly queues: QueueBroker,
    /** Plans the copies into streams bound to an exchange (their partitions). */
    private readonly streams?: StreamBroker,
  ) {}

  async putExchange(
    name: string,
    input: { type: ExchangeType; alternate?: string | null },
  ): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    checkName("exchange", name);
    if (input.alternate) checkName("exchange", input.alternate);
    // As with queue attributes, an update that leaves the alternate out keeps it; null removes it.
    const alternate =
      input.alternate === undefined
        ? ((await this.store.exchangeGet({ name }))?.alternate ?? null)
        : input.alternate;
    const result = await this.store.exchangeUpsert({
      name,
      type: input.type,
      alternate,
      now: this.clock.now(),
    });
    this.router.invalidate();
    return result;
  }

  async getExchange(name: string): Promise<ExchangeRecord> {
    const exchange = await this.store.exchangeGet({ name });
    if (!exchange) throw exchangeNotFound(name);
    return exchange;
  }

  listExchanges(): Promise<ExchangeRecord[]> {
    return this.store.exchangeList();
  }

  async deleteExchange(name: string): Promise<void> {
    await this.store.exchangeDelete({ name });
    this.router.invalidate();
  }

  async bind(
    exchange: string,
    destination: BindingDestination,
    pattern: string,
  ): Promise<{ created: boolean }> {
    checkRoutingKey(pattern);
    const result = await this.store.bindingUpsert({ exchange, destination, pattern });
    this.router.invalidate();
    return result;
  }

  async unbind(
    exchange: string,
    destination: BindingDestination,
    pattern: string,
  ): Promise<{ deleted: boolean }> {
    const result = await this.store.bindingDelete({ exchange, destination, pattern });
    this.router.invalidate();
    return result;
  }

  /**
   * Routes each message and writes its copies into queues and streams, all of the batch in one
   * transaction. A message that reaches no queue or stream fails with `unroutable` when the publish
   * is mandatory; otherwise it is answered `routed: 0`, not stored, and counted in `unroutable`.
   * `routed` counts the queue copies stored anew and the stream records appended.
   */
  async publish(exchange: string, items: PublishItem[], mandatory: boolean): Promise<PublishResult[]> {
    if (items.length < 1 || items.length > limits.batchSizeMax) {
      throw new HopperError("batch_too_large", `A batch holds 1 to ${limits.batchSizeMax} items.`);
    }
    if (!(await this.router.exchange(exchange))) {
      throw exchangeNotFound(exchange);
    }
    for (const item of items) checkRoutingKey(item.routingKey);
    const routes = await Promise.all(
      items.map((item) => this.router.destinations(exchange, item.routingKey)),
    );
    const results: (PublishResult | undefined)[] = routes.map(({ queues, streams }) => {
      if (queues.length + streams.length > 0) return undefined;
      if (mandatory) {
        return {
          error: new HopperError("unroutable", `No binding of "${exchange}" matches the routing key.`),
        };
      }
      this.unroutable.set(exchange, (this.unroutable.get(exchange) ?? 0) + 1);
      return undefined;
    });
    const routed = items
      .map((item, index) => ({
        index,
        message: item.message,
        ...(routes[index] ?? { queues: [], streams: [] }),
      }))
      .filter(
        ({ index, queues, streams }) => results[index] === undefined && queues.length + streams.length > 0,
      );
    const appends = await this.streamCopies(routed);
    const written = await this.queues.sendCopies(routed, appends);
    for (const { stream } of appends) this.streams?.appended(stream);
    routed.forEach(({ index, streams }, i) => {
      const result = written[i];
      results[index] =
        result && !("error" in result) ? { ...result, routed: result.routed + streams.length } : result;
    });
    // What is left unanswered reached no queue and was not mandatory: it was never stored.
    return results.map((result) => result ?? { id: null, routed: 0, duplicate: false });
  }

  /** The records the routed messages append to their streams, one list per stream, in message order. */
  private async streamCopies(
    routed: { message: OutgoingMessage; streams: string[] }[],
  ): Promise<StreamAppendCopy[]> {
    const appends = new Map<string, StreamAppendCopy>();
    for (const { message, streams } of routed) {
      for (const stream of streams) {
        if (!this.streams) throw new HopperError("not_implemented", "This server has no streams.");
        let copy = appends.get(stream);
        if (!copy) {
          copy = { stream, records: [] };
          appends.set(stream, copy);
        }
        copy.records.push(await this.streams.recordOf(stream, message));
      }
    }
    return [...appends.values()];
  }
}
