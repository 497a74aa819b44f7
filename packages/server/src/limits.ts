/**
 * Every limit of the server, in one place, with its unit last and the reason for its value. The limits
 * a client meets on the wire come from @hopper/wire, where the request schemas read them too, so the
 * edge and the core enforce the same numbers; the rest are the server's own.
 */
import { wireLimits } from "@hopper/wire/limits";

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;
const day = 24 * hour;
const requestBytesMax = 10 * 1024 * 1024;

export const limits = {
  ...wireLimits,
  /** One HTTP request body: a full batch of maximal messages would be 100 MiB, so batches are capped
   * in bytes too. 10 MiB keeps one request from holding a commit (and the event loop) for long. */
  requestBytesMax,
  /** How much of an oversized body is read and discarded before the connection is cut: a client
   * still uploading gets the 413 rather than a reset, up to four times the bound, past which it is
   * cut. */
  oversizedBodyLingerBytesMax: 4 * requestBytesMax,
  /** How long an idle HTTP connection is kept open. Long polls hold a request up to waitMsMax (20 s);
   * between requests the socket may stay longer, and clients close theirs sooner (the client's
   * freeSocketIdleMs), so a request never leaves on a connection the server is closing. */
  keepAliveMs: 65 * second,
  /** Messages a peek answers when it does not say: an operator's first look. */
  peekLimitDefault: 10,
  /** Open WebSocket connections per server: each holds a socket, a ping timer and its subscriptions or
   * consumers (about 50 KiB with ws's buffers), so 10,000 is about 500 MiB at worst, and well under the
   * default file-descriptor limits of a tuned host. Devices (browsers, phones) connect directly, so
   * this is the figure to raise, with the process's file limit, for a large chat deployment. */
  wsConnectionsMax: 10_000,
  /** One client WebSocket frame: an ack of 100 receipts is about 7 KiB and a signal at most 7 KiB of
   * data, so 256 KiB leaves room, and a larger frame closes the socket before it is buffered. */
  wsFrameBytesMax: 256 * 1024,
  /** Consumers on one WebSocket connection: a process consumes a few queues, not hundreds. */
  wsConsumersPerConnectionMax: 64,
  /** Frames of one WebSocket connection being worked on at once; past it the socket is not read until
   * some finish (and it is read again below half), so one client cannot queue unbounded work. */
  wsOperationsInFlightMax: 64,
  /** Bytes of frames one WebSocket connection may hand the broker in one turn of the event loop; past
   * it the socket is not read again until the next turn. libuv reads a busy socket up to 32 times
   * 64 KiB in a row, so a publisher with a deep window could hold the event loop for tens of
   * milliseconds while the acks of other connections wait (docs/websocket.md, "Fairness"). */
  wsReadBytesPerTurnMax: 256 * 1024,
  /** A ping every 30 s keeps idle WebSocket connections open through proxies and finds dead peers
   * within 60 s. */
  wsPingIntervalMs: 30 * second,
  /** A WebSocket frame's `ref`, echoed in the answer so a client can match it to its frame: short,
   * as it is only a tag. */
  wsRefLengthMax: 128,
  /** A WebSocket frame's `sub`: the subscription ids the server hands out are decimal counters, and 20
   * digits hold any 64-bit number. */
  wsSubLengthMax: 20,
  /** At shutdown, WebSocket clients get this long to finish the close handshake before they are cut. */
  wsCloseGraceMs: 1 * second,
  /** How long a push consumer may hold a delivery unacked: RabbitMQ's consumer_timeout default, long
   * enough for slow jobs, short enough that a stuck one ends. */
  consumerAckTimeoutMs: 30 * minute,
  /** The lease of a push delivery, renewed by the server while the consumer's connection lives. Short,
   * so that leases held through a server that crashed come back within it, not after the ack timeout. */
  pushLeaseMs: 30 * second,
  /** In-flight messages per queue, as SQS's 120,000: a receive beyond it returns nothing. */
  inFlightMax: 120_000,
  /** What a refused publish's Retry-After says while a queue is over its pushback limit. */
  pushbackRetryAfterMs: 1000,
  /** Redrive tasks kept per server, running or finished (finished ones are forgotten first). */
  tasksMax: 1000,
  /** How long a finished task can still be read. */
  taskKeepMs: 1 * hour,
  /** Messages one send removes by overflow (drop-oldest, dead-letter-oldest): a maxDepth lowered far
   * below the depth is reached over several sends, so no send holds its transaction for long. */
  overflowTrimMax: 1000,
  /** Passes one lease call makes over its candidates: each leases or dead-letters what it reads, so a
   * queue full of exhausted messages does not hold one call for long. */
  leasePassesMax: 10,
  /** Messages per redrive step: one transaction. */
  redriveBatchMax: 100,
  /** Messages one step of a purge deletes on SQLite, in a commit of its own (about 27 ms of the event
   * loop): a purge of a million messages does not stop the server for the 5 s one commit took. */
  purgeStepMax: 5000,
  /** Messages' worth of calls one SQLite group commit takes (a send's messages, a lease's maximum, an
   * ack's receipts; other calls count 1; a call always goes whole). A burst beyond it is split, so the
   * first part's confirms leave while the rest commits and the producers refill their windows
   * meanwhile (docs/architecture.md, "Group commit"). */
  commitMessagesMax: 600,
  /** Inbox entries that weigh one message in commitMessagesMax: an entry is one small row in one B-tree
   * (the append's body is stored once), and costs the SQLite server about half of what an enqueued
   * message does (11–14 against about 20 µs of CPU, `bench inbox` fan-out and `bench compare` W3). */
  inboxEntriesPerMessageWeight: 2,
  /** How long a SQLite connection (the store's, and its checkpoint thread's) waits for the other's
   * lock before it fails: the checkpoint thread holds it for a PASSIVE checkpoint at most, which takes
   * milliseconds, so 5 s is never reached unless something is wrong. */
  sqliteBusyTimeoutMs: 5 * second,
  /** How often the SQLite store's checkpoint thread copies the WAL into the database file. */
  checkpointIntervalMs: 50,
  /** WAL pages (4 KiB) past which the SQLite store's own connection checkpoints, inside a commit. The
   * checkpoint thread has copied nearly all of them by then; under steady writes this is where the
   * WAL restarts (docs/architecture.md). */
  walBackstopPages: 10_000,
  /** Problems the SQLite store's check at start (PRAGMA quick_check) reports at most: enough to say
   * what is damaged and where, short enough to read in one error message. */
  integrityProblemsShownMax: 5,
  /** The message bytes the log store holds in memory at most (bodies, plus logMessageOverheadBytes a
   * message): a send beyond it is refused with store_full (docs/log-store.md). */
  logStoreBytesMax: 1024 * 1024 * 1024,
  /** The log store's segment files roll past this size (docs/log-store.md). */
  logSegmentBytesMax: 64 * 1024 * 1024,
  /** The log store compacts only once its log holds at least this many bytes... */
  logCompactBytesMin: 64 * 1024 * 1024,
  /** ...and this many times what a snapshot of its state would write, so that a compaction (which
   * writes the live state) costs at most a quarter of what was appended since the last one. */
  logCompactRatio: 4,
  /** What a message holds in the log store besides its body, about: its fields in memory and its
   * insert record's head. Counted against logStoreBytesMax, so that tiny messages are bounded too. */
  logMessageOverheadBytes: 256,
  /** What a remembered dedupId holds in the log store besides its two strings, about. */
  logDedupEntryOverheadBytes: 96,
  /** Heads a FIFO group's array drops before it is compacted, at least: compaction copies the array,
   * so it waits until half of it is dropped heads, and never for fewer than this. */
  logGroupCompactMin: 1024,
  /** A snapshot is cut into records of about this size: large enough to frame cheaply, small enough
   * that no one record (whose bound is log-format.ts's recordBytesMax) comes near the bound. */
  logSnapshotRecordBytes: 1024 * 1024,
  /** A rewrite writes its snapshot in pieces of this size, so its memory stays bounded by it. */
  logSnapshotPieceBytes: 4 * 1024 * 1024,
  /** append() copies records into chunks of this size: one allocation per MiB of records, and a
   * flush gathers few buffers into its writev. */
  logEncoderChunkBytes: 1024 * 1024,
  /** Recovery and verification read segments in chunks of this size (a larger frame is read whole). */
  logReadChunkBytes: 1024 * 1024,
  /** A salvage flushes records into the new log in batches of about this many bytes. */
  logSalvageFlushBytes: 4 * 1024 * 1024,
  /** Messages, or receipts, that the calls waiting in a PostgreSQL queue's line put into one
   * statement (sends and acks alike): a long line is answered in a few statements, not one huge one. */
  postgresLineBatchMax: 1_000,
  /** Body bytes that the sends waiting in a PostgreSQL queue's line put into one statement: its
   * bodies go as one bytea parameter (statements/fragments.ts bodyOf), and PostgreSQL takes at most
   * 1 GB in a field, where a thousand bodies of 1 MiB would pass it. One send (a request, at most
   * requestBytesMax) always fits. */
  postgresLineBatchBodyBytesMax: 64 * 1024 * 1024,
  /** A PostgreSQL transaction aborted by a deadlock or serialization failure is tried this many
   * times in all: such aborts pass once the other transaction ends, so a few tries suffice. */
  postgresTransactionAttemptsMax: 3,
  /** Connections for transactions per node when not told: enough for the statement lines and
   * housekeeping to overlap, well under PostgreSQL's default max_connections of 100 for a cluster. */
  postgresPoolSizeDefault: 10,
  /** FIFO groups one PostgreSQL housekeeping step (expiry, the exhausted sweep) locks: each advisory
   * lock takes a slot of PostgreSQL's shared lock table (max_locks_per_transaction × connections,
   * 6,400 by default), so a step over many groups handles some and leaves the rest to the next. */
  postgresGroupLocksMax: 1000,

  /** Queues per server: each is rows, counters and a wake-up topic, and the listing and every
   * /metrics scrape read them all (listQueuesPerTurn). */
  queuesMax: 10_000,
  /** Inbox namespaces per server: a namespace is an application's kind of recipient (chat, alerts),
   * so a few; the bound keeps a runaway client from making one per user. */
  inboxesMax: 1_000,
  /** Devices per recipient with a cursor: phones, browsers and desktops of one person, with room for
   * reinstalls until forgetDeviceAfterMs forgets the old ones. Each cursor is read at every ack. */
  inboxDevicesPerRecipientMax: 100,
  /** Queues the listing (GET /v1/queues, each /metrics scrape) reads per turn of the event loop, one
   * statement each, so that listing 10,000 queues lets other requests run every few milliseconds. */
  listQueuesPerTurn: 500,
  /** Waits per server (long polls, and push consumers' own): each holds a timer, and most a socket. */
  waitersMax: 10_000,
  /** Waits on one topic (broker/wake.ts; a queue's long polls): an append wakes every waiter of its
   * topic to look again, so this bounds the looks that one append sets off. */
  waitersPerTopicMax: 1_000,
  /** Topic heads that broker/wake.ts remembers, of the topics advanced last, about 100 bytes each:
   * ten times queuesMax, so that queues never reach it. An older head folds into one floor,
   * which costs at worst one needless look of a waiter on that topic, never a lost wake-up. */
  wakeTopicHeadsMax: 100_000,

  /** Messages one housekeeping step expires, and dead-letters after their last delivery, in one
   * commit: bounds on one pass, so one queue's backlog never holds a commit for long; a queue with
   * more is stepped again at once. */
  housekeepingExpireBatchMax: 10_000,
  housekeepingDeadLetterBatchMax: 1_000,
  /** How soon housekeeping looks at a queue again after a step failed (the store was unreachable). */
  housekeepingRetryMs: 1 * second,
  /** How often a node that does not lead housekeeping tries to take the lead: a leader that died is
   * replaced within this, and a follower's try costs one statement. */
  leadershipCheckIntervalMs: 5 * second,
  /** How soon the housekeeping leader looks at a queue after another node wrote messages to it. */
  leaderCatchUpMs: 1 * second,
  /** Waits between a PostgreSQL listener's reconnections, doubling from the first to the last, so a
   * database restart is not hammered and a recovered one is found within 5 s. */
  postgresReconnectDelayMsMin: 100,
  postgresReconnectDelayMsMax: 5 * second,
  /** Every node says `present` this often (unless told); another node counts it as listening for
   * postgresPresenceIntervalsPerTimeout intervals. */
  postgresPresenceIntervalMsDefault: 2 * second,
  /** Three intervals: a node whose heartbeats are late by less than two intervals is not forgotten. */
  postgresPresenceIntervalsPerTimeout: 3,
  /** How long a shutdown waits for open requests before it closes their connections: long enough for
   * a request under way to finish, short enough that a stop is prompt (long polls end at once). */
  shutdownGraceMs: 2 * second,
  /** A push consumer's long poll that came back empty early (the broker is stopping) is followed by
   * this pause, not a spin. */
  pushEmptyReceivePauseMs: 1 * second,
  /** Pauses after a push consumer's failed receives: 250 ms doubling to 30 s, so a store outage is
   * not hammered, and a recovered store is noticed within 30 s. */
  pushReceiveBackoffMsMin: 250,
  pushReceiveBackoffMsMax: 30 * second,
  /** How soon a redrive looks again when everything left waits behind a message in flight: soon
   * enough to follow the acks, rare enough to cost nothing. */
  redriveHeldRetryMs: 1 * second,
  /** How many steps a second a rate-limited redrive takes, about: its rate is split into this many
   * steps, so a slow rate still moves messages in small, even batches. */
  redriveStepsPerSecond: 10,
  /** Messages a redrive step looks at to find its `max`: bounded work per step, even when most of
   * what it reads is held back behind messages in flight. */
  redriveScanMax: 1000,
  /** The JSON text of one signal's data: typing and presence are tiny, and with its envelope 7 KiB
   * fits in one PostgreSQL NOTIFY (at most 8,000 bytes), which carries signals between nodes. */
  signalDataBytesMax: 7 * 1024,
  /** Signal subscriptions one connection may hold: a chat client watches a few rooms, not thousands. */
  signalSubscriptionsPerConnectionMax: 100,
  /** Signal subscriptions across the server: each is a map entry and a send per publish. */
  signalSubscriptionsMax: 100_000,
  /** Characters of a refused name that its error repeats: enough to recognize it, while an error
   * stays short whatever was sent. */
  refusedNameEchoLengthMax: 200,
  /** Schema violations one error lists: the first few say what is wrong; a body wrong everywhere
   * does not make an answer as large as itself. */
  schemaViolationsListedMax: 10,
  /** Random bytes fetched from the OS at a time (random.ts): one system call per ~680 draws instead
   * of one per draw, which showed as 8 % of the server's time when every id and token asked alone. */
  randomPoolBytes: 4096,
  /** Timers one advance() of a test's FakeClock fires at most: more falling due is a bug (a spin),
   * reported as such rather than hanging the test. */
  fakeClockTimersPerAdvanceMax: 10_000,

  /** The CLI's `hopper send --lines` batches up to half of requestBytesMax: a batch's size is
   * estimated from its messages alone, and the request adds framing around them. */
  cliSendBatchBytesMax: requestBytesMax / 2,
  /** How often the CLI reads a redrive task it follows: often enough for a smooth bar, rarely enough
   * to cost the server nothing. */
  cliTaskPollMs: 200,
  /** Without a terminal, the CLI prints one progress line a second: enough for a log, not a flood. */
  cliProgressLineIntervalMs: 1 * second,
  /** The CLI measures a redrive's rate over the last few seconds, so its ETA follows a change of pace. */
  cliRateWindowMs: 5 * second,
  /** Dead letters `hopper dlq peek` shows when not told: a screenful, enough to see the pattern of
   * what failed, few enough to read. */
  cliPeekLimitDefault: 20,
  /** A body preview in the CLI's tables is cut past this, so one message stays one line. */
  cliBodyPreviewCharsMax: 40,

  /** Entries one inbox read answers when it does not say. */
  inboxReadLimitDefault: 100,
  /** How often the housekeeping leader sweeps each namespace: retention is a bound on storage, not a
   * deadline, so a minute late is fine, and one pass a minute costs nothing when nothing is due. */
  inboxSweepIntervalMs: 1 * minute,
  /** Entries and devices one inboxSweep call removes, one transaction: a backlog is swept over
   * several calls, so no commit is held for long. */
  inboxSweepBatchMax: 5_000,
  /** inboxSweep calls per namespace per pass; what is left waits for the next pass, so one namespace's
   * backlog never starves the others. */
  inboxSweepCallsPerPassMax: 20,
  /** Entries one store read of an inbox subscription takes (broker/inbox-subscription.ts): what a
   * subscription holds in memory at most. 100 chat entries are about 100 KiB; a backlog of 100,000 is
   * 1,000 reads, each a short transaction. */
  inboxReplayBatchMax: 100,
  /** Bytes of bodies in one inbox.entry frame at most, unless a single entry is larger: small enough
   * that a pause lands within one frame of wsSendBufferBytesHigh, large enough that a frame carries
   * many chat entries. */
  inboxDeliveryBytesMax: 64 * 1024,
  /** How long a live inbox subscription waits for a wake-up before it reads again anyway: appends
   * wake it at once; this bounds the wait (every wait is bounded) at one read per idle subscription
   * every 30 s. */
  inboxLiveWaitMs: 30 * second,
  /** Append times an inbox subscription keeps, for the ack lag: an ack names one of the last entries
   * delivered, so a thousand cover any client's acks; about 50 KiB per subscription at most. */
  inboxAckLagTimesKept: 1_000,
  /** Pauses after an inbox subscription's failed reads: 250 ms doubling to 30 s, so that a store
   * outage is not hammered, and a recovered store is noticed within 30 s. */
  inboxReadBackoffMsMin: 250,
  inboxReadBackoffMsMax: 30 * second,
  /** Inbox subscriptions on one WebSocket connection: a device holds one per namespace, a gateway
   * a few. */
  inboxSubscriptionsPerConnectionMax: 64,
  /** Past this many bytes waiting in a WebSocket's send buffer, deliveries (queue pushes, inbox
   * entries) pause and signals are dropped: a client that does not read must not make the server
   * hold its backlog in memory. 1 MiB is one maximal message. */
  wsSendBufferBytesHigh: 1024 * 1024,
  /** Paused deliveries resume once the send buffer has drained below this (a quarter of the high
   * mark), so that they do not flap at the mark. */
  wsSendBufferBytesLow: 256 * 1024,
  /** Replay sizes and ack lags are counted per namespace in histograms with these bucket bounds. */
  inboxReplayEntriesBuckets: [0, 1, 10, 100, 1_000, 10_000],
  inboxAckLagSecondsBuckets: [0.01, 0.1, 1, 10, 60, 600, 3_600],
  /** A JWT secret shorter than this is refused at start: HS256 with a short secret is guessable offline. */
  jwtSecretBytesMin: 32,
  /** Namespaces and channel patterns one device token may list; a token lists a few. */
  jwtClaimListMax: 100,
  /** A device token's length: a JWT with a few claims is well under 1 KiB; 8 KiB leaves room for long
   * key ids and claim lists. */
  deviceTokenLengthMax: 8 * 1024,
  /** How long each read of `hopper inbox tail` waits for an entry: the server's longest long poll. */
  cliInboxTailWaitMs: 20_000,
  /** How often `hopper stream tail` reads again when it found nothing new: a stream read has no long
   * poll, and a quarter of a second feels live at a terminal while costing one read a tick. */
  cliStreamTailPollMs: 250,
  /** Entries each read of `hopper inbox tail` asks for at most. */
  cliInboxTailPageMax: 100,
  /** What an inbox entry, device or remembered id holds in the log store's memory besides its strings,
   * about: counted against logStoreBytesMax. */
  logInboxItemOverheadBytes: 96,
  /** Inbox bodies that lie within this span of one segment are read back with one read: an inbox's
   * appends lie one after another, so a replay's batch is a few reads; the span bounds what one read
   * takes beyond the bodies asked for (the records' other changes between them). */
  logInboxSpanReadBytesMax: 1024 * 1024,
  /** An inbox NOTIFY names its recipients up to this payload size; PostgreSQL's limit is 8,000 bytes,
   * and the margin leaves room for the namespace's name and the JSON around it. */
  postgresInboxNotifyPayloadBytesMax: 7_900,

  /** Streams per server: each is rows per partition and a topic per partition, and the listing reads
   * them all; as many as inbox namespaces. */
  streamsMax: 1_000,
  /** Records one stream read answers when it does not say. */
  streamReadLimitDefault: 100,
  /** Bytes of bodies one stream read answers at most, unless its first record alone is larger: a
   * page of 1 KiB records is 1,000 of them, and a page stays one small response. */
  streamReadBytesMax: 1024 * 1024,
  /** Records and remembered dedupIds one streamSweep call removes, in one transaction: a backlog goes
   * over several calls, so no sweep holds a commit for long. */
  streamSweepBatchMax: 10_000,
  /** streamSweep calls per stream per pass; the rest waits for the next pass. */
  streamSweepCallsPerPassMax: 20,
  /** How often retention runs over every stream: records past retention are still readable until it
   * does, as Kafka's segments are deleted by a periodic check. */
  streamSweepIntervalMs: 1 * minute,
  /** Records one share group holds in flight (delivered, not yet acked): its state, which every share
   * call reads and writes whole, holds one lease each, so the bound keeps that state small; a receive
   * past it answers only redeliveries. */
  streamShareInFlightMax: 10_000,
  /** Records a share group's pending listing answers at most. */
  streamSharePendingMax: 1_000,
  /** What a stream, partition or remembered dedupId holds in the log store's memory besides its
   * strings, about: counted against logStoreBytesMax. */
  logStreamItemOverheadBytes: 96,
  /** What one index entry of the log store's streams holds in memory (a run of records appended by
   * one call, read back from the segment files), about, besides 4 bytes per record for its size. */
  logStreamChunkOverheadBytes: 120,
} as const;

