/** The log store's exchange rows (embedded/rows.ts): the exchanges held in memory, changed through
 * log-state.ts's primitives. What they mean is in the engine (embedded/exchanges.ts). */
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type { ExchangeRows } from "../embedded/rows.js";
import type { LogState } from "./log-state.js";
import { compareText, type ExchangeState, toExchangeRecord } from "./queue-state.js";

/** Removes every binding whose destination is `destination`, from every exchange. */
export function removeBindingsTo(state: LogState, destination: BindingDestination): void {
  for (const exchange of state.exchanges.values()) {
    for (const binding of [...exchange.bindings.values()]) {
      if (binding.destination.kind === destination.kind && binding.destination.name === destination.name)
        state.removeBinding(exchange, binding.destination, binding.pattern);
    }
  }
}

export class LogExchangeRows implements ExchangeRows<ExchangeState> {
  constructor(private readonly state: LogState) {}

  exchange(name: string): ExchangeState | undefined {
    return this.state.exchanges.get(name);
  }

  exchangeRecord(exchange: ExchangeState): ExchangeRecord {
    return toExchangeRecord(exchange);
  }

  exchangeRecords(): ExchangeRecord[] {
    return [...this.state.exchanges.values()]
      .sort((a, b) => compareText(a.name, b.name))
      .map(toExchangeRecord);
  }

  exchangeInsert(name: string, type: ExchangeType, alternate: string | null, now: number): void {
    this.state.createExchange(name, type, alternate, now);
  }

  exchangeSetAlternate(exchange: ExchangeState, alternate: string | null): void {
    this.state.setAlternate(exchange, alternate);
  }

  exchangeRemove(exchange: ExchangeState): void {
    this.state.dropExchange(exchange);
    removeBindingsTo(this.state, { kind: "exchange", name: exchange.name });
  }

  deadLetterExchangeSources(name: string): string[] {
    return [...this.state.queues.values()]
      .filter((queue) => {
        const target = queue.attributes.deadLetter;
        return target !== null && "exchange" in target && target.exchange === name;
      })
      .map((queue) => queue.name)
      .sort(compareText);
  }

  queueExists(name: string): boolean {
    return this.state.queues.has(name);
  }

  bindingsRemoveTo(destination: BindingDestination): void {
    removeBindingsTo(this.state, destination);
  }

  bindingPut(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
    return this.state.putBinding(exchange, destination, pattern);
  }

  bindingRemove(exchange: ExchangeState, destination: BindingDestination, pattern: string): boolean {
    return this.state.removeBinding(exchange, destination, pattern);
  }
}
