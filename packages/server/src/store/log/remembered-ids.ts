/**
 * The message ids an inbox remembers for duplicates, by message id and then recipient. An append
 * names one message for many recipients, so its lookups and writes go to one small map of that
 * message's recipients, not to one large map keyed by both (which costs a string concatenation and
 * a cache miss in a table of every remembered id for each recipient). Iteration runs in the order the
 * messages were first remembered, which is the order their windows began.
 */
export interface RememberedId {
  seq: number;
  expiresAt: number;
}

export class RememberedIds {
  private readonly byMessage = new Map<string, Map<string, RememberedId>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(recipient: string, messageId: string): RememberedId | undefined {
    return this.byMessage.get(messageId)?.get(recipient);
  }

  /** Remembers the id; answers what it replaced. */
  set(recipient: string, messageId: string, remembered: RememberedId): RememberedId | undefined {
    let recipients = this.byMessage.get(messageId);
    if (!recipients) {
      recipients = new Map();
      this.byMessage.set(messageId, recipients);
    }
    const before = recipients.get(recipient);
    recipients.set(recipient, remembered);
    if (!before) this.count += 1;
    return before;
  }

  delete(recipient: string, messageId: string): boolean {
    const recipients = this.byMessage.get(messageId);
    if (!recipients?.delete(recipient)) return false;
    if (recipients.size === 0) this.byMessage.delete(messageId);
    this.count -= 1;
    return true;
  }

  *entries(): Generator<{ recipient: string; messageId: string } & RememberedId> {
    for (const [messageId, recipients] of this.byMessage)
      for (const [recipient, { seq, expiresAt }] of recipients)
        yield { recipient, messageId, seq, expiresAt };
  }
}

/** What one remembered id holds in memory besides the item overhead: its two strings. */
export function rememberedIdBytes(recipient: string, messageId: string): number {
  return recipient.length + 1 + messageId.length;
}
