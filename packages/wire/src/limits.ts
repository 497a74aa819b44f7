/**
 * The limits a client meets on the wire: the bounds the request schemas enforce and that the server's
 * broker checks again. They live here, with the schemas, so that the server (which spreads them into
 * its own `limits`) and the client read the same numbers. Units come last in each name. This module
 * imports nothing, so a browser client can read it without pulling in TypeBox.
 */

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;
const nameLengthMax = 128;

export const wireLimits = {
  /** Names of queues and other entities: short enough for an index key, safe in a URL path. "." and
   * ".." are refused because URLs treat them as relative path segments, even when encoded. */
  namePattern: `^(?!\\.\\.?$)[A-Za-z0-9_.:-]{1,${nameLengthMax}}$`,
  nameLengthMax,

  /** The server-wide ceiling for one message body; a queue's maxMessageBytes may only lower it. */
  messageBytesMax: 1024 * 1024,
  /** Items per send/ack/nack/extend batch, as SQS's 10 but larger: a batch is one transaction. */
  batchSizeMax: 100,
  /** Messages per receive, as SQS's 10 but larger; bounded so one answer stays small. */
  receiveMax: 100,
  /** The most unacked deliveries one push consumer may hold (the WebSocket consume's prefetch): as
   * the client worker's concurrency ceiling, so a worker's prefetch is never refused for size. */
  prefetchMax: 1000,
  /** Messages per peek: an operator's look, not a bulk export. */
  peekMax: 1000,

  /** Headers per message: metadata, not a second body; 64 leave room for tracing and routing. */
  headersCountMax: 64,
  /** A header's name, as long as an entity's name. */
  headerNameLengthMax: 128,
  /** A header's value: a trace context or a token fits; anything larger belongs in the body. */
  headerValueLengthMax: 4096,
  /** A message's key (a FIFO queue's group): an index key, as long as a name. */
  keyLengthMax: 128,
  /** Routing keys and binding patterns: AMQP's short-string limit, so AMQP clients fit. */
  routingKeyLengthMax: 255,
  /** A dedupId: as SQS's deduplication id, 128 characters; it is remembered for the dedup window. */
  dedupIdLengthMax: 128,
  /** A message's content type: a media type with its parameters fits. */
  contentTypeLengthMax: 128,

  /** Long-poll wait: as SQS, so clients and proxies tuned for it keep working. */
  waitMsMax: 20 * second,
  /** Lease length: as SQS's 12 hours; a longer hold should use a heartbeat (extend). */
  visibilityTimeoutMsMax: 12 * hour,
  /** A queue's retention: at least a minute, as SQS's; at most a year, as a queue is not an archive. */
  retentionMsMin: 60 * second,
  retentionMsMax: 365 * day,
  /** Delivery attempts before dead-lettering: SQS allows up to 1000. */
  maxDeliveriesMax: 1000,
  /** A nack's delay, and the retry policy's ceiling. */
  retryDelayMsMax: 12 * hour,
  /** The reason a dead-lettering nack gives (its x-dead-letter-reason header): a label to count and
   * filter dead letters by, as long as a name; the details of a failure belong in the body or a log. */
  deadLetterReasonLengthMax: 128,

  /** A queue's maxDepth: a bound that the depth counter, not a scan, enforces. */
  maxDepthMax: 1_000_000_000,
  /** How long a dedupId may be remembered: SQS keeps 5 minutes; a day covers retries across outages. */
  dedupWindowMsMax: 24 * hour,
  /** A redrive's rate, in messages per second: beyond it, leave the rate out (as fast as it goes). */
  redriveRateMax: 100_000,

  /** A receipt's characters: the server's receipts take at most 22 (model/receipts.ts), and the
   * schema reads up to 64, so a store may issue longer ones without a change to the wire, while a
   * long string is refused before the broker reads it. */
  receiptLengthMax: 64,
  /** A redrive task's id, as a path parameter: the server's ids are short; the bound refuses junk. */
  taskIdLengthMax: 64,
  /** A retry policy's multiplier: beyond 10 the delays reach retryDelayMsMax within a few attempts,
   * so a larger one would mean nothing more. */
  retryMultiplierMax: 10,
  /** A message's priority, 0 to this: ten levels, as the log store keeps one index per level. */
  priorityMax: 9,

  /** Recipients of one inbox append, written in one transaction: a message to a group of 5,000
   * members (a large chat room) goes in one call; larger fan-outs are split by the caller, so no
   * append holds a commit for long (about 5,000 index rows). */
  inboxRecipientsMax: 5_000,
  /** Entries one inbox read answers at most: a page of a reconnecting device's backlog, small enough
   * to answer in one response while a long backlog is read page after page. */
  inboxReadLimitMax: 1_000,
  /** An inbox message's id (the application's, e.g. its chat message id): the key appends are
   * deduplicated on, as long as a dedupId. */
  inboxMessageIdLengthMax: 128,
} as const;
