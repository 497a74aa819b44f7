/** The exchanges and their bindings, as the broker stores them: one atomic transaction per method. */
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../model/exchange.js";

export interface ExchangeStore {
  /** Creates the exchange, or updates its alternate. Throws exchange_type_mismatch. */
  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }>;
  exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined>;
  exchangeList(): Promise<ExchangeRecord[]>;
  /** Deletes the exchange, its bindings and the bindings to it. Throws exchange_not_found, and
   * exchange_in_use when a queue dead-letters through it. */
  exchangeDelete(params: { name: string }): Promise<void>;
  /** Binds a destination to the exchange (idempotent). Throws exchange_not_found, queue_not_found. */
  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }>;
  /** Removes a binding; says whether there was one. Throws exchange_not_found. */
  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }>;
}
