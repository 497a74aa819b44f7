// Every bound the benchmark keeps, in one place, each with the reason for its value.

// The workloads.

/** W1's producer keeps this many publishes unconfirmed: ten full send requests of 100. */
export const producerUnconfirmedMax = 1000;
/** The consumer holds this many unacked messages: a typical prefetch, above one full receive of 100. */
export const consumerUnackedMax = 256;
/** The server answers at most 100 messages per receive (API.md). */
export const receiveMessagesMax = 100;
/** The consumer's long poll: long enough not to spin when idle, short enough that stopping is quick. */
export const receiveWaitMs = 1000;
/** W2's first message is scheduled this far ahead, so setting up the timer does not count as lag. */
export const scheduleLeadMs = 20;

// The push consumer and the fan-out.

/** Fan-out publishes this many messages by default; each lands in every bound queue. */
export const fanoutMessagesDefault = 20_000;
/** The fan-out exchange is bound to this many queues, one consumer each. */
export const fanoutQueues = 3;
/** A push consumer's WebSocket must be open and consuming within this before the workload starts. */
export const pushReadyTimeoutMs = 10_000;
/** Between two looks at a queue's stats while waiting for a push consumer to start or its acks to land:
 * short, so the last ack is timed within a few ms; each look is one cheap GET. */
export const statsPollMs = 1;
/** A push consumer's stop waits for its handlers' acks, then closes the socket; past this it is left
 * to the server's stop, which closes the socket anyway. */
export const pushStopTimeoutMs = 10_000;
/** Reading a server's `/metrics` (before and after each workload) takes milliseconds; this is a hang. */
export const metricsTimeoutMs = 10_000;

// Deadlines: every workload ends, on success or with a message that says where it stood.

/** A healthy run moves messages every millisecond; ten seconds without any movement is a stall. */
export const progressStallMs = 10_000;
/** How often the watchdog looks: fine enough for second-scale bounds, cheap enough to be invisible. */
export const watchdogIntervalMs = 250;
/** W1 may take this long plus `throughputDeadlineMsPerMessage` per message: at 500 msg/s, eight
 * times below a healthy run on a 2-core machine, 50,000 messages still finish in time. */
export const throughputDeadlineMsBase = 30_000;
export const throughputDeadlineMsPerMessage = 2;
/** W2's messages still in flight when the schedule ends must all arrive within this. */
export const latencyDrainMs = 30_000;

// The server process.

/** A cold start (loading Fastify and SQLite, migrating the file) takes seconds on a busy machine. */
export const serverStartTimeoutMs = 20_000;
/** A graceful stop drains HTTP and closes the store; after this the server is killed instead. */
export const serverStopTimeoutMs = 10_000;
/** Only the end of the server's stderr explains a crash; keeping more would grow without bound. */
export const serverStderrTailBytesMax = 16 * 1024;

// The fsync probe.

/** One 4 KiB block per flush, as in DESIGN.md §12's measurement of the disk. */
export const probeWriteBytes = 4096;
/** Bounds the probe loop even if the clock misbehaved: no disk does a million flushes in a second. */
export const probeFlushesMax = 1_000_000;

// The command line.

/** The smallest body that still holds the sequence number and intended send time. */
export const bodyBytesMin = 64;
/** The server's ceiling for one message body (limits.messageBytesMax). */
export const bodyBytesMax = 1024 * 1024;
/** Every per-message array and bitmap is sized by this; ten million stays well inside memory. */
export const messagesMax = 10_000_000;
/** Above this, the load generator's timer resolution, not the server, would set the schedule. */
export const ratePerSecondMax = 100_000;
/** An hour is already far beyond what a benchmark run should take. */
export const latencySecondsMax = 3600;
/** W2's consumers: enough for a pool of idle workers; each holds a connection (or a socket) to the target. */
export const latencyConsumersMax = 200;

// W3, the backlog.

/** W3 fills the queue with this many messages by default before anyone consumes. */
export const backlogMessagesDefault = 100_000;
/** W3 drains with this many consumers at once, each with W1's credit and receive size. */
export const backlogConsumers = 4;
/** Each W3 phase (fill, drain) may take this long plus `throughputDeadlineMsPerMessage` per message. */
export const backlogDeadlineMsBase = 30_000;

// The FIFO workload.

/** The shape: 50,000 messages in 100 groups (keys g0..g99, round-robin), drained by 4
 * consumers, first into a standard queue and then into a FIFO queue (or the other way round). */
export const fifoMessagesDefault = 50_000;
export const fifoGroupsDefault = 100;
export const fifoConsumersDefault = 4;
/** A FIFO queue leases one message per group at a time, so groups bound its concurrency; more than
 * this many would make it a standard queue with extra bookkeeping, not a test of ordering. */
export const fifoGroupsMax = 100_000;
/** Consumers of one queue, each with its own credit; far above any useful count on two cores. */
export const fifoConsumersMax = 64;
/** The target: a FIFO queue keeps at least half the standard queue's end-to-end rate. */
export const fifoThroughputRatioMin = 0.5;

// PostgreSQL and the peers.

/** The database the PostgreSQL runs use unless --pg-url says otherwise. */
export const pgUrlDefault = "postgres://postgres@127.0.0.1:5432/test";
/** Connections per pool: the size of each Hopper node's pool (PostgresStore's default), given to the
 * peers too, so that no system gets more concurrency in the database than the others. */
export const pgPoolSize = 10;
/** Hopper's client puts up to 100 publishes or acks of one turn into one request (its batchSizeMax);
 * the plain SKIP LOCKED peer batches its INSERTs and DELETEs the same, and pg-boss its completes. */
export const batchItemsMax = 100;
/** The peers have no long poll, so an empty receive polls again after this pause until the receive
 * wait has passed. 5 ms adds at most ~5 ms to a message that arrives while a consumer sleeps, and
 * costs at most 200 empty statements a second per consumer. */
export const peerEmptyPollMs = 5;
/** The lease a peer takes on a received row: Hopper's default visibility timeout (30 s). */
export const peerLeaseSeconds = 30;
/** Hopper nodes per run. Each holds up to 11 connections (its pool and one listener), and PostgreSQL
 * allows 100 by default, shared with everything else on the server. */
export const nodesMax = 8;
/** Dropping a schema waits for locks; a run that cannot drop its schema in this time says so. */
export const schemaDropTimeoutMs = 30_000;

// The other brokers (compare), all on this machine's loopback.

/** RabbitMQ as this machine runs it: the default guest account, which RabbitMQ allows only on loopback. */
export const rabbitmqUrlDefault = "amqp://guest:guest@127.0.0.1:5672";
/** NATS with JetStream enabled, as this machine runs it. */
export const natsUrlDefault = "nats://127.0.0.1:4222";
/** The redis-server binary the bench starts privately (the machine's own Redis keeps nothing on disk). */
export const redisServerPathDefault = "/usr/bin/redis-server";
/** A private redis-server answers PING within milliseconds; this covers a busy machine. */
export const redisStartTimeoutMs = 20_000;
/** Between two PINGs while a private redis-server starts. */
export const redisStartPollMs = 50;
/** A peer's consumer stops (cancel, close) within this, or is left to the target's close. */
export const peerStopTimeoutMs = 10_000;
/** A JetStream publish or ack that gets no answer within this has failed (the client's default is 5 s;
 * a busy two-core machine can stall for seconds, and the workload's stall watchdog is 10 s). */
export const natsRequestTimeoutMs = 10_000;
/** Redis Streams consumers read up to their whole free credit per XREADGROUP (COUNT), at most this. */
export const redisReadCountMax = 256;
