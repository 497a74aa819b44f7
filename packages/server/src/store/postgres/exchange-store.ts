/**
 * The PostgreSQL store's exchanges and bindings (ExchangeStore): each call one transaction, announced
 * to the other nodes on commit, or one read.
 */
import { exchangeInUse, exchangeNotFound, exchangeTypeMismatch, invariant } from "../../errors.js";
import type { BindingDestination, ExchangeRecord, ExchangeType } from "../../model/exchange.js";
import type { ExchangeStore } from "../exchange-store.js";
import type { PostgresClusterLink } from "./cluster-link.js";
import type { Client, PostgresDatabase } from "./database.js";
import type { QueueContext } from "./queue-context.js";
import * as sql from "./statements/index.js";
import { lockStreamShared } from "./stream-append.js";

interface ExchangeRow {
  exchange_id: number;
  name: string;
  type: ExchangeType;
  alternate: string | null;
  created_at: number;
  bindings: { kind: BindingDestination["kind"]; name: string; pattern: string }[];
}

function toExchangeRecord(row: ExchangeRow): ExchangeRecord {
  return {
    name: row.name,
    type: row.type,
    alternate: row.alternate,
    createdAt: row.created_at,
    bindings: row.bindings.map((binding) => ({
      destination: { kind: binding.kind, name: binding.name },
      pattern: binding.pattern,
    })),
  };
}

export class PostgresExchangeStore implements ExchangeStore {
  private readonly db: PostgresDatabase;
  private readonly link: PostgresClusterLink;

  /** `queues`: a binding to a queue locks the queue's row, as the queue files do. */
  constructor(private readonly queues: QueueContext) {
    this.db = queues.db;
    this.link = queues.link;
  }

  private async exchangeRow(client: Client, name: string): Promise<ExchangeRow | undefined> {
    return (await client.query<ExchangeRow>(sql.exchangeSelectByName, [name])).rows[0];
  }

  private async lockExchangeShared(client: Client, name: string): Promise<number> {
    const row = (await client.query<{ exchange_id: number }>(sql.exchangeLockShared, [name])).rows[0];
    if (!row) throw exchangeNotFound(name);
    return row.exchange_id;
  }

  exchangeUpsert(params: {
    name: string;
    type: ExchangeType;
    alternate: string | null;
    now: number;
  }): Promise<{ created: boolean; exchange: ExchangeRecord }> {
    return this.db.transaction(async (client) => {
      let existing = (
        await client.query<{ exchange_id: number; type: ExchangeType }>(sql.exchangeLockExclusive, [
          params.name,
        ])
      ).rows[0];
      let created = false;
      if (!existing) {
        const inserted = await client.query(sql.exchangeInsert, [
          params.name,
          params.type,
          params.alternate,
          params.now,
        ]);
        created = inserted.rows.length > 0;
        // A concurrent create won the name: this call becomes an update of that exchange.
        if (!created) existing = (await client.query(sql.exchangeLockExclusive, [params.name])).rows[0];
      }
      if (existing) {
        if (existing.type !== params.type) {
          throw exchangeTypeMismatch(params.name, existing.type);
        }
        await client.query(sql.exchangeUpdateAlternate, [existing.exchange_id, params.alternate]);
      }
      await this.link.announce(client, { kind: "exchange", exchange: params.name });
      const row = await this.exchangeRow(client, params.name);
      invariant(row, "an upserted exchange exists in its own transaction");
      return { created, exchange: toExchangeRecord(row) };
    });
  }

  async exchangeGet(params: { name: string }): Promise<ExchangeRecord | undefined> {
    const row = (await this.db.statement<ExchangeRow>(sql.exchangeSelectByName, [params.name])).rows[0];
    return row && toExchangeRecord(row);
  }

  async exchangeList(): Promise<ExchangeRecord[]> {
    const { rows } = await this.db.statement<ExchangeRow>(sql.exchangeSelectAll, []);
    return rows.map(toExchangeRecord);
  }

  exchangeDelete(params: { name: string }): Promise<void> {
    return this.db.transaction(async (client) => {
      const exchange = (await client.query<{ exchange_id: number }>(sql.exchangeLockExclusive, [params.name]))
        .rows[0];
      if (!exchange) {
        throw exchangeNotFound(params.name);
      }
      const sources = (
        await client.query<{ name: string }>(sql.queueSelectDeadLetterExchangeSources, [params.name])
      ).rows.map((row) => row.name);
      if (sources.length > 0) {
        throw exchangeInUse(params.name, sources);
      }
      await client.query(sql.exchangeDelete, [exchange.exchange_id]);
      await client.query(sql.bindingDeleteByDestination, ["exchange", params.name]);
      await this.link.announce(client, { kind: "exchange", exchange: params.name });
    });
  }

  bindingUpsert(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    created: boolean;
  }> {
    return this.db.transaction(async (client) => {
      const exchangeId = await this.lockExchangeShared(client, params.exchange);
      if (params.destination.kind === "queue")
        await this.queues.lockQueueShared(client, params.destination.name);
      else if (params.destination.kind === "stream") await lockStreamShared(client, params.destination.name);
      else await this.lockExchangeShared(client, params.destination.name);
      const { rowCount } = await client.query(sql.bindingInsert, [
        exchangeId,
        params.destination.kind,
        params.destination.name,
        params.pattern,
      ]);
      await this.link.announce(client, { kind: "exchange", exchange: params.exchange });
      return { created: (rowCount ?? 0) > 0 };
    });
  }

  bindingDelete(params: { exchange: string; destination: BindingDestination; pattern: string }): Promise<{
    deleted: boolean;
  }> {
    return this.db.transaction(async (client) => {
      const exchangeId = await this.lockExchangeShared(client, params.exchange);
      const { rowCount } = await client.query(sql.bindingDelete, [
        exchangeId,
        params.destination.kind,
        params.destination.name,
        params.pattern,
      ]);
      await this.link.announce(client, { kind: "exchange", exchange: params.exchange });
      return { deleted: (rowCount ?? 0) > 0 };
    });
  }
}
