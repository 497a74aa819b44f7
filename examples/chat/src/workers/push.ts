/**
 * The push worker: for each MessageCreated event, notifies the members who have no device connected
 * now (the inbox's per-recipient `connected`), through the push vendor. The realtime queue has its own
 * copy of the event, so nothing here touches the live socket: a push retried ten times never shows the
 * bubble twice.
 *
 * Per (message, recipient) the outcome is recorded in the chat database once known: `sent`, `revoked`
 * (the vendor refused the token; it is deleted), or `no_token`. A delivery skips recipients already
 * settled, and the vendor dedupes on the idempotency key `messageId:user`, so a retry after a crash
 * notifies nobody twice. Then:
 *
 * - a vendor failure (5xx, a timeout) for any recipient throws: the queue's retry policy brings the
 *   event back with a growing back-off, and only the recipients not yet settled are tried;
 * - a revoked token dead-letters the event at once (UnrecoverableError: the worker nacks it with
 *   `deadLetter: true`), with the reason naming the recipients whose token was revoked, instead of
 *   retrying what can never succeed;
 * - otherwise the event is acked.
 */
import { type ReceivedMessage, UnrecoverableError } from "@hopper/client";
import { wireLimits } from "@hopper/wire/limits";
import type { MessageCreated } from "../api/messages.js";
import type { ChatQueries } from "../db.js";
import type { HopperInboxes } from "../hopper-inboxes.js";

/** A vendor that has not answered by then counts as failed; the retry comes with the back-off. */
const vendorTimeoutMs = 5_000;

type VendorOutcome = "sent" | "revoked" | "failed";

async function callVendor(
  vendorUrl: string,
  push: { token: string; id: string; title: string; body: string },
  signal: AbortSignal,
): Promise<VendorOutcome> {
  try {
    const response = await fetch(`${vendorUrl}/push`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(push),
      signal: AbortSignal.any([signal, AbortSignal.timeout(vendorTimeoutMs)]),
    });
    await response.arrayBuffer();
    if (response.ok) return "sent";
    return response.status === 410 ? "revoked" : "failed";
  } catch {
    return "failed";
  }
}

export class VendorUnavailable extends Error {}

export interface PushWorkerDeps {
  queries: ChatQueries;
  inboxes: HopperInboxes;
  vendorUrl: string;
}

/** Tries every unsettled recipient once; answers how many failed and who has a revoked token. */
async function pushToRecipients(deps: PushWorkerDeps, event: MessageCreated, signal: AbortSignal) {
  const { queries, inboxes } = deps;
  const recipients = queries.members
    .all(event.conversationId)
    .map((member) => member.userId)
    .filter((user) => user !== event.sender);
  let failed = 0;
  for (const user of recipients) {
    if (queries.pushOutcome.get(event.messageId, user) !== undefined) continue;
    const { connected } = await inboxes.recipient(user);
    if (connected.length > 0) continue;
    const token = queries.pushToken.get(user)?.pushToken ?? null;
    const record = (outcome: string) =>
      queries.insertPushOutcome.run(event.messageId, user, outcome, new Date().toISOString());
    if (token === null) {
      record("no_token");
      continue;
    }
    const push = { token, id: `${event.messageId}:${user}`, title: event.sender, body: event.preview };
    const outcome = await callVendor(deps.vendorUrl, push, signal);
    if (outcome === "failed") {
      failed += 1;
      continue;
    }
    if (outcome === "revoked") queries.revokePushToken.run(user, token);
    record(outcome);
  }
  const revoked = recipients.filter(
    (user) => queries.pushOutcome.get(event.messageId, user)?.outcome === "revoked",
  );
  return { failed, revoked };
}

export function pushHandler(deps: PushWorkerDeps) {
  return async (message: ReceivedMessage, context: { signal: AbortSignal }): Promise<void> => {
    const event = message.body as MessageCreated;
    const { failed, revoked } = await pushToRecipients(deps, event, context.signal);
    if (failed > 0) throw new VendorUnavailable(`push vendor failed for ${failed} recipient(s)`);
    if (revoked.length === 0) return;
    // The worker nacks with deadLetter: the event goes to push.dlq now, with this reason, unretried.
    const reason = `push_token_revoked:${revoked.join(",")}`.slice(0, wireLimits.deadLetterReasonLengthMax);
    throw new UnrecoverableError(`push token revoked for ${revoked.join(", ")}`, { reason });
  };
}
