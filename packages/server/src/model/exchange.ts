/** An exchange and its bindings as the domain knows them. */

export type ExchangeType = "fanout" | "direct" | "topic";

export interface BindingDestination {
  kind: "queue" | "exchange" | "stream";
  name: string;
}

export interface BindingRecord {
  destination: BindingDestination;
  pattern: string;
}

export interface ExchangeRecord {
  name: string;
  type: ExchangeType;
  /** Where messages that match no binding go, or null. */
  alternate: string | null;
  createdAt: number;
  bindings: BindingRecord[];
}
