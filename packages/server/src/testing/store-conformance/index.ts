/**
 * The Store contract as one suite, run unchanged against every implementation (the River pattern:
 * one test body, many drivers). A store passes only if every guarantee the broker relies on holds.
 * Each store's test file calls `exerciseStore`; the sections live one file per entity beside this one.
 * Test code: production code never imports it.
 */
import { describe } from "node:test";
import { exchangeTests } from "./exchanges.js";
import { policySuite, queueSuite, type StoreFactory } from "./harness.js";
import { inboxTests } from "./inboxes.js";
import { queueRecordTests, queueUpkeepTests } from "./queue-admin.js";
import { deadLetterTests } from "./queue-dead-letters.js";
import { fifoGroupTests, priorityTests } from "./queue-fifo.js";
import { atomicityTests, leaseTests } from "./queue-lease.js";
import { atMostOnceTests, deduplicationTests, overflowTests } from "./queue-policies.js";
import { redriveTests } from "./queue-redrive.js";
import { rejectTests } from "./queue-reject.js";
import { sendAndDepthTests } from "./queue-send.js";

export type { StoreFactory } from "./harness.js";

/** Registers every section of the suite against the stores `factory` opens, a fresh one per test. */
export function exerciseStore(factory: StoreFactory): void {
  describe(`Store conformance: ${factory.name}`, () => {
    const suite = queueSuite(factory);
    queueRecordTests(suite);
    sendAndDepthTests(suite);
    leaseTests(suite);
    deadLetterTests(suite);
    queueUpkeepTests(suite);
    exchangeTests(suite);
    atomicityTests(suite);
  });
  describe(`Store conformance, queue policies: ${factory.name}`, () => {
    const suite = policySuite(factory);
    fifoGroupTests(suite);
    priorityTests(suite);
    deduplicationTests(suite);
    overflowTests(suite);
    atMostOnceTests(suite);
    redriveTests(suite);
    rejectTests(suite);
  });
  inboxTests(factory);
}
