/**
 * Preloaded into a test's server process (`node --import <this file>`) to move its wall clock by
 * HOPPER_TEST_CLOCK_OFFSET_MS. A fixture written months ago holds leases and delays that ran out long
 * since; a server whose clock reads the time of the write sees them as they were written. The server
 * reads time only through `Date.now()` (clock.ts), so shifting that one function shifts all of it.
 */
const offsetText = process.env.HOPPER_TEST_CLOCK_OFFSET_MS;
const offsetMs = Number(offsetText);
if (offsetText === undefined || !Number.isSafeInteger(offsetMs)) {
  throw new Error(`HOPPER_TEST_CLOCK_OFFSET_MS must be an integer of milliseconds, not ${offsetText}`);
}
const realNow = Date.now.bind(Date);
Date.now = () => realNow() + offsetMs;

export {};
