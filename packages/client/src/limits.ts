// Every bound the client keeps, in one place, each with the reason for its value.

// The wire's limits module imports nothing, so reading it loads no TypeBox into a browser bundle.
import { wireLimits } from "@hopper/wire/limits";

/** The server takes at most 100 items in one batch call (API.md), so coalesced batches stop there. */
export const batchSizeMax = wireLimits.batchSizeMax;

/** The server takes a consumer's prefetch up to 1000 (the WebSocket consume), so the client checks it first. */
export const prefetchMax = wireLimits.prefetchMax;

/** A dead-lettering nack's reason is 1 to 128 characters (docs/api.md), so UnrecoverableError checks it. */
export const deadLetterReasonLengthMax = wireLimits.deadLetterReasonLengthMax;

/** The server holds a long poll for at most 20 s (API.md, receive `waitMs`). */
export const receiveWaitMsMax = wireLimits.waitMsMax;

/** A worker's default long poll is the longest the server allows, to keep idle workers quiet. */
export const receiveWaitMsDefault = receiveWaitMsMax;

/** More than 1000 handlers in one process means leases outnumber what one worker can heartbeat in time. */
export const workerConcurrencyMax = 1000;

/** A request that has no answer after this long is abandoned, so no call waits forever on a dead link. */
export const requestTimeoutMsDefault = 30_000;

/** The server's default lease length (DESIGN.md §3), used to extend when the worker was not told one. */
export const leaseMsDefault = 30_000;

/** With an unknown lease length, a heartbeat every 10 s keeps the server's 30 s default lease alive. */
export const heartbeatMsDefault = 10_000;

/** The first pause after a failed receive: long enough not to hammer a server that is restarting. */
export const receiveBackoffMsMin = 250;

/** The longest pause between failed receives, so a worker notices a recovered server within 30 s. */
export const receiveBackoffMsMax = 30_000;

/** An empty answer sooner than this (a short or ignored long poll) is followed by a pause, not a new poll. */
export const emptyReceiveIntervalMsMin = 1000;

/**
 * The server closes a WebSocket on a frame above 256 KiB; a publish batch whose send frame takes more
 * than this goes over HTTP instead.
 */
export const webSocketSendBytesMax = 192 * 1024;

/**
 * A kept-alive connection idle this long is closed by the client. It must be shorter than the server's
 * keep-alive (65 s for Hopper, 5 s for a bare Node server behind a proxy), or a request could go out on
 * a connection the server is closing at that moment.
 */
export const freeSocketIdleMs = 4_000;

/**
 * The server pings every 30 s; a connection that has heard nothing for two and a half of those is
 * taken for dead (a half-open TCP connection never errors by itself) and replaced.
 */
export const serverSilenceMsMax = 75_000;

/** Characters of an answer that is not JSON quoted in the error: enough to recognize it, no more. */
export const answerExcerptCharsMax = 200;
