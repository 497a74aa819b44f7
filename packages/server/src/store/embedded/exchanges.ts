/**
 * What an exchange means on the embedded stores, written once over the row interface (rows.ts): an
 * exchange keeps its type, is not deleted while a queue dead-letters through it, and binds only to
 * a queue, an exchange or a stream that exists. Every method runs inside one write or read of the store.
 */
import {
  exchangeInUse,
  exchangeNotFound,
  exchangeTypeMismatch,
  queueNotFound,
  streamNotFound,
} from "../../errors.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type { ExchangeRows, ExchangeSlot } from "./rows.js";

export class EmbeddedExchanges<X extends ExchangeSlot> {
  constructor(
    private readonly rows: ExchangeRows<X>,
    /** Whether a stream of that name exists (the stream rows'). */
    private readonly streamExists: (name: string) => boolean,
  ) {}

  private require(name: string): X {
    const exchange = this.rows.exchange(name);
    if (!exchange) throw exchangeNotFound(name);
    return exchange;
  }

  upsert(params: { name: string; type: ExchangeType; alternate: string | null; now: number }): {
    created: boolean;
    exchange: ExchangeRecord;
  } {
    const existing = this.rows.exchange(params.name);
    if (existing) {
      if (existing.type !== params.type) throw exchangeTypeMismatch(params.name, existing.type);
      this.rows.exchangeSetAlternate(existing, params.alternate);
    } else {
      this.rows.exchangeInsert(params.name, params.type, params.alternate, params.now);
    }
    return { created: !existing, exchange: this.rows.exchangeRecord(this.require(params.name)) };
  }

  get(name: string): ExchangeRecord | undefined {
    const exchange = this.rows.exchange(name);
    return exchange && this.rows.exchangeRecord(exchange);
  }

  list(): ExchangeRecord[] {
    return this.rows.exchangeRecords();
  }

  /** Deletes the exchange, its bindings and the bindings to it; refused while a queue dead-letters
   * through it. */
  delete(name: string): void {
    const exchange = this.require(name);
    const sources = this.rows.deadLetterExchangeSources(name);
    if (sources.length > 0) throw exchangeInUse(name, sources);
    this.rows.exchangeRemove(exchange);
  }

  bind(params: { exchange: string; destination: BindingDestination; pattern: string }): { created: boolean } {
    const exchange = this.require(params.exchange);
    const { destination } = params;
    if (destination.kind === "queue") {
      if (!this.rows.queueExists(destination.name)) throw queueNotFound(destination.name);
    } else if (destination.kind === "stream") {
      if (!this.streamExists(destination.name)) throw streamNotFound(destination.name);
    } else {
      this.require(destination.name);
    }
    return { created: this.rows.bindingPut(exchange, destination, params.pattern) };
  }

  unbind(params: { exchange: string; destination: BindingDestination; pattern: string }): {
    deleted: boolean;
  } {
    const exchange = this.require(params.exchange);
    return { deleted: this.rows.bindingRemove(exchange, params.destination, params.pattern) };
  }
}
