/**
 * What a workload needs from the system under test, so that the same W1/W2/W3 code drives Hopper (over
 * HTTP, one or more server processes), the PostgreSQL peers (libraries inside this process) and the
 * other brokers (RabbitMQ, NATS JetStream, Redis Streams, BullMQ): a way to make an empty queue, and
 * connections that publish, receive and ack.
 */
import type { BenchBody } from "./bench-message.js";
import type { Wakeup } from "./progress.js";

/** One message as a consumer got it. */
export interface Delivery {
  body: BenchBody;
  /** 1 on the first delivery; above 1 means a lease ended before the ack and it came again.
   * Undefined where the target would have to fetch more columns to say (pg-boss). */
  deliveryCount: number | undefined;
  /** What the ack names: Hopper's receipt, the peer's row or job id. */
  receipt: string;
  /** The message's key (a FIFO queue's group), as the target answered it; undefined where the target
   * has no keys (the peers). */
  key?: string | null | undefined;
}

/** One message of a keyed send: the body and its key (a FIFO queue's group). */
export interface KeyedMessage {
  body: BenchBody;
  key: string;
}

/**
 * Sends to one queue, one request per call, so that the caller knows which messages travelled
 * together: the server stores one request's messages in one transaction, in their order.
 */
export interface KeyedSender {
  /** Resolves once every message of the request is durable; rejects on any item error or duplicate. */
  send(messages: readonly KeyedMessage[]): Promise<void>;
}

/**
 * One producer's or consumer's link to a queue. Calls made in the same event-loop turn may share one
 * request or statement (up to 100), as Hopper's client does with `publish` and `ackLater`.
 */
export interface QueueConnection {
  /** Resolves once the message is durable (committed with fsync). */
  publish(body: BenchBody): Promise<void>;
  /**
   * Answers up to `max` messages, each now leased to this consumer. With none available it waits
   * (long poll, or polling for a peer that has none) up to the bench's receive wait, then answers [].
   */
  receive(max: number, signal: AbortSignal): Promise<Delivery[]>;
  /** Acks one delivery; true once the ack is durable, false if it was refused (the lease had ended). */
  ackLater(receipt: string): Promise<boolean>;
}

/**
 * How a workload's producer means to publish: "batched" (W1, W3: the publishes of one turn may share a
 * request) or "single" (W2: one message at a time). Only the plain Hopper client heeds it, sending one
 * message per request for "single"; Hopper's own client and the peers batch as they always do.
 */
export type PublishShape = "batched" | "single";

/** Called for each delivery as it arrives, with the time it arrived (performance.now()). */
export type OnMessage = (message: Delivery, receivedAtMs: number) => void;

/**
 * One consumer as a workload sees it, whether it pulls (long-polled receive, acks through `ackLater`,
 * credit-consumer.ts) or has messages pushed to it (Hopper's WebSocket consumer). Either holds at most
 * its credit of unacked messages.
 */
export interface BenchConsumer {
  /** Deliveries so far. */
  readonly received: number;
  /** Acks the target confirmed so far. A push consumer learns it only in `settled()`. */
  readonly acked: number;
  /** Acks the target refused (stale_receipt: the lease had ended). */
  readonly ackErrors: number;
  /** When the last ack was confirmed (performance.now()); known once `settled()` has resolved. */
  readonly lastAckAtMs: number;
  /** Notified after deliveries and acks, for workloads that wait for the end. */
  readonly activity: Wakeup;
  /** Rejects as soon as receiving or acking fails. */
  readonly failed: Promise<never>;
  /** Resolves once the consumer can get messages (a push consumer's socket is consuming). */
  ready(): Promise<void>;
  /** Resolves once every delivery so far is acked or refused, and sets `lastAckAtMs`. */
  settled(): Promise<void>;
  /** Stops consuming; what is still leased goes back to the queue. Rethrows a failure. */
  stop(): Promise<void>;
}

export type TargetKind =
  | "hopper"
  | "skiplocked"
  | "pgboss"
  | "rabbitmq"
  | "nats"
  | "redis-streams"
  | "bullmq";

export interface QueueTarget {
  /** A short label for tables: "Hopper PostgreSQL, 3 nodes", "plain SKIP LOCKED". */
  readonly label: string;
  readonly kind: TargetKind;
  /** The server's version as it reports it, and the client library's: "RabbitMQ 3.10.8 · amqplib 2.3.1". */
  readonly versions: string;
  /** What a publish confirm and an ack mean for this target, by its own definition, for the report. */
  readonly semantics: string;
  /** True when the target answers a publish only after the message was flushed to disk (fsync). */
  readonly confirmsAfterFsync: boolean;
  /** Most messages a pull consumer asks for in one receive; 100 (Hopper's server limit) if not given. */
  readonly receiveMessagesMax?: number;
  /** Broker processes other than this one (Hopper's server nodes); their CPU counts as the broker's. */
  readonly brokerPids: readonly number[];
  /** The application_name of the target's PostgreSQL sessions, or undefined for SQLite. */
  readonly postgresAppName: string | undefined;
  /** Makes `queue` exist and be empty. */
  createQueue(queue: string): Promise<void>;
  /**
   * A connection to `queue` for producer or consumer number `index` of a workload. Hopper spreads them
   * round-robin over its nodes (index modulo nodes); the peers have one pool in this process.
   */
  connect(queue: string, index: number, shape?: PublishShape): QueueConnection;
  /**
   * A consumer of `queue` that the broker pushes to, with a prefetch of `credit`, for consumer number
   * `index`: Hopper's WebSocket consumer (spread over nodes as `connect` does), or a peer's own
   * subscription (RabbitMQ basic.consume, a NATS JetStream consume(), a BullMQ Worker). A target that
   * has it and no pull consumer (every peer but the PostgreSQL ones and Redis Streams) is always
   * consumed this way.
   */
  consumePush?(queue: string, index: number, credit: number, onMessage: OnMessage): BenchConsumer;
  /**
   * Hopper only: makes a fanout exchange bound to `queues` (each made fresh) and answers a publisher
   * whose `publish` goes through the exchange; it resolves once the message is durable in every queue.
   */
  createFanout?(exchange: string, queues: readonly string[]): Promise<Pick<QueueConnection, "publish">>;
  /**
   * Hopper only: makes `queue` fresh, of the given kind, and answers a sender of keyed messages on
   * connection 0 (the producer's node). Consumers reach it through `connect` as for any queue.
   */
  createKeyedQueue?(queue: string, kind: "standard" | "fifo"): Promise<KeyedSender>;
  /** Counters the target keeps about its own traffic (Hopper: HTTP requests by kind), by name. */
  counters(): Record<string, number>;
  /**
   * Hopper on SQLite: the store's group-commit counters summed over the servers (`/metrics`):
   * commits, and store calls (jobs) committed. Undefined where the server does not export them.
   */
  storeCounters?(): Promise<{ commits: number; jobs: number } | undefined>;
  /** Stops processes and drops what the target created; safe to call twice. */
  close(): Promise<void>;
}
