/**
 * Resolves where a message published to an exchange goes: the set of queues its routing key reaches
 * through the exchange's bindings, following bindings to other exchanges, and the alternate exchange
 * when nothing matched. The exchanges and bindings are cached whole and reloaded after any change
 * (here, or on another node, as the store reports).
 */
import type { ExchangeRecord } from "../model/exchange.js";
import type { Store } from "../store/store.js";
import { bindingMatches } from "./routing.js";

export class Router {
  private graph: Promise<Map<string, ExchangeRecord>> | undefined;

  constructor(private readonly store: Store) {
    store.watch((event) => {
      if (event.kind === "exchange" || event.kind === "queue" || event.kind === "resync") this.invalidate();
      // A deleted stream took the bindings to it.
      if (event.kind === "stream" && event.partitions === null) this.invalidate();
    });
  }

  /** Drops the cache; the next route reloads it. Called after every change to exchanges or bindings. */
  invalidate(): void {
    this.graph = undefined;
  }

  async exchange(name: string): Promise<ExchangeRecord | undefined> {
    return (await this.load()).get(name);
  }

  /** The queues that a message with `routingKey` reaches from `exchange` (destinations' queues). */
  async route(exchange: string, routingKey: string): Promise<string[]> {
    return (await this.destinations(exchange, routingKey)).queues;
  }

  /**
   * The queues and streams that a message with `routingKey` reaches from `exchange`, each once however
   * many bindings lead to it. An exchange that reaches no queue or stream hands the message to its
   * alternate. Each exchange is visited at most once, so cycles of exchange-to-exchange bindings end.
   */
  async destinations(exchange: string, routingKey: string): Promise<{ queues: string[]; streams: string[] }> {
    const graph = await this.load();
    const queues = new Set<string>();
    const streams = new Set<string>();
    const visited = new Set<string>();
    // Returns how many queue and stream bindings the visit reached, so an exchange knows whether it
    // routed at all.
    const visit = (name: string): number => {
      const record = graph.get(name);
      if (!record || visited.has(name)) return 0;
      visited.add(name);
      let reached = 0;
      for (const binding of record.bindings) {
        if (!bindingMatches(record.type, binding.pattern, routingKey)) continue;
        if (binding.destination.kind === "queue") {
          queues.add(binding.destination.name);
          reached++;
        } else if (binding.destination.kind === "stream") {
          streams.add(binding.destination.name);
          reached++;
        } else {
          reached += visit(binding.destination.name);
        }
      }
      if (reached === 0 && record.alternate !== null) reached += visit(record.alternate);
      return reached;
    };
    visit(exchange);
    return { queues: [...queues], streams: [...streams] };
  }

  private load(): Promise<Map<string, ExchangeRecord>> {
    this.graph ??= this.store.exchangeList().then(
      (exchanges) => new Map(exchanges.map((exchange) => [exchange.name, exchange])),
      (error: unknown) => {
        this.graph = undefined;
        throw error;
      },
    );
    return this.graph;
  }
}