/** A new stream's attributes (model/stream-attributes.ts validates what a client sends). */
export const streamDefaults = {
  /** A week, as Kafka's log.retention.hours default (168): long enough to replay after a bad deploy
   * found on Monday. */
  retentionMs: 7 * day,
  /** Off: age bounds a stream unless bytes or a count are asked for. */
  retentionBytes: null,
  retentionRecords: null,
  /** As JetStream's duplicate window default: two minutes catch a producer's retries. */
  dedupWindowMs: 2 * minute,
  /** As Kafka's session.timeout.ms default (45 s): a member that stops fetching loses its partitions
   * within a minute, yet a slow handler that fetches every few seconds keeps them. */
  memberTimeoutMs: 45 * second,
  /** As Kafka's offsets.retention.minutes default (7 days): a group gone for a week is forgotten. */
  groupIdleExpiryMs: 7 * day,
} as const;

/** A new inbox namespace's attributes (model/inbox-attributes.ts validates what a client sends). */
export const inboxDefaults = {
  /** Chat history lives in the application's database; the inbox only bridges a device's absence.
   * A week covers a phone left off over a holiday week-end and more, as push services keep messages
   * for offline devices (FCM keeps 4 weeks at most, APNs less). */
  maxAgeMs: 7 * day,
  /** A recipient offline for long should resync from history rather than replay an unbounded
   * backlog: 10,000 entries is a busy week of chat and a replay of a few megabytes. */
  maxDepth: 10_000,
  /** A device unseen for 30 days (a lost phone, a cleared browser) stops holding entries back; if it
   * comes back it gets a gap and resyncs from history. */
  forgetDeviceAfterMs: 30 * day,
  /** Off: every recipient gets every entry unless the namespace opts in to skipping idle ones. */
  stopFanoutAfterMs: null,
  /** A redelivered event (an outbox relay's retry after an outage) is caught for a day, as long as
   * the longest queue dedup window (dedupWindowMsMax). */
  dedupWindowMs: 1 * day,
} as const;

