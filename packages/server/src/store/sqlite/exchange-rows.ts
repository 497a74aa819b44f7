/** The SQLite store's exchange rows (embedded/rows.ts): named statements over `exchanges` and
 * `bindings`. What they mean is in the engine (embedded/exchanges.ts). */
import type {
  BindingDestination,
  BindingRecord,
  ExchangeRecord,
  ExchangeType,
} from "../../model/exchange.js";
import type { ExchangeRows } from "../embedded/rows.js";
import type { Statements } from "./queue-rows.js";
import * as sql from "./statements.js";

export interface ExchangeRow {
  exchange_id: number;
  name: string;
  type: ExchangeType;
  alternate: string | null;
  created_at: number;
}

export class SqliteExchangeRows implements ExchangeRows<ExchangeRow> {
  constructor(private readonly stmt: Statements) {}

  exchange(name: string): ExchangeRow | undefined {
    return this.stmt.get(sql.exchangeSelectByName).get({ name }) as ExchangeRow | undefined;
  }

  exchangeRecord(row: ExchangeRow): ExchangeRecord {
    const rows = this.stmt.get(sql.bindingSelectByExchange).all({ exchangeId: row.exchange_id }) as {
      destination_kind: BindingDestination["kind"];
      destination: string;
      pattern: string;
    }[];
    const bindings = rows.map(
      (binding): BindingRecord => ({
        destination: { kind: binding.destination_kind, name: binding.destination },
        pattern: binding.pattern,
      }),
    );
    return { name: row.name, type: row.type, alternate: row.alternate, createdAt: row.created_at, bindings };
  }

  exchangeRecords(): ExchangeRecord[] {
    return (this.stmt.get(sql.exchangeSelectAll).all() as ExchangeRow[]).map((row) =>
      this.exchangeRecord(row),
    );
  }

  exchangeInsert(name: string, type: ExchangeType, alternate: string | null, now: number): void {
    this.stmt.get(sql.exchangeInsert).run({ name, type, alternate, createdAt: now });
  }

  exchangeSetAlternate(exchange: ExchangeRow, alternate: string | null): void {
    this.stmt.get(sql.exchangeUpdateAlternate).run({ exchangeId: exchange.exchange_id, alternate });
  }

  exchangeRemove(exchange: ExchangeRow): void {
    this.stmt.get(sql.exchangeDelete).run({ exchangeId: exchange.exchange_id });
    this.bindingsRemoveTo({ kind: "exchange", name: exchange.name });
  }

  bindingsRemoveTo(destination: BindingDestination): void {
    this.stmt
      .get(sql.bindingDeleteByDestination)
      .run({ destinationKind: destination.kind, destination: destination.name });
  }

  deadLetterExchangeSources(name: string): string[] {
    return (this.stmt.get(sql.queueSelectDeadLetterExchangeSources).all({ name }) as { name: string }[]).map(
      (row) => row.name,
    );
  }

  queueExists(name: string): boolean {
    return this.stmt.get(sql.queueRefByName).get({ name }) !== undefined;
  }

  bindingPut(exchange: ExchangeRow, destination: BindingDestination, pattern: string): boolean {
    const { changes } = this.stmt.get(sql.bindingInsert).run({
      exchangeId: exchange.exchange_id,
      destinationKind: destination.kind,
      destination: destination.name,
      pattern,
    });
    return changes > 0;
  }

  bindingRemove(exchange: ExchangeRow, destination: BindingDestination, pattern: string): boolean {
    const { changes } = this.stmt.get(sql.bindingDelete).run({
      exchangeId: exchange.exchange_id,
      destinationKind: destination.kind,
      destination: destination.name,
      pattern,
    });
    return changes > 0;
  }
}
