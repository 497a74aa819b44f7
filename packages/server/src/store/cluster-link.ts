/**
 * What a store tells the broker about the other nodes that share it, and carries between them: change
 * events, the housekeeping leader, ephemeral signals. A store that one process uses alone implements
 * it trivially (no events, always the leader, nothing to tell).
 */
import type { StoreEvent } from "./store.js";

export interface ClusterLink {
  /**
   * Calls `listener` for changes committed by other broker nodes, so that their long polls wake and
   * cached queue attributes are dropped. A store that only one process uses never calls it.
   */
  watch(listener: (event: StoreEvent) => void): void;

  /**
   * Whether this node leads housekeeping (retention, dead-letter sweeps) now. Correctness never
   * depends on it: leases end by time alone, and the work is idempotent. With one node, always true.
   */
  housekeepingLeader(): Promise<boolean>;

  /**
   * Hands an ephemeral signal to the other nodes sharing the store, which deliver it to their live
   * subscribers (`watch` reports it there as a `signal` event). Nothing is stored. A store that only
   * one process uses has no one to tell.
   */
  signalBroadcast(params: { channel: string; dataJson: string }): Promise<void>;
}