/** The ranges of inbox attributes, checked by model/inbox-attributes.ts and the PUT schema. */
export const inboxAttributeBounds = {
  /** From a minute, as queue retention, to a year. */
  maxAgeMsMin: 1 * minute,
  maxAgeMsMax: 365 * day,
  /** At least one entry; at most a million per recipient, which a replay in pages still reads. */
  maxDepthMax: 1_000_000,
  forgetDeviceAfterMsMin: 1 * minute,
  forgetDeviceAfterMsMax: 365 * day,
  stopFanoutAfterMsMin: 1 * minute,
  stopFanoutAfterMsMax: 365 * day,
  /** Up to a week: the ids of a busy namespace's appends are remembered this long, one row each. */
  dedupWindowMsMax: 7 * day,
} as const;

/** Defaults chosen for safety; SQS's differ where noted in docs/queues.md. */
export const queueDefaults = {
  visibilityTimeoutMs: 30 * second,
  retentionMs: 14 * day,
  delayMs: 0,
  receiveWaitMs: 0,
  maxMessageBytes: limits.messageBytesMax,
  retry: { initialDelayMs: 1 * second, multiplier: 2, maxDelayMs: 15 * minute, jitter: "full" as const },
  /** FIFO queues deduplicate for 5 minutes unless told otherwise, as SQS FIFO queues do. */
  fifoDedupWindowMs: 5 * minute,
} as const;

export const durations = { second, minute, hour, day } as const;
